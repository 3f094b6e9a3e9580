"""Registering sources and keeping a collection in line with each of them.

Within a source a document is identified by its relative path. A scan adds
new paths, updates changed ones in place (same document id, new blob, back to
Pending: the old index serves until the new one commits), leaves unchanged
ones alone (a file whose look has not changed is not even read), moves a
document whose bytes turn up at a new path while its old path is gone (a
rename: nothing is extracted or embedded again), and - only after a scan
that completed - purges the documents whose paths are proven gone. A scan
that stopped early (budget spent) or failed part-way purges nothing.

A scan that cannot see is not a deletion. A path is gone only when a
directory on its way was read completely, on the device the file was on,
and does not hold it (:meth:`SourceScan.absence`). A root that is another
directory than the one registered (an unmounted file system leaves its empty
mount point), a root that is empty while it held documents, and a subtree
that cannot be read make their documents *unreachable*: kept, searchable,
flagged with a reason, and back to normal when the files come back. Only a
scan with ``prune`` removes them, on the operator's word.

A dry run does all the reading and deciding and writes nothing.

Logs carry the source id, counts and reason codes; never a path.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from kbtui.errors import KbtuiError
from kbtui.ports import SourceCatalog, Storage
from kbtui.printable import printable
from kbtui.sources.git import NotAGitTopLevel, is_top_level, verify_top_level
from kbtui.sources.rules import SkipReason
from kbtui.sources.scan import (
    AcceptedFile,
    BeforeOpen,
    ScanLimits,
    SkippedPath,
    SourceScan,
    SourceUnavailable,
)
from store.file_lock import FileLock
from store.records import NON_TERMINAL, PathDocument, RegisteredSource

log = logging.getLogger(__name__)

MAX_NAME_LENGTH = 100

ProgressCallback = Callable[[int, int], object]

OUTCOMES = ("added", "updated", "renamed", "unchanged", "removed", "unreachable")

# Files that were there but could not be read as they should: their document
# keeps its last version (a file being written, or swapped, is read next time).
_KEPT_AS_THEY_WERE = frozenset({SkipReason.SWAPPED.value, SkipReason.CHANGED_DURING_READ.value})


class SyncInProgress(KbtuiError):
    pass


class SourceOfAnotherNode(KbtuiError):
    """On a store many nodes share, the source's root lives on another node's
    machine: only that node scans it (here the path may be another folder, or none)."""


class SyncFailed(KbtuiError):
    """The scan stopped part-way; nothing was purged. ``report`` has what was done."""

    def __init__(self, message: str, report: SyncReport) -> None:
        super().__init__(message)
        self.report = report


@dataclass(frozen=True)
class Tally:
    count: int = 0
    bytes: int = 0


@dataclass(frozen=True)
class FileOutcome:
    path: str  # printable: control and BiDi characters escaped
    outcome: str  # added | updated | renamed | unchanged | removed | unreachable | skipped
    reason: str | None
    bytes: int
    document_id: str | None
    previous_path: str | None = None  # renamed: where the bytes were before (printable)


@dataclass(frozen=True)
class SyncReport:
    """What one scan of a source did (or, in a dry run, would do)."""

    source_id: str | None  # None: a dry run of a path not registered yet
    kind: str
    collection_id: str
    status: str  # completed | incomplete | unreachable | failed
    dry_run: bool
    listed: int
    added: Tally
    updated: Tally
    renamed: Tally
    unchanged: Tally
    removed: Tally
    unreachable: Tally  # documents kept: the scan could not prove their files gone
    skipped: dict[str, Tally]
    files: tuple[FileOutcome, ...]
    # Documents this scan left for the pipeline: added, updated, and unchanged
    # ones an earlier run queued but never finished. Collected during the scan,
    # not read back at the end: a running node may already have taken them.
    pending_document_ids: tuple[str, ...]
    elapsed_s: float

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    @property
    def skipped_count(self) -> int:
        return sum(t.count for t in self.skipped.values())

    @property
    def changed(self) -> bool:
        return bool(self.added.count or self.updated.count or self.renamed.count or self.removed.count)

    def summary(self) -> str:
        """``"96 added, 6 skipped (4 unsupported_format, 2 too_large)"``: counts by outcome and reason, no names."""
        parts = [f"{getattr(self, name).count} {name}" for name in OUTCOMES if getattr(self, name).count]
        if not parts:
            parts = ["nothing to add"]
        if self.skipped:
            detail = ", ".join(f"{t.count} {reason}" for reason, t in sorted(self.skipped.items()))
            parts.append(f"{self.skipped_count} skipped ({detail})")
        return ", ".join(parts)

    def to_json(self, *, with_files: bool = True) -> dict[str, object]:
        """The stable JSON shape of a report (documented in README.md)."""

        def tally(t: Tally) -> dict[str, int]:
            return {"count": t.count, "bytes": t.bytes}

        payload: dict[str, object] = {
            "source_id": self.source_id,
            "kind": self.kind,
            "collection": self.collection_id,
            "status": self.status,
            "dry_run": self.dry_run,
            "listed": self.listed,
            **{name: tally(getattr(self, name)) for name in OUTCOMES},
            "skipped": {reason: tally(t) for reason, t in sorted(self.skipped.items())},
            "pending_document_ids": list(self.pending_document_ids),
            "elapsed_s": round(self.elapsed_s, 3),
        }
        if with_files:
            payload["files"] = [
                {"path": f.path, "outcome": f.outcome, "reason": f.reason, "bytes": f.bytes,
                 "document_id": f.document_id, "previous_path": f.previous_path}
                for f in self.files
            ]
        return payload

    def changes_json(self) -> str:
        """What the last scan changed or skipped, file by file (unchanged files only counted):
        kept, sealed, with the source for the terminal UI."""
        payload = self.to_json(with_files=False)
        payload["files"] = [
            {"path": f.path, "outcome": f.outcome, "reason": f.reason, "bytes": f.bytes,
             "previous_path": f.previous_path}
            for f in self.files if f.outcome != "unchanged"
        ]
        payload["finished_at"] = time.time()
        return json.dumps(payload)


@dataclass
class _ReportBuilder:
    source_id: str | None
    kind: str
    collection_id: str
    dry_run: bool
    started: float = field(default_factory=time.monotonic)
    listed: int = 0
    files: list[FileOutcome] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    sizes: Counter = field(default_factory=Counter)
    ignored: int = 0
    queued: list[str] = field(default_factory=list)

    def record(self, source_path: str, outcome: str, size: int, *, reason: str | None = None,
               document_id: str | None = None, previous_path: str | None = None) -> None:
        key = f"skipped:{reason}" if outcome == "skipped" else outcome
        self.counts[key] += 1
        self.sizes[key] += size
        self.files.append(FileOutcome(
            printable(source_path), outcome, reason, size, document_id,
            printable(previous_path) if previous_path is not None else None,
        ))

    def build(self, status: str) -> SyncReport:
        def tally(key: str) -> Tally:
            return Tally(self.counts[key], self.sizes[key])

        skipped = {
            key.split(":", 1)[1]: tally(key) for key in self.counts if key.startswith("skipped:")
        }
        if self.ignored:
            skipped[SkipReason.GITIGNORED.value] = Tally(self.ignored, 0)
        return SyncReport(
            source_id=self.source_id,
            kind=self.kind,
            collection_id=self.collection_id,
            status=status,
            dry_run=self.dry_run,
            listed=self.listed,
            **{name: tally(name) for name in OUTCOMES},
            skipped=skipped,
            files=tuple(self.files),
            pending_document_ids=tuple(self.queued),
            elapsed_s=time.monotonic() - self.started,
        )


# ---------------------------------------------------------------- registration


def check_source_name(name: str) -> str:
    """A label for the source: trimmed, short, one printable line."""
    cleaned = name.strip()
    if not cleaned:
        raise KbtuiError("a source name must not be empty")
    if len(cleaned) > MAX_NAME_LENGTH:
        raise KbtuiError(f"a source name is at most {MAX_NAME_LENGTH} characters")
    if printable(cleaned) != cleaned:
        raise KbtuiError("a source name may not contain control or formatting characters")
    return cleaned


@dataclass(frozen=True)
class SourceSpec:
    """What a path would be as a source: kind and real root (nothing registered)."""

    kind: str
    root: Path


def inspect_path(path: Path, *, home: Path) -> SourceSpec:
    """Decide what ``path`` is as a source: a file, a Git working tree's top
    level, or a folder. A symlink named here is followed once (the operator
    chose it); the real path is what gets registered and re-checked."""
    if not str(path).strip():
        raise KbtuiError("an empty path")
    if not path.exists():
        raise KbtuiError("no such file or directory")
    real = Path(os.path.realpath(path))
    try:
        str(real).encode("utf-8")
    except UnicodeEncodeError:
        raise KbtuiError("the path is not valid UTF-8, so it cannot be registered") from None
    own = Path(os.path.realpath(home))
    if real == own or own in real.parents:
        raise KbtuiError("that is kbtui's own data directory")
    if real.is_file():
        return SourceSpec("file", real)
    if not real.is_dir():
        raise KbtuiError("not a regular file or a directory")
    return SourceSpec("git" if is_top_level(real) else "folder", real)


def root_identity(spec: SourceSpec) -> tuple[int, int]:
    """(device, inode) of the directory a source is registered at: the folder,
    the working tree, or a single file's folder."""
    info = os.stat(spec.root.parent if spec.kind == "file" else spec.root, follow_symlinks=False)
    return info.st_dev, info.st_ino


