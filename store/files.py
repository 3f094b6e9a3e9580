"""File operations shared by the blob store, the key file, the ANN index and every reader of sources.

:func:`open_source` is the one way a source file (``kbtui add``, a repository
scan) is opened: never through a symlink, never blocking on a FIFO, only a
regular file, and read under a cap that counts the bytes actually read, not
what ``stat`` claims (``/proc`` files report size 0 and stream megabytes;
``/proc/self/pagemap`` would stream hundreds of GiB).
"""

from __future__ import annotations

import enum
import errno
import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

# O_NONBLOCK: opening a FIFO with no writer returns at once instead of
# blocking forever; the fstat check then refuses it. O_NOCTTY: a terminal
# device never becomes our controlling terminal.
SOURCE_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_READ_BLOCK = 1 << 20


def fsync_dir(directory: Path) -> None:
    """Make a rename or unlink inside ``directory`` survive a power loss."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def create_once(path: Path, data: bytes) -> bool:
    """Write ``data`` to a new owner-only (0600) file at ``path``, durably, unless
    ``path`` already exists: it is never overwritten (the first writer wins). True
    when this call created it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # fails if it exists, unlike rename
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)
    fsync_dir(path.parent)
    return True


def replace_durably(tmp: Path, final: Path) -> None:
    """Rename an already fsynced temp file over ``final`` and persist the rename."""
    os.replace(tmp, final)
    fsync_dir(final.parent)


def file_digest(path: Path) -> tuple[int, str]:
    """The size and SHA-256 of the file at ``path``, read once."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while block := handle.read(_READ_BLOCK):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


@dataclass(frozen=True)
class CopiedFile:
    path: Path
    size: int
    sha256: str


def copy_durably(
    source: BinaryIO, directory: Path, name: str | Callable[[str], str], *, mtime_ns: int | None = None
) -> CopiedFile:
    """Copy the rest of ``source`` to ``directory``/``name`` (or ``name(sha256)``)
    through a temp file that is fsynced and then renamed over it: a reader sees
    the whole copy or none. The directory itself is not fsynced (a caller
    copying many files does that once, with :func:`fsync_dir`)."""
    digest = hashlib.sha256()
    size = 0
    tmp = directory / f".tmp-copy-{os.getpid()}-{os.urandom(4).hex()}"
    try:
        with open(tmp, "xb") as out:
            while block := source.read(_READ_BLOCK):
                digest.update(block)
                size += len(block)
                out.write(block)
            out.flush()
            os.fsync(out.fileno())
        if mtime_ns is not None:
            os.utime(tmp, ns=(mtime_ns, mtime_ns))
        final = directory / (name if isinstance(name, str) else name(digest.hexdigest()))
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return CopiedFile(final, size, digest.hexdigest())


class Refusal(enum.StrEnum):
    """Why a source file was not read (fixed, content-free codes)."""

    VANISHED = "vanished"  # gone (or its directory gone) before it was opened
    SYMLINK = "symlink"  # the name is a symbolic link
    NOT_REGULAR = "not_regular"  # a FIFO, device, socket or directory
    SWAPPED = "swapped"  # not the file that was checked before opening
    UNREADABLE = "unreadable"  # permission denied or an I/O error
    TOO_LARGE = "too_large"  # more bytes than the cap
    CHANGED = "changed_during_read"  # size or time moved, or it held more than it reported
    PSEUDO_FILE = "pseudo_file"  # reports no size but has content (/proc and the like)

    @property
    def explanation(self) -> str:
        """One content-free phrase for the operator."""
        return _EXPLANATIONS[self]


_EXPLANATIONS = {
    Refusal.VANISHED: "it no longer exists",
    Refusal.SYMLINK: "it is a symbolic link",
    Refusal.NOT_REGULAR: "it is not a regular file",
    Refusal.SWAPPED: "it was replaced while being opened",
    Refusal.UNREADABLE: "it cannot be read",
    Refusal.TOO_LARGE: "it is larger than the size limit",
    Refusal.CHANGED: "it changed while being read, or does not report its true size",
    Refusal.PSEUDO_FILE: "it is a kernel pseudo-file (as in /proc) that does not report its size",
}


class SourceRefused(Exception):
    """A source file was not read; ``reason`` says why, ``size`` is its size when known."""

    def __init__(self, reason: Refusal, size: int = 0) -> None:
        super().__init__(reason.value)
        self.reason = reason
        self.size = size


def _refusal_for_open(error: OSError, *, checked: bool) -> SourceRefused:
    # With ``checked``, a regular file stood there a moment ago: a link or a
    # special file in its place was swapped in.
    if error.errno in (errno.ELOOP, errno.EMLINK):
        return SourceRefused(Refusal.SWAPPED if checked else Refusal.SYMLINK)
    if error.errno in (errno.ENOENT, errno.ENOTDIR):
        return SourceRefused(Refusal.VANISHED)
    if error.errno in (errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP):  # a socket, a device without a driver
        return SourceRefused(Refusal.SWAPPED if checked else Refusal.NOT_REGULAR)
    return SourceRefused(Refusal.UNREADABLE)


class SourceFile:
    """An opened regular file read under a cap; make one with :func:`open_source`.

    Reads stop one byte past ``min(max_bytes, the size fstat reported)``: more
    than the cap is :attr:`Refusal.TOO_LARGE`, more than the file reported is
    :attr:`Refusal.CHANGED`. :meth:`finish` checks, after the last read, that
    the file still has the size and time it had when opened and that exactly
    that many bytes were read, so bytes taken from a file that changed midway
    are never accepted.
    """

    def __init__(self, fd: int, opened: os.stat_result, max_bytes: int | None) -> None:
        self.fd = fd
        self.opened = opened
        self.max_bytes = max_bytes
        self.bytes_read = 0
        bound = opened.st_size if max_bytes is None else min(opened.st_size, max_bytes)
        self._read_limit = bound + 1

    @property
    def size(self) -> int:
        """The size fstat reported when the file was opened."""
        return self.opened.st_size

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (all that is left when negative), short only at the end."""
        parts: list[bytes] = []
        wanted = self._read_limit - self.bytes_read if size < 0 else size
        while wanted > 0:
            allowed = self._read_limit - self.bytes_read
            if allowed <= 0:
                break
            try:
                block = os.read(self.fd, min(wanted, allowed, _READ_BLOCK))
            except BlockingIOError:
                raise SourceRefused(Refusal.NOT_REGULAR, self.size) from None
            except OSError:
                raise SourceRefused(Refusal.UNREADABLE, self.size) from None
            if not block:
                break
            self.bytes_read += len(block)
            self._check_bounds()
            parts.append(block)
            wanted -= len(block)
        return b"".join(parts)

    def _check_bounds(self) -> None:
        if self.max_bytes is not None and self.bytes_read > self.max_bytes:
            raise SourceRefused(Refusal.TOO_LARGE, max(self.size, self.bytes_read))
        if self.bytes_read > self.size:
            raise SourceRefused(Refusal.CHANGED, self.size)

    def finish(self) -> None:
        """Refuse the bytes read unless the file stood still and was read whole."""
        try:
            after = os.fstat(self.fd)
        except OSError:
            raise SourceRefused(Refusal.UNREADABLE, self.size) from None
        if self.read(1):  # raises: any byte past the reported size
            raise SourceRefused(Refusal.CHANGED, self.size)
        moved = (after.st_size, after.st_mtime_ns) != (self.opened.st_size, self.opened.st_mtime_ns)
        if moved or self.bytes_read != self.size:
            raise SourceRefused(Refusal.CHANGED, self.size)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> SourceFile:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _has_content(fd: int) -> bool:
    """Whether a file that reports size 0 yields a byte all the same: a /proc
    or /sys pseudo-file, never truly empty (one byte read, at offset 0)."""
    try:
        return bool(os.pread(fd, 1, 0))
    except OSError:
        return False  # nothing to read as a file: the reader finds it empty or unreadable


