"""The safe walk over a source: a Git working tree, a folder, or one file.

What is listed depends on the kind: git decides for a working tree (tracked,
plus untracked and not ignored); a folder is walked here, honouring the
``.gitignore`` files it holds; a single file lists itself. From there on one
set of rules and one way of reading apply to every kind:

* the root is re-verified at every scan (still a directory, still git's top
  level for a repository, still the same real path);
* every directory on the way is opened relative to its parent with
  ``O_NOFOLLOW | O_DIRECTORY``, so a directory swapped for a symlink is
  refused, and a symlink is never followed (a link out of the tree, or a
  loop, is skipped as ``symlink``);
* the file is ``lstat``-ed (symlinks and non-regular files refused), then
  opened with :func:`store.files.open_source`: ``O_NOFOLLOW | O_NONBLOCK``
  (a FIFO can never block), ``fstat``-ed and its device/inode compared with
  the ``lstat`` result, so a file swapped between check and open is refused;
* reads are bounded by the per-file limit (counted on the bytes read) and the
  aggregate budget, and a file that changes while being read is refused;
* content decides what is text (:func:`kbtui.extract.detect_format`).

A file whose look (size, times, inode) matches what the caller knows from an
earlier read is not read again (:class:`UnchangedFile`). Nothing here
touches the database: the scan yields outcomes, the caller decides what they
mean for the catalog.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from pathspec import GitIgnoreSpec

from kbtui.errors import KbtuiError
from kbtui.extract import SNIFF_BYTES, detect_format, needs_content
from kbtui.sources.git import (
    NotAGitTopLevel,
    count_ignored_entries,
    head_commit,
    list_candidate_paths,
    verify_top_level,
)
from kbtui.sources.paths import normalise_source_path
from kbtui.sources.rules import VIRTUALENV_MARKER, SkipReason, directory_skip_reason, path_skip_reason
from store.files import SourceRefused, open_source
from store.records import FileState

log = logging.getLogger(__name__)

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# A .gitignore larger than this is not read (and ignores nothing).
MAX_GITIGNORE_BYTES = 1 << 20
# Deeper than any real tree nests; deeper directories are skipped as too_deep.
MAX_DEPTH = 128

# Called with the source path after the file was checked and before it is
# opened: the seam where tests swap the file, as an attacker would.
BeforeOpen = Callable[[str], None]


class SourceUnavailable(KbtuiError):
    """The source's root cannot be scanned now (gone, replaced, not what was registered).

    ``reason`` is a content-free code: ``root_missing``, ``root_replaced`` or ``root_unreadable``.
    """

    def __init__(self, message: str, reason: str = "root_unreadable") -> None:
        super().__init__(message)
        self.reason = reason


# Why a scan keeps a document it did not see, rather than remove it.
UNREADABLE_PATH = "folder_unreadable"  # a directory on its way cannot be opened or listed
OTHER_DEVICE = "other_device"  # its folder is now on another file system (unmounted?)


@dataclass(frozen=True)
class ScanLimits:
    max_file_bytes: int
    max_total_bytes: int

    def __post_init__(self) -> None:
        if self.max_file_bytes < 1 or self.max_total_bytes < 1:
            raise ValueError("scan limits must be positive")


@dataclass(frozen=True)
class AcceptedFile:
    """A regular file inside the tree whose bytes may be indexed."""

    source_path: str
    fmt: str
    data: bytes
    content_hash: str
    state: FileState


@dataclass(frozen=True)
class UnchangedFile:
    """A file that looks exactly as when it was last read: not read again."""

    source_path: str
    size: int


@dataclass(frozen=True)
class SkippedPath:
    source_path: str
    reason: SkipReason
    size: int  # bytes on disk when known without reading, else 0


ScanOutcome = AcceptedFile | UnchangedFile | SkippedPath


class _Refused(Exception):
    def __init__(self, reason: SkipReason, size: int = 0) -> None:
        super().__init__(reason.value)
        self.reason = reason
        self.size = size


def _refusal_for(error: OSError) -> _Refused:
    if error.errno in (errno.ELOOP, errno.EMLINK):
        return _Refused(SkipReason.SWAPPED)
    if error.errno in (errno.ENOENT, errno.ENOTDIR):
        return _Refused(SkipReason.VANISHED)
    return _Refused(SkipReason.UNREADABLE)


def _opening_refusal(parent: int, name: bytes, error: OSError) -> _Refused:
    """Why the directory ``name`` in ``parent`` could not be opened."""
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except OSError:
        return _refusal_for(error)
    if stat.S_ISLNK(info.st_mode):
        return _Refused(SkipReason.SYMLINK)
    if not stat.S_ISDIR(info.st_mode):
        return _Refused(SkipReason.NOT_REGULAR)
    return _refusal_for(error)


def _shown(raw: bytes) -> str:
    return normalise_source_path(raw) or raw.decode("utf-8", "backslashreplace")


class _DirectoryCursor:
    """Open directory descriptors from the root down to the current directory.

    Paths arrive sorted, so consecutive files mostly share their directory and
    the chain is reused; each level is opened relative to its parent and never
    through a symlink.
    """

    def __init__(self, root_fd: int) -> None:
        self._names: list[bytes] = []
        self._fds: list[int] = [root_fd]

    def enter(self, directories: list[bytes]) -> int:
        common = 0
        while common < len(directories) and common < len(self._names) and self._names[common] == directories[common]:
            common += 1
        while len(self._names) > common:
            self._names.pop()
            os.close(self._fds.pop())
        for name in directories[common:]:
            parent = self._fds[-1]
            try:
                fd = os.open(name, _DIRECTORY_FLAGS, dir_fd=parent)
            except OSError as exc:
                raise _opening_refusal(parent, name, exc) from None
            self._names.append(name)
            self._fds.append(fd)
        return self._fds[-1]

    def close(self) -> None:
        for fd in self._fds[1:]:
            os.close(fd)
        self._names.clear()
        del self._fds[1:]


@dataclass(frozen=True)
class _IgnoreLayer:
    """The patterns of one .gitignore, for paths under ``prefix`` (``""`` or ``dir/``)."""

    prefix: str
    spec: GitIgnoreSpec


def _ignored(layers: tuple[_IgnoreLayer, ...], path: str) -> bool:
    """Whether the .gitignore files above ``path`` exclude it (``dir/`` for a directory).

    As in git, deeper files override shallower ones and the last matching
    pattern wins, a negation included.
    """
    verdict = False
    for layer in layers:
        result = layer.spec.check_file(path[len(layer.prefix):])
        if result.include is not None:
            verdict = result.include
    return verdict


class SourceScan:
    """One pass over a source; use as a context manager and iterate.

    ``kind`` is ``git``, ``folder`` or ``file`` (``root`` is then the file).
    ``excluded`` holds relative directory prefixes never to enter (e.g. the
    knowledge base's own data directory when it lives inside the tree).
    ``known`` maps relative paths to how each file looked when last read.
    """

    def __init__(
        self,
        root: Path,
        limits: ScanLimits,
        *,
        kind: str = "git",
        include_sensitive: bool = False,
        excluded: tuple[str, ...] = (),
        before_open: BeforeOpen | None = None,
        known: Mapping[str, FileState] | None = None,
    ) -> None:
        self.root = root
        self.kind = kind
        self.limits = limits
        self.include_sensitive = include_sensitive
        self._excluded = tuple(prefix.rstrip("/") + "/" for prefix in excluded)
        self._before_open = before_open
        self._known = known or {}
        self._root_fd: int | None = None
        # Sorted raw relative paths; a path decided during the walk carries its outcome.
        self._entries: list[tuple[bytes, SkippedPath | None]] = []
        self.ignored_count = 0
        self.bytes_accepted = 0
        self.budget_exhausted = False
        self.head_commit: str | None = None
        # Directory listings read to prove a path gone, by relative prefix.
        self._listings: dict[str, tuple[int, dict[str, os.DirEntry]] | None] = {}

    # ------------------------------------------------------------ opening

    def open(self) -> SourceScan:
        """Re-validate the source, open its root and list its paths."""
        opener = {"git": self._open_git, "folder": self._open_folder, "file": self._open_file}.get(self.kind)
        if opener is None:
            raise ValueError(f"unknown source kind {self.kind!r}")
        try:
            opener()
        except BaseException:
            self.close()
            raise
        return self

    def _open_git(self) -> None:
        # Still a directory, still git's top level, still the same real path.
        if verify_top_level(self.root) != self.root:
            raise NotAGitTopLevel("the registered folder now resolves elsewhere; register it again")
        self._root_fd = self._open_directory(self.root)
        paths = list_candidate_paths(self.root)
        self.ignored_count = count_ignored_entries(self.root)
        self.head_commit = head_commit(self.root)
        self._check_root_unchanged(self.root)
        self._entries = [(path, None) for path in paths]

    def _open_folder(self) -> None:
        self._check_real_path(self.root)
        self._root_fd = self._open_directory(self.root)
        entries: list[tuple[bytes, SkippedPath | None]] = []
        self._walk(self._root_fd, b"", (), 0, entries)
        self._check_root_unchanged(self.root)
        self._entries = sorted(entries, key=lambda entry: entry[0])

    def _open_file(self) -> None:
        self._check_real_path(self.root)
        self._root_fd = self._open_directory(self.root.parent)
        self._check_root_unchanged(self.root.parent)
        name = os.fsencode(self.root.name)
        try:
            os.stat(name, dir_fd=self._root_fd, follow_symlinks=False)
        except FileNotFoundError:
            return  # the file is gone: a completed scan of nothing
        except OSError:
            pass  # reported when it is read
        self._entries = [(name, None)]

    def _check_real_path(self, path: Path) -> None:
        if os.path.realpath(path) != str(path):
            raise SourceUnavailable("the registered path now resolves elsewhere; add it again", "root_replaced")

    def _open_directory(self, path: Path) -> int:
        try:
            return os.open(path, _DIRECTORY_FLAGS)
        except FileNotFoundError:
            raise SourceUnavailable("the source's folder no longer exists (or is not mounted)", "root_missing") from None
        except OSError:
            raise SourceUnavailable("the source's folder cannot be opened as a directory") from None

    def _check_root_unchanged(self, path: Path) -> None:
        assert self._root_fd is not None, "checked while the scan holds its root open"
        opened, named = os.fstat(self._root_fd), os.stat(path, follow_symlinks=False)
        if (opened.st_dev, opened.st_ino) != (named.st_dev, named.st_ino):
            raise SourceUnavailable("the source's folder was replaced during the scan", "root_replaced")

    @property
    def root_identity(self) -> tuple[int, int]:
        """(device, inode) of the directory the scan holds open: the folder, the
        working tree, or a single file's folder."""
        assert self._root_fd is not None, "known once the scan is open"
        info = os.fstat(self._root_fd)
        return info.st_dev, info.st_ino

    # ------------------------------------------------------------ walking a folder

    def _walk(
        self, fd: int, prefix: bytes, layers: tuple[_IgnoreLayer, ...], depth: int,
        entries: list[tuple[bytes, SkippedPath | None]],
    ) -> None:
        """List the files under the open directory ``fd`` (relative path ``prefix``)."""
        try:
            with os.scandir(fd) as listing:
                children = sorted((os.fsencode(entry.name), entry) for entry in listing)
        except OSError:
            if not prefix:
                raise SourceUnavailable("the source's folder cannot be listed") from None
            entries.append((prefix.rstrip(b"/"), SkippedPath(_shown(prefix.rstrip(b"/")), SkipReason.UNREADABLE, 0)))
            return
        names = {name for name, _ in children}
        if prefix and os.fsencode(VIRTUALENV_MARKER) in names:
            entries.append((prefix.rstrip(b"/"), SkippedPath(_shown(prefix.rstrip(b"/")), SkipReason.GENERATED, 0)))
            return
        if b".gitignore" in names:
            layer = self._ignore_layer(fd, prefix)
            if layer is not None:
                layers = (*layers, layer)
        for name, entry in children:
            relative = prefix + name
            text = os.fsdecode(relative)
            try:
                is_directory = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_directory = False  # decided when it is read
            if not is_directory:
                if _ignored(layers, text):
                    self.ignored_count += 1
                else:
                    entries.append((relative, None))
                continue
            reason = self._directory_reason(os.fsdecode(name), text)
            if reason is not None:
                entries.append((relative, SkippedPath(_shown(relative), reason, 0)))
                continue
            if _ignored(layers, text + "/"):
                self.ignored_count += 1
                continue
            if depth + 1 >= MAX_DEPTH:
                entries.append((relative, SkippedPath(_shown(relative), SkipReason.TOO_DEEP, 0)))
                continue
            try:
                child = os.open(name, _DIRECTORY_FLAGS, dir_fd=fd)
            except OSError as exc:
                refused = _opening_refusal(fd, name, exc)
                entries.append((relative, SkippedPath(_shown(relative), refused.reason, 0)))
                continue
            try:
                self._walk(child, relative + b"/", layers, depth + 1, entries)
            finally:
                os.close(child)

    def _directory_reason(self, name: str, relative: str) -> SkipReason | None:
        reason = directory_skip_reason(name, include_sensitive=self.include_sensitive)
        if reason is None and any((relative + "/").startswith(prefix) for prefix in self._excluded):
            reason = SkipReason.SENSITIVE
        return reason

    @staticmethod
    def _ignore_layer(fd: int, prefix: bytes) -> _IgnoreLayer | None:
        try:
            with open_source(b".gitignore", dir_fd=fd, max_bytes=MAX_GITIGNORE_BYTES) as source:
                data = source.read()
                source.finish()
        except SourceRefused:
            return None
        lines = data.decode("utf-8", "replace").splitlines()
        return _IgnoreLayer(os.fsdecode(prefix), GitIgnoreSpec.from_lines(lines))

    # ------------------------------------------------------------ iterating

    def __enter__(self) -> SourceScan:
        return self if self._root_fd is not None else self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._root_fd is not None:
            os.close(self._root_fd)
            self._root_fd = None

    @property
    def listed_count(self) -> int:
        return len(self._entries)

    def listed_paths(self) -> set[str]:
        """The identities of every listed path (skipped ones included)."""
        return {_shown(raw.rstrip(b"/")) for raw, _ in self._entries}

    def root_is_empty(self) -> bool:
        """Whether the root directory holds no entry at all (not even ignored
        or skipped ones): what an unmounted file system's mount point looks like."""
        listing = self._listing(self._root_fd, "") if self._root_fd is not None else None
        return listing is not None and not listing[1]

    def unseen_reason(self, source_path: str, expected_device: int | None) -> str | None:
        """Why a file this scan did not take cannot be called gone, or None.

        None when it is proven gone - a directory on its way, read completely
        now, on the device the file was on (``expected_device``; None: any),
        does not hold the next part of the path - or when it is there, in
        folders that can be read, and the rules leave it out (ignored, inside
        a generated folder, ...). A directory that cannot be opened or listed,
        or one now on another device (an unmounted file system leaves its
        empty mount point), proves nothing.
        """
        assert self._root_fd is not None, "proved while the scan holds its root open"
        parts = source_path.split("/")
        fd, opened = self._root_fd, []
        try:
            for depth, part in enumerate(parts):
                listing = self._listing(fd, "/".join(parts[:depth]))
                if listing is None:
                    return UNREADABLE_PATH
                device, entries = listing
                entry = entries.get(part)
                if entry is None:
                    if expected_device is not None and device != expected_device:
                        return OTHER_DEVICE
                    return None
                if depth == len(parts) - 1:
                    return None  # there, readable, and left out by the rules
                try:
                    if not entry.is_dir(follow_symlinks=False):
                        return None  # a file (or a link) now stands where its folder was
                    fd = os.open(os.fsencode(entry.name), _DIRECTORY_FLAGS, dir_fd=fd)
                except OSError:
                    return UNREADABLE_PATH
                opened.append(fd)
            return None
        finally:
            for descriptor in opened:
                os.close(descriptor)

    def _listing(self, fd: int, prefix: str) -> tuple[int, dict[str, os.DirEntry]] | None:
        """The device and the entries (by identity) of the open directory ``fd``
        at ``prefix``, read once per scan; None when it cannot be listed."""
        if prefix not in self._listings:
            try:
                device = os.fstat(fd).st_dev
                with os.scandir(fd) as listing:
                    entries = {_shown(os.fsencode(entry.name)): entry for entry in listing}
                self._listings[prefix] = (device, entries)
            except OSError:
                self._listings[prefix] = None
        return self._listings[prefix]

    def __iter__(self) -> Iterator[ScanOutcome]:
        if self._root_fd is None:
            raise RuntimeError("open the scan before iterating it")
        cursor = _DirectoryCursor(self._root_fd)
        virtualenvs = {
            path[: -len(VIRTUALENV_MARKER)]
            for path in (normalise_source_path(raw) or "" for raw, _ in self._entries)
            if path == VIRTUALENV_MARKER or path.endswith("/" + VIRTUALENV_MARKER)
        }
        seen: set[str] = set()
        try:
            for raw, decided in self._entries:
                yield decided if decided is not None else self._examine(raw, cursor, virtualenvs, seen)
        finally:
            cursor.close()

    def _examine(self, raw: bytes, cursor: _DirectoryCursor, virtualenvs: set[str], seen: set[str]) -> ScanOutcome:
        if raw.endswith(b"/"):  # an untracked nested repository
            display = normalise_source_path(raw.rstrip(b"/")) or os.fsdecode(raw)
            return SkippedPath(display, SkipReason.NOT_REGULAR, 0)
        source_path = normalise_source_path(raw)
        if source_path is None:
            return SkippedPath(raw.decode("utf-8", "backslashreplace"), SkipReason.UNSAFE_NAME, 0)
        if source_path in seen:
            # Two raw names with one identity (e.g. NFC/NFD twins): keep the first.
            return SkippedPath(source_path, SkipReason.NAME_COLLISION, 0)
        seen.add(source_path)
        reason = self._path_reason(source_path, virtualenvs)
        *directories, name = raw.split(b"/")
        if reason is not None:
            return SkippedPath(source_path, reason, self._size_without_reading(cursor, directories, name))
        try:
            return self._read_checked(cursor, directories, name, source_path)
        except _Refused as refused:
            return SkippedPath(source_path, refused.reason, refused.size)

    def _path_reason(self, source_path: str, virtualenvs: set[str]) -> SkipReason | None:
        reason = path_skip_reason(source_path, include_sensitive=self.include_sensitive)
        if reason is not None:
            return reason
        if any(source_path.startswith(prefix) for prefix in self._excluded):
            return SkipReason.SENSITIVE
        if virtualenvs and any(source_path.startswith(prefix) for prefix in virtualenvs):
            return SkipReason.GENERATED
        return None

    @staticmethod
    def _size_without_reading(cursor: _DirectoryCursor, directories: list[bytes], name: bytes) -> int:
        try:
            info = os.stat(name, dir_fd=cursor.enter(directories), follow_symlinks=False)
        except (OSError, _Refused):
            return 0
        return info.st_size if stat.S_ISREG(info.st_mode) else 0

    def _read_checked(
        self, cursor: _DirectoryCursor, directories: list[bytes], name: bytes, source_path: str
    ) -> AcceptedFile | UnchangedFile:
        directory_fd = cursor.enter(directories)
        try:
            checked = os.stat(name, dir_fd=directory_fd, follow_symlinks=False)
        except OSError as exc:
            raise _refusal_for(exc) from None
        if stat.S_ISLNK(checked.st_mode):
            raise _Refused(SkipReason.SYMLINK)
        if not stat.S_ISREG(checked.st_mode):
            raise _Refused(SkipReason.NOT_REGULAR)
        known = self._known.get(source_path)
        if known is not None and known.unchanged(checked):
            self._charge(checked.st_size)
            return UnchangedFile(source_path, checked.st_size)
        if self._before_open is not None:
            self._before_open(source_path)
        checked_ns = time.time_ns()
        charged = 0
        try:
            with open_source(name, dir_fd=directory_fd, checked=checked, max_bytes=self.limits.max_file_bytes) as source:
                self._charge(source.size)
                charged = source.size
                data = source.read()
                source.finish()
                state = FileState.of(source.opened, checked_ns=checked_ns)
            head = data[:SNIFF_BYTES] if needs_content(source_path) else None
            detected = detect_format(source_path.rsplit("/", 1)[-1], head)
            if detected.format is None:
                raise _Refused(SkipReason(detected.reason or SkipReason.UNSUPPORTED_FORMAT), len(data))
        except SourceRefused as refused:
            self.bytes_accepted -= charged
            raise _Refused(SkipReason(refused.reason.value), refused.size) from None
        except _Refused:
            self.bytes_accepted -= charged
            raise
        return AcceptedFile(source_path, detected.format, data, hashlib.sha256(data).hexdigest(), state)

    def _charge(self, size: int) -> None:
        """Count ``size`` bytes against the aggregate budget, or refuse the file."""
        if size == 0:
            raise _Refused(SkipReason.EMPTY)
        if size > self.limits.max_file_bytes:
            raise _Refused(SkipReason.TOO_LARGE, size)
        if self.budget_exhausted or self.bytes_accepted + size > self.limits.max_total_bytes:
            self.budget_exhausted = True
            raise _Refused(SkipReason.AGGREGATE_LIMIT, size)
        self.bytes_accepted += size
