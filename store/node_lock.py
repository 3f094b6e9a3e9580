"""One node per data directory: an exclusive lock on ``node.lock``.

The lock is an ``flock`` held for the life of the process, so it is released
by the kernel when the process dies, even by kill -9: no stale lock files.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from store.file_lock import FileLock

LOCK_FILE_NAME = "node.lock"


class NodeLock:
    def __init__(self, lock: FileLock) -> None:
        self._lock = lock

    @classmethod
    def try_acquire(cls, home: Path) -> NodeLock | None:
        """Take the lock, or return None when another process holds it.

        ``home`` exists (``store.open_store`` made or checked it); the lock
        file is created owner-only.
        """
        # A few tries: node_running() briefly holds a shared lock while probing.
        lock = FileLock.try_acquire(home / LOCK_FILE_NAME)
        for _ in range(4):
            if lock is not None:
                break
            time.sleep(0.02)
            lock = FileLock.try_acquire(home / LOCK_FILE_NAME)
        if lock is None:
            return None
        try:  # the pid is for people reading the file; a full disk must not stop the node
            os.ftruncate(lock.fd, 0)
            os.write(lock.fd, str(os.getpid()).encode())
        except OSError:
            pass
        return cls(lock)

    def release(self) -> None:
        self._lock.release()


def node_running(home: Path) -> bool:
    """Whether some process holds the node lock for ``home``."""
    path = home / LOCK_FILE_NAME
    if not path.exists():
        return False
    probe = FileLock.try_acquire(path, shared=True)
    if probe is None:
        return True
    probe.release()
    return False
