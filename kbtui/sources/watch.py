"""Keeping a running node's sources in sync: a catch-up scan at start, then file
events (debounced) or, where a filesystem cannot deliver them, periodic scans.

:class:`SourceWatcher` runs beside the actor pipeline (the runtime starts it
after the actors and stops it first). It never indexes anything itself: a
scan writes Pending rows, and it then wakes the pipeline's admission, the
same path every other writer of Pending rows uses.

* At start, every watched source (watching on, scanned at least once) is
  rescanned: whatever changed while no node ran is picked up, and a file
  whose size, times and inode are unchanged is not even read.
* File events come from watchfiles (inotify on Linux), run in a thread of
  their own; a burst of saves is grouped until it has been quiet for
  ``source_watch_quiet_ms``, then each touched source is rescanned once.
  Inside a Git working tree only ``HEAD`` and the refs count from ``.git/``,
  so a new commit on the branch is followed.
* A source on a network or FUSE filesystem (where changes made elsewhere
  raise no event), or whose watch failed (e.g. the inotify limit), is scanned
  every ``source_poll_interval_s`` instead; ``kbtui sources`` says which.
* Registrations are re-read every couple of seconds: a source added, removed
  or switched on or off by another process is followed.

Logs carry source ids, counts and reason codes; never a path.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from kbtui.errors import OPERATOR_ERRORS
from kbtui.ports import Storage
from kbtui.sources.scan import ScanLimits
from kbtui.sources.sync import SyncFailed, SyncInProgress, sync_source
from store.records import RegisteredSource

log = logging.getLogger(__name__)


class _Silence(logging.Filter):
    """watchfiles logs the changed paths at DEBUG: file names never reach a log."""

    def filter(self, record: logging.LogRecord) -> bool:
        return False


for _name in ("watchfiles", "watchfiles.main", "watchfiles.watcher"):
    logging.getLogger(_name).addFilter(_Silence())

# Filesystems whose changes made elsewhere raise no inotify event.
UNWATCHABLE_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "ceph", "glusterfs", "lustre", "davfs", "ncpfs", "coda",
    "gpfs", "beegfs", "fuse.sshfs", "fuse.rclone", "fuse.s3fs", "fuse.gcsfuse", "fuse.davfs2",
})
REFRESH_S = 2.0  # how often registrations are re-read
# Inside .git/ only these count: a moved branch, a new commit, a checkout.
_GIT_EVENTS = ("HEAD", "refs/", "packed-refs")
_EDITOR_TEMP_SUFFIXES = (".swp", ".swx", ".swo", "~", ".tmp", ".part", ".crdownload")


def filesystem_type(path: Path, mountinfo: str | None = None) -> str | None:
    """The type of the filesystem ``path`` lives on, from /proc/self/mountinfo (None when unknown)."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return None
    target = os.path.realpath(path)
    best: tuple[int, str] | None = None
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        try:
            separator = fields.index("-")
        except ValueError:
            continue
        mount_point = fields[4].encode().decode("unicode_escape")  # octal escapes such as \040
        fstype = fields[separator + 1]
        inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
        if inside and (best is None or len(mount_point) >= best[0]):
            best = (len(mount_point), fstype)
    return None if best is None else best[1]


def watchable(path: Path, mountinfo: str | None = None) -> bool:
    """Whether file events on ``path``'s filesystem show every change (False: scan it periodically)."""
    fstype = filesystem_type(path, mountinfo)
    return fstype is None or fstype not in UNWATCHABLE_FILESYSTEMS


def counts_as_change(path: str, home: str) -> bool:
    """Whether an event on ``path`` may mean a source changed."""
    if path == home or path.startswith(home + "/"):
        return False  # the knowledge base's own writes
    if path.endswith(_EDITOR_TEMP_SUFFIXES) or os.path.basename(path).startswith(".#"):
        return False
    marker = path.find("/.git/")
    if marker >= 0:
        return path[marker + len("/.git/"):].startswith(_GIT_EVENTS)
    return not path.endswith("/.git")


@dataclass(frozen=True)
class _Watched:
    source_id: str
    path: str  # what is watched: the root, or a single file's folder
    single_file: str | None  # a file source's own path

    def touched_by(self, changed: str) -> bool:
        if self.single_file is not None:
            return changed == self.single_file
        return changed == self.path or changed.startswith(self.path.rstrip("/") + "/")