def open_source(
    name: str | bytes | os.PathLike[str],
    *,
    dir_fd: int | None = None,
    checked: os.stat_result | None = None,
    max_bytes: int | None = None,
) -> SourceFile:
    """Open a source file for reading, or raise :class:`SourceRefused`.

    The last path component is never followed if it is a symlink, a FIFO never
    blocks the open, and the opened descriptor must be a regular file no
    larger than ``max_bytes`` (and not a pseudo-file that reports size 0
    while it has content). With ``checked`` (an ``lstat`` result taken
    before), the descriptor must also be that same file (device and inode), so
    a file swapped between the check and the open is refused.
    """
    try:
        fd = os.open(name, SOURCE_OPEN_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise _refusal_for_open(exc, checked=checked is not None) from None
    try:
        opened = os.fstat(fd)
        if checked is not None and (opened.st_dev, opened.st_ino) != (checked.st_dev, checked.st_ino):
            raise SourceRefused(Refusal.SWAPPED)
        if not stat.S_ISREG(opened.st_mode):
            raise SourceRefused(Refusal.SWAPPED if checked is not None else Refusal.NOT_REGULAR)
        if max_bytes is not None and opened.st_size > max_bytes:
            raise SourceRefused(Refusal.TOO_LARGE, opened.st_size)
        if opened.st_size == 0 and _has_content(fd):
            raise SourceRefused(Refusal.PSEUDO_FILE)
    except BaseException:
        os.close(fd)
        raise
    return SourceFile(fd, opened, max_bytes)
