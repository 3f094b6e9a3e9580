"""One node per data directory: an exclusive lock on ``node.lock``.

The lock is an ``flock`` held for the life of the process, so it is released
by the kernel when the process dies, even by kill -9: no stale lock files.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

LOCK_FILE_NAME = "node.lock"


class NodeLock:
    def __init__(self, fd: int) -> None:
        self._fd = fd

    @classmethod
    def try_acquire(cls, home: Path) -> NodeLock | None:
        """Take the lock, or return None when another process holds it.

        ``home`` exists (``store.open_store`` made or checked it); the lock
        file is created owner-only.
        """
        fd = os.open(home / LOCK_FILE_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        # A few tries: node_running() briefly holds a shared lock while probing.
        for attempt in range(5):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt == 4:
                    os.close(fd)
                    return None
                time.sleep(0.02)
        try:  # the pid is for people reading the file; a full disk must not stop the node
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
        except OSError:
            pass
        return cls(fd)

    def release(self) -> None:
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1


def node_running(home: Path) -> bool:
    """Whether some process holds the node lock for ``home``."""
    path = home / LOCK_FILE_NAME
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
