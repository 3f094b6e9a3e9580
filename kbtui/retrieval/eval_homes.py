"""The temporary knowledge bases of ``kbtui eval``: made, locked, removed, and
swept when a killed run left one behind.

An eval base holds a node key and the corpus's text in clear chunks, so it
must not outlive its run. The run removes it on the way out (Ctrl-C and
SIGTERM included); SIGKILL cannot be caught, so every run first sweeps the
bases of our prefix that no live run holds: each run keeps an ``flock`` on a
file in its base for as long as it lives, and a base whose lock can be taken
(or that never got one and is older than a minute) is a leftover.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

EVAL_HOME_PREFIX = "kbtui-eval-home-"
LOCK_NAME = ".kbtui-eval.lock"
# A base made this recently may not hold its lock yet (mkdtemp, then the lock).
UNLOCKED_GRACE_S = 60.0


@contextlib.contextmanager
def temporary_eval_home() -> Iterator[Path]:
    """A fresh owner-only directory for one eval run, held for the run and removed after it."""
    sweep_leftover_eval_homes()
    with tempfile.TemporaryDirectory(prefix=EVAL_HOME_PREFIX) as name:
        home = Path(name)
        fd = os.open(home / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield home
        finally:
            os.close(fd)


def sweep_leftover_eval_homes(root: Path | None = None) -> int:
    """Remove the eval bases under ``root`` (the temp directory) that no live
    run holds: ours by prefix and owner, real directories only. How many went."""
    root = Path(root or tempfile.gettempdir())
    removed = 0
    try:
        entries = [entry for entry in os.scandir(root) if entry.name.startswith(EVAL_HOME_PREFIX)]
    except OSError:
        return 0
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            continue
        with _abandoned(Path(entry.path), info) as abandoned:
            if abandoned:
                shutil.rmtree(entry.path, ignore_errors=True)
                removed += 1
    if removed:
        log.info("removed %d eval knowledge base(s) left by runs that were killed", removed)
    return removed


@contextlib.contextmanager
def _abandoned(home: Path, info: os.stat_result) -> Iterator[bool]:
    """Whether no run holds ``home`` (its lock is held here while the caller removes it)."""
    try:
        fd = os.open(home / LOCK_NAME, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        yield time.time() - info.st_mtime > UNLOCKED_GRACE_S
        return
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False  # a live run
        else:
            yield True
    finally:
        os.close(fd)
