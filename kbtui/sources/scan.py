"""The safe walk over a registered working tree.

git decides which paths count (tracked, plus untracked and not ignored); this
module decides which of them may be read, and reads them without ever leaving
the tree:

* the root is re-verified as a Git top level at every scan;
* every directory on the way is opened relative to its parent with
  ``O_NOFOLLOW | O_DIRECTORY``, so a directory swapped for a symlink is refused;
* the file is ``lstat``-ed (symlinks and non-regular files refused), then
  opened with :func:`store.files.open_source` (the primitive ``kbtui add``
  uses too): ``O_NOFOLLOW | O_NONBLOCK`` (a FIFO can never block), then
  ``fstat``-ed and its device/inode compared with the ``lstat`` result, so a
  file swapped between check and open is refused;
* reads are bounded by the per-file limit (counted on the bytes read) and the
  aggregate budget, and a file that changes while being read is refused.

Nothing here touches the database: the scan yields outcomes, the importer
decides what they mean for the catalog.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kbtui.extract import format_for
from kbtui.sources.git import (
    NotAGitTopLevel,
    count_ignored_entries,
    list_candidate_paths,
    verify_top_level,
)
from kbtui.sources.paths import normalise_source_path
from kbtui.sources.rules import VIRTUALENV_MARKER, SkipReason, path_skip_reason
from store.files import SourceFile, SourceRefused, open_source

log = logging.getLogger(__name__)

SNIFF_BYTES = 8000  # as much as git looks at to call a file binary
_TEXT_BOMS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

# Called with the source path after the file was checked and before it is
# opened: the seam where tests swap the file, as an attacker would.
BeforeOpen = Callable[[str], None]


@dataclass(frozen=True)
class ScanLimits:
    max_file_bytes: int
    max_total_bytes: int

    def __post_init__(self) -> None:
        if self.max_file_bytes < 1 or self.max_total_bytes < 1:
            raise ValueError("scan limits must be positive")


@dataclass(frozen=True)
class AcceptedFile:
    """A regular file inside the tree whose bytes may be imported."""

    source_path: str
    fmt: str
    data: bytes
    content_hash: str


@dataclass(frozen=True)
class SkippedPath:
    source_path: str
    reason: SkipReason
    size: int  # bytes on disk when known without reading, else 0


ScanOutcome = AcceptedFile | SkippedPath


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
                raise self._refusal(parent, name, exc) from None
            self._names.append(name)
            self._fds.append(fd)
        return self._fds[-1]

    @staticmethod
    def _refusal(parent: int, name: bytes, error: OSError) -> _Refused:
        try:
            info = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except OSError:
            return _refusal_for(error)
        if stat.S_ISLNK(info.st_mode):
            return _Refused(SkipReason.SYMLINK)
        if not stat.S_ISDIR(info.st_mode):
            return _Refused(SkipReason.NOT_REGULAR)
        return _refusal_for(error)

    def close(self) -> None:
        for fd in self._fds[1:]:
            os.close(fd)
        self._names.clear()
        del self._fds[1:]


class RepositoryScan:
    """One pass over a registered working tree; use as a context manager and iterate.

    ``excluded`` holds relative directory prefixes never to enter (e.g. the
    knowledge base's own data directory when it lives inside the tree).
    """

    def __init__(
        self,
        root: Path,
        limits: ScanLimits,
        *,
        excluded: tuple[str, ...] = (),
        before_open: BeforeOpen | None = None,
    ) -> None:
        self.root = root
        self.limits = limits
        self._excluded = tuple(prefix.rstrip("/") + "/" for prefix in excluded)
        self._before_open = before_open
        self._root_fd: int | None = None
        self._paths: list[bytes] = []
        self.ignored_count = 0
        self.bytes_accepted = 0
        self.budget_exhausted = False

    def open(self) -> RepositoryScan:
        """Re-validate the registration, open the root and ask git for the paths."""
        # Still a directory, still git's top level, still the same real path.
        if verify_top_level(self.root) != self.root:
            raise NotAGitTopLevel("the registered folder now resolves elsewhere; register it again")
        try:
            self._root_fd = os.open(self.root, _DIRECTORY_FLAGS)
        except OSError:
            raise NotAGitTopLevel("the registered folder cannot be opened as a directory") from None
        try:
            self._paths = list_candidate_paths(self.root)
            self.ignored_count = count_ignored_entries(self.root)
            opened, named = os.fstat(self._root_fd), os.stat(self.root, follow_symlinks=False)
            if (opened.st_dev, opened.st_ino) != (named.st_dev, named.st_ino):
                raise NotAGitTopLevel("the registered folder was replaced during the scan")
        except BaseException:
            self.close()
            raise
        return self

    def __enter__(self) -> RepositoryScan:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._root_fd is not None:
            os.close(self._root_fd)
            self._root_fd = None

    @property
    def listed_count(self) -> int:
        return len(self._paths)

    def __iter__(self) -> Iterator[ScanOutcome]:
        if self._root_fd is None:
            raise RuntimeError("open the scan before iterating it")
        cursor = _DirectoryCursor(self._root_fd)
        virtualenvs = {
            path[: -len(VIRTUALENV_MARKER)]
            for path in (normalise_source_path(raw) or "" for raw in self._paths)
            if path == VIRTUALENV_MARKER or path.endswith("/" + VIRTUALENV_MARKER)
        }
        seen: set[str] = set()
        try:
            for raw in self._paths:
                yield self._examine(raw, cursor, virtualenvs, seen)
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
            fmt = format_for(source_path.rsplit("/", 1)[-1]) or "text"
            data = self._read_checked(cursor, directories, name, source_path)
        except _Refused as refused:
            return SkippedPath(source_path, refused.reason, refused.size)
        self.bytes_accepted += len(data)
        return AcceptedFile(source_path, fmt, data, hashlib.sha256(data).hexdigest())

    def _path_reason(self, source_path: str, virtualenvs: set[str]) -> SkipReason | None:
        reason = path_skip_reason(source_path)
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

    def _read_checked(self, cursor: _DirectoryCursor, directories: list[bytes], name: bytes, source_path: str) -> bytes:
        directory_fd = cursor.enter(directories)
        try:
            checked = os.stat(name, dir_fd=directory_fd, follow_symlinks=False)
        except OSError as exc:
            raise _refusal_for(exc) from None
        if stat.S_ISLNK(checked.st_mode):
            raise _Refused(SkipReason.SYMLINK)
        if not stat.S_ISREG(checked.st_mode):
            raise _Refused(SkipReason.NOT_REGULAR)
        if self._before_open is not None:
            self._before_open(source_path)
        try:
            with open_source(name, dir_fd=directory_fd, checked=checked, max_bytes=self.limits.max_file_bytes) as source:
                return self._read_open_file(source)
        except SourceRefused as refused:
            raise _Refused(SkipReason(refused.reason.value), refused.size) from None

    def _read_open_file(self, source: SourceFile) -> bytes:
        size = source.size
        if size == 0:
            raise _Refused(SkipReason.EMPTY)
        if self.budget_exhausted or self.bytes_accepted + size > self.limits.max_total_bytes:
            self.budget_exhausted = True
            raise _Refused(SkipReason.AGGREGATE_LIMIT, size)
        data = source.read()
        source.finish()
        if b"\x00" in data[:SNIFF_BYTES] and not data.startswith(_TEXT_BOMS):
            raise _Refused(SkipReason.BINARY, size)
        return data