def register_source(
    store: Storage, spec: SourceSpec, collection_id: str, *, name: str | None = None, include_sensitive: bool = False
) -> RegisteredSource:
    """Register ``spec`` as a source of ``collection_id``. Without a ``name`` the
    folder's (or file's) own name is used, made unique in the collection."""
    if spec.kind == "git" and verify_top_level(spec.root) != spec.root:
        raise KbtuiError("the folder is not the top level of its Git working tree")
    if name is not None:
        label = check_source_name(name)
    else:
        taken = {s.name for s in store.sources.list_sources(collection_id)}
        # A long file name is cut, not refused: the operator did not choose this label.
        base = check_source_name((printable(spec.root.name).strip() or "source")[: MAX_NAME_LENGTH - 4])
        label, number = base, 1
        while label in taken:
            number += 1
            label = f"{base}-{number}"
    registered = store.sources.register_source(kind=spec.kind, root=str(spec.root), collection_id=collection_id, name=label,
        include_sensitive=include_sensitive, root_identity=root_identity(spec),
    )
    log.info("source %s registered (%s)", registered.id, spec.kind)
    return registered


# ---------------------------------------------------------------- scanning


@contextmanager
def _exclusive_sync(home: Path, source_id: str, wait_s: float = 0.0) -> Iterator[None]:
    """One scan per source at a time, across processes: wait up to ``wait_s``
    for a running one to finish (0: not at all)."""
    lock_dir = home / "locks"
    lock_dir.mkdir(mode=0o700, exist_ok=True)
    deadline = time.monotonic() + wait_s
    while (lock := FileLock.try_acquire(lock_dir / f"source-{source_id}.lock")) is None:
        if time.monotonic() >= deadline:
            raise SyncInProgress("another scan of this source is running" + (" (waited for it)" if wait_s else ""))
        time.sleep(0.2)
    with lock:
        yield