class _EventThread:
    """One watchfiles watch over some paths, handing batches of changed paths over."""

    def __init__(self, paths: list[str], *, recursive: bool, quiet_ms: int, home: str, out: queue.Queue) -> None:
        self.paths = paths
        self.failed = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(recursive, quiet_ms, home, out), name="kbtui-source-events", daemon=True
        )
        self._thread.start()

    def _run(self, recursive: bool, quiet_ms: int, home: str, out: queue.Queue) -> None:
        import watchfiles

        try:
            for changes in watchfiles.watch(
                *self.paths,
                watch_filter=lambda _change, path: counts_as_change(path, home),
                debounce=max(quiet_ms * 10, 1600),
                step=quiet_ms,
                stop_event=self._stop,
                rust_timeout=1000,
                yield_on_timeout=True,
                raise_interrupt=False,
                recursive=recursive,
                ignore_permission_denied=True,
            ):
                if self._stop.is_set():
                    return
                if changes:
                    out.put({path for _change, path in changes})
        except Exception as exc:  # noqa: BLE001 - an unwatchable tree falls back to polling
            if not self._stop.is_set():
                log.warning("watching sources failed (%s); scanning them periodically instead", type(exc).__name__)
                self.failed.set()
                out.put(set())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class SourceWatcher:
    """Keeps the sources of a running node in sync (see the module docstring)."""

    def __init__(
        self,
        store: Storage,
        *,
        limits: ScanLimits,
        purge: Callable[[str], bool],
        mode: str = "auto",
        poll_interval_s: float = 60.0,
        quiet_ms: int = 200,
        refresh_s: float = REFRESH_S,
    ) -> None:
        self.store = store
        self.limits = limits
        self.purge = purge
        self.mode = mode
        self.poll_interval_s = poll_interval_s
        self.quiet_ms = quiet_ms
        self.refresh_s = refresh_s
        self.home = os.path.realpath(store.home)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._wake: Callable[[], None] = lambda: None
        self._unwatchable: set[str] = set()
        self._changes: queue.Queue[set[str]] = queue.Queue()
        self.scans = 0  # scans run (for tests and status)

    # ------------------------------------------------------------ life cycle

    def start(self, wake: Callable[[], None]) -> None:
        """Start watching; ``wake`` tells the pipeline that Pending rows are waiting."""
        self._wake = wake
        self._thread = threading.Thread(target=self._run, name="kbtui-sources", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop watching: a scan in progress stops between two files (it purges nothing)."""
        self._stop.set()
        self._changes.put(set())
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
            if self._thread.is_alive():
                log.warning("the source watcher is still busy at shutdown")
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # ------------------------------------------------------------ the loop

    def _run(self) -> None:
        with self.store.session():
            try:
                while not self._stop.is_set():
                    try:
                        self._watch_once()
                    except Exception as exc:  # noqa: BLE001 - the watcher must outlive any one failure
                        log.error("source watcher: %s; starting over", type(exc).__name__)
                        self._stop.wait(self.refresh_s)
            finally:
                try:
                    self.store.sources.clear_watch_states()
                except Exception as exc:  # noqa: BLE001 - a read-only or full disk at shutdown
                    log.warning("could not clear the sources' watch state (%s)", type(exc).__name__)

    def _watch_once(self) -> None:
        """Set up for the current registrations, catch up, then follow events until they change."""
        stamp = self.store.sources.registration_stamp()
        sources = {s.id: s for s in self.store.sources.watched_sources()}
        modes = {source_id: self._mode_for(source) for source_id, source in sources.items()}
        self.store.sources.clear_watch_states()
        self.store.sources.set_watch_state(modes)
        for source_id in sources:
            if self._stop.is_set():
                return
            self._sync(source_id)
        watched = [self._watched(sources[i]) for i, mode in modes.items() if mode == "events"]
        threads = self._event_threads(watched)
        polling = {i: time.monotonic() + self.poll_interval_s for i, mode in modes.items() if mode == "polling"}
        retry: set[str] = set()
        try:
            while not self._stop.is_set():
                changed = self._take_changes(self.refresh_s)
                if self._stop.is_set():
                    return
                if any(t.failed.is_set() for t in threads):
                    self._unwatchable.update(w.source_id for t in threads if t.failed.is_set()
                                             for w in watched if w.path in t.paths)
                    return  # set up again: those sources are polled now
                due = {w.source_id for w in watched for path in changed if w.touched_by(path)} | retry
                now = time.monotonic()
                due |= {i for i, at in polling.items() if now >= at}
                retry = {i for i in sorted(due) if not self._sync(i)}
                for i in polling.keys() & due:
                    polling[i] = time.monotonic() + self.poll_interval_s
                if self.store.sources.registration_stamp() != stamp:
                    return
        finally:
            for thread in threads:
                thread.stop()

    def _take_changes(self, timeout_s: float) -> set[str]:
        """The paths of the next batch of events (empty after ``timeout_s``), with any already queued."""
        try:
            changed = set(self._changes.get(timeout=timeout_s))
        except queue.Empty:
            return set()
        while True:
            try:
                changed |= self._changes.get_nowait()
            except queue.Empty:
                return changed

    def _mode_for(self, source: RegisteredSource) -> str:
        if self.mode == "polling" or source.id in self._unwatchable or not watchable(Path(source.root)):
            if source.id not in self._unwatchable and self.mode != "polling":
                log.info("source %s is on a filesystem without change events; scanning it every %.0f s",
                         source.id, self.poll_interval_s)
            return "polling"
        return "events"

    @staticmethod
    def _watched(source: RegisteredSource) -> _Watched:
        if source.kind == "file":
            return _Watched(source.id, os.path.dirname(source.root), source.root)
        return _Watched(source.id, source.root, None)

    def _event_threads(self, watched: Iterable[_Watched]) -> list[_EventThread]:
        trees = sorted({w.path for w in watched if w.single_file is None})
        folders = sorted({w.path for w in watched if w.single_file is not None})
        threads = []
        for paths, recursive in ((trees, True), (folders, False)):
            existing = [p for p in paths if os.path.isdir(p)]
            if existing:
                threads.append(_EventThread(
                    existing, recursive=recursive, quiet_ms=self.quiet_ms, home=self.home, out=self._changes
                ))
        return threads

    def _sync(self, source_id: str) -> bool:
        """Rescan one source; False when another scan of it runs (try again later)."""

        def stop_between_files(done: int, total: int) -> None:
            if self._stop.is_set():
                raise _Stopping()

        try:
            report = sync_source(self.store, source_id, self.limits, purge=self.purge, on_progress=stop_between_files)
        except SyncInProgress:
            return False
        except SyncFailed as failure:
            report = failure.report
        except OPERATOR_ERRORS as problem:
            # Gone, unmounted, no longer a working tree: it stays registered and is tried again.
            log.warning("source %s could not be scanned: %s", source_id, type(problem).__name__)
            return True
        self.scans += 1
        if report.pending_document_ids:
            self._wake()
        return True


class _Stopping(Exception):
    """The node is stopping: a scan gives up between two files."""
