"""Advisory locks between processes sharing one data directory: an ``flock``
on a lock file.

The kernel releases an ``flock`` when its process dies, even by kill -9, so a
lock file left behind is never a stale lock.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class FileLock:
    """A held lock on one lock file (created owner-only when missing)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @classmethod
    def acquire(cls, path: Path) -> FileLock:
        """Wait until no other process holds the lock, then hold it exclusively."""
        return cls(_locked_fd(path, fcntl.LOCK_EX))

    @classmethod
    def shared_if_exists(cls, path: Path) -> FileLock | None:
        """Wait for a shared hold of an existing lock file; None (and nothing
        created) when there is none: a reader, perhaps on a read-only mount,
        waits for a writer that once ran, never makes a file itself."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        except BaseException:
            os.close(fd)
            raise
        return cls(fd)

    @classmethod
    def try_acquire(cls, path: Path, *, shared: bool = False) -> FileLock | None:
        """Hold the lock now (exclusively, or ``shared`` with other shared
        holders), or return None when another process holds it."""
        try:
            return cls(_locked_fd(path, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB))
        except BlockingIOError:
            return None

    def release(self) -> None:
        """Let the lock go (again is harmless)."""
        if self.fd >= 0:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> FileLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def _locked_fd(path: Path, operation: int) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    access = os.O_RDONLY if operation & fcntl.LOCK_SH else os.O_RDWR
    fd = os.open(path, access | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, operation)
    except BaseException:
        os.close(fd)
        raise
    return fd