def _own_data_inside(root: Path, home: Path | None) -> tuple[str, ...]:
    """The knowledge base's data directory, relative to ``root``, when it lies inside it."""
    if home is None:
        return ()
    try:
        inside = Path(os.path.realpath(home)).relative_to(root)
    except ValueError:
        return ()
    return (inside.as_posix(),) if inside.parts else ()


def sync_source(
    store: Storage,
    source_id: str,
    limits: ScanLimits,
    *,
    purge: Callable[[str], bool],
    dry_run: bool = False,
    prune: bool = False,
    before_open: BeforeOpen | None = None,
    on_progress: ProgressCallback | None = None,
    wait_s: float = 0.0,
) -> SyncReport:
    """Scan a registered source and bring its collection in line with it.

    Writes blobs and Pending rows only; indexing is the caller's next step
    (the report lists the Pending document ids). ``purge`` deletes one
    document (the node's single purge path, which also drops its ANN labels).
    ``prune`` also removes what the scan could not see (the operator's word
    that it is gone), and takes the root as it is now.
    Raises the validation error when the source's root no longer holds,
    :class:`SyncFailed` (with the partial report) when the scan stops part-way,
    :class:`SyncInProgress` when another scan of the source still runs after ``wait_s``.
    """
    source = store.sources.get_source(source_id)
    _refuse_another_nodes_source(store, source)
    guard = nullcontext() if dry_run else _exclusive_sync(store.home, source.id, wait_s)
    with guard:
        return _Sync(store, source, limits, purge, dry_run, before_open, on_progress, prune=prune).run()


def _refuse_another_nodes_source(store: Storage, source: RegisteredSource) -> None:
    coordination = store.coordination
    if coordination is None or source.owner_node in (None, coordination.node_id):
        return
    owner = next((n for n in coordination.nodes() if n.id == source.owner_node), None)
    where = f"the node on {printable(owner.host)[:64]}" if owner is not None else "another node"
    raise SourceOfAnotherNode(
        f"this source's folder is on the machine of {where} (node {str(source.owner_node)[:8]}), which scans and "
        "watches it; run kbtui sync there"
    )


def preview_path(
    spec: SourceSpec, collection_id: str, limits: ScanLimits, *, home: Path, include_sensitive: bool = False,
    on_progress: ProgressCallback | None = None,
) -> SyncReport:
    """A dry run of a path that is not a source yet: what adding it would do."""
    source = RegisteredSource(
        id="", kind=spec.kind, collection_id=collection_id, name="", root=str(spec.root),
        include_sensitive=include_sensitive, watching=True, watch_state=None, created_at=0.0,
        last_scan_at=None, last_scan_status=None, last_commit=None,
    )
    return _Sync(None, source, limits, lambda _: False, True, None, on_progress, home=home).run()


class _Sync:
    def __init__(
        self,
        store: Storage | None,
        source: RegisteredSource,
        limits: ScanLimits,
        purge: Callable[[str], bool],
        dry_run: bool,
        before_open: BeforeOpen | None,
        on_progress: ProgressCallback | None,
        *,
        home: Path | None = None,
        prune: bool = False,
    ) -> None:
        self.store = store
        self.prune = prune
        self.home = home if store is None else store.home
        self.purge = purge
        self.source = source
        self.dry_run = dry_run
        self.limits = limits
        self.before_open = before_open
        self.on_progress = on_progress
        self.report = _ReportBuilder(source.id or None, source.kind, source.collection_id, dry_run)
        self.kept: set[str] = set()
        self.moved_from: set[str] = set()
        # Listed paths that could not be read: path -> skip reason.
        self.unread: dict[str, str] = {}
        self.registered = bool(source.id)
        self.by_path: dict[str, PathDocument] = (
            store.sources.documents_of(source.id) if store is not None and self.registered else {}
        )

    def _catalog(self) -> SourceCatalog:
        # Only a dry run of a path not registered yet goes without a store.
        assert self.store is not None, "a sync of a registered source has a store"
        return self.store.sources

    def run(self) -> SyncReport:
        root = Path(self.source.root)
        scan = SourceScan(
            root, self.limits, kind=self.source.kind, include_sensitive=self.source.include_sensitive,
            excluded=_own_data_inside(root, self.home), before_open=self.before_open,
            known={path: doc.state for path, doc in self.by_path.items() if doc.state is not None},
        )
        try:
            scan.open()
        except (SourceUnavailable, NotAGitTopLevel) as unavailable:
            self._record("failed")
            self._record_reachability(getattr(unavailable, "reason", "root_replaced"), None, None)
            raise
        except BaseException:
            self._record("failed")
            raise
        with scan:
            guard = None if self.prune else self._root_guard(scan)
            try:
                self._take(scan)
            except Exception as exc:
                raise self._failed(exc) from exc
            except BaseException:
                self._finish("failed")
                raise
            if scan.budget_exhausted:
                return self._finish("incomplete", scan.head_commit)
            try:
                unreachable = self._settle_gone_paths(scan, guard)
            except Exception as exc:
                raise self._failed(exc, "some documents of removed paths may remain; scan again") from exc
            seen = guard is None or not unreachable
            self._record_reachability(None if seen else guard, unreachable, scan.root_identity if seen else None)
        return self._finish("completed" if seen else "unreachable", scan.head_commit)

    def _root_guard(self, scan: SourceScan) -> str | None:
        """Why the whole root cannot vouch for what it does not hold, or None.

        Another directory than the one registered (a new device or inode: an
        unmounted file system's mount point, a folder made anew), or a folder
        with no entry at all while it held documents. Its documents that the
        scan does not see are kept, not removed.
        """
        if not self.by_path:
            return None
        device, _ = current = scan.root_identity
        registered = self.source.root_identity
        if registered is None:
            # Registered before roots were remembered: the devices its files were read on tell.
            devices = {doc.state.device for doc in self.by_path.values() if doc.state is not None}
            if devices and device not in devices:
                return "root_replaced"
        elif registered != current:
            return "root_replaced"
        if self.source.kind != "file" and scan.root_is_empty():
            return "root_empty"
        return None

    def _take(self, scan: SourceScan) -> None:
        self.report.listed = scan.listed_count
        self.report.ignored = scan.ignored_count
        listed = scan.listed_paths()
        # Documents whose path is no longer listed at all: their bytes may turn
        # up at a new path (a rename), which then takes the document along.
        self.renamable: dict[str, list[str]] = {}
        for path, document in sorted(self.by_path.items()):
            if path not in listed:
                self.renamable.setdefault(document.content_hash, []).append(path)
        for done, outcome in enumerate(scan, start=1):
            if isinstance(outcome, SkippedPath):
                self.report.record(outcome.source_path, "skipped", outcome.size, reason=outcome.reason.value)
                if outcome.source_path in self.by_path:
                    if outcome.reason.value in _KEPT_AS_THEY_WERE:
                        self.kept.add(outcome.source_path)
                    elif outcome.reason is SkipReason.UNREADABLE:
                        self.unread[outcome.source_path] = outcome.reason.value
            elif isinstance(outcome, AcceptedFile):
                self._store(outcome)
            else:
                current = self.by_path[outcome.source_path]
                self._unchanged(outcome.source_path, outcome.size, current)
            if self.on_progress is not None:
                self.on_progress(done, scan.listed_count)

    def _unchanged(self, path: str, size: int, current: PathDocument) -> None:
        self.kept.add(path)
        self.report.record(path, "unchanged", size, document_id=current.document_id)
        if current.status in NON_TERMINAL:
            self.report.queued.append(current.document_id)

    def _store(self, accepted: AcceptedFile) -> None:
        path, size = accepted.source_path, len(accepted.data)
        current = self.by_path.get(path)
        if current is None and self.registered:
            current = self._catalog().loose_document_at(self.source.collection_id, path)
            if current is not None and not self.dry_run:
                # A document kept from an earlier registration: adopted, not added twice.
                self._catalog().adopt_document(self.source.id, current.document_id)
        self.kept.add(path)
        if current is not None and current.content_hash == accepted.content_hash:
            if not self.dry_run:
                self._catalog().record_file_state(current.document_id, accepted.state)
            self._unchanged(path, size, current)
            return
        if current is not None:
            if self.dry_run or self._catalog().update_source_document(current.document_id,
                fmt=accepted.fmt, data=accepted.data, content_hash=accepted.content_hash, state=accepted.state,
            ):
                self.report.record(path, "updated", size, document_id=current.document_id)
                self.report.queued.append(current.document_id)
                return
        previous = self._renamed_from(accepted.content_hash)
        if previous is not None:
            moved = self.by_path[previous]
            if self.dry_run or self._catalog().move_source_document(moved.document_id, source_path=path, state=accepted.state
            ):
                self.moved_from.add(previous)
                self.report.record(path, "renamed", size, document_id=moved.document_id, previous_path=previous)
                if moved.status in NON_TERMINAL:
                    self.report.queued.append(moved.document_id)
                return
        if self.dry_run:
            self.report.record(path, "added", size)
            return
        document_id = self._catalog().add_source_document(self.source.id, self.source.collection_id,
            source_path=path, display_name=path, fmt=accepted.fmt,
            data=accepted.data, content_hash=accepted.content_hash, state=accepted.state,
        )
        self.report.record(path, "added", size, document_id=document_id)
        self.report.queued.append(document_id)

    def _renamed_from(self, content_hash: str) -> str | None:
        candidates = self.renamable.get(content_hash)
        return candidates.pop(0) if candidates else None

    def _settle_gone_paths(self, scan: SourceScan, guard: str | None) -> dict[str, str]:
        """Remove the documents whose files are proven gone; return the others
        the scan did not see (document id -> why they are kept)."""
        unreachable: dict[str, str] = {}
        for path, document in sorted(self.by_path.items()):
            if path in self.kept or path in self.moved_from:
                continue
            why = None if self.prune else guard or self.unread.get(path) or scan.unseen_reason(
                path, document.state.device if document.state is not None else scan.root_identity[0]
            )
            if why is not None:
                unreachable[document.document_id] = why
                self.report.record(path, "unreachable", document.size_bytes, reason=why,
                                   document_id=document.document_id)
            elif self.dry_run or self.purge(document.document_id):
                self.report.record(path, "removed", document.size_bytes, document_id=document.document_id)
        return unreachable

    def _record_reachability(
        self, reason: str | None, documents: dict[str, str] | None, identity: tuple[int, int] | None
    ) -> None:
        if self.registered and not self.dry_run:
            self._catalog().record_reachability(self.source.id, reason=reason, documents=documents, root_identity=identity)

    def _failed(self, exc: Exception, consequence: str = "nothing was removed") -> SyncFailed:
        # The caller hears of it (SyncFailed); the log keeps the kind of error for the operator.
        log.info("source %s scan stopped part-way: %s", self.source.id or "-", type(exc).__name__)
        return SyncFailed(f"the scan stopped part-way ({type(exc).__name__}); {consequence}", self._finish("failed"))

    def _record(self, status: str, report: SyncReport | None = None, head: str | None = None) -> None:
        if self.registered and not self.dry_run and self.store is not None:
            self.store.sources.record_scan(self.source.id, status,
                report_json=report.changes_json() if report is not None else None, last_commit=head,
            )

    def _finish(self, status: str, head: str | None = None) -> SyncReport:
        report = self.report.build(status)
        self._record(status, report, head)
        log.info(
            "source %s scan %s%s: listed %d, added %d, updated %d, renamed %d, unchanged %d, removed %d, skipped %s",
            self.source.id or "-", status, " (dry run)" if self.dry_run else "", report.listed,
            report.added.count, report.updated.count, report.renamed.count, report.unchanged.count,
            report.removed.count, {reason: t.count for reason, t in sorted(report.skipped.items())},
        )
        return report


__all__ = [
    "OUTCOMES",
    "FileOutcome",
    "ScanLimits",
    "SourceSpec",
    "SourceUnavailable",
    "SyncFailed",
    "SyncInProgress",
    "SyncReport",
    "Tally",
    "check_source_name",
    "inspect_path",
    "preview_path",
    "register_source",
    "sync_source",
]
