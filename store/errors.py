"""Classifying storage failures that are conditions of the machine, not bugs."""

from __future__ import annotations

import errno

import peewee

from kbtui.errors import KbtuiError

_DISK_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}


def is_disk_full(exc: BaseException) -> bool:
    """The disk (or SQLite's page limit) is full: retry once space returns."""
    if isinstance(exc, OSError) and exc.errno in _DISK_FULL_ERRNOS:
        return True
    return isinstance(exc, peewee.OperationalError) and "full" in str(exc).lower()


def is_database_busy(exc: BaseException) -> bool:
    return isinstance(exc, peewee.OperationalError) and "locked" in str(exc).lower()


def storage_problem(exc: BaseException) -> KbtuiError | None:
    """An operator-facing error for a storage condition, or None if it is something else."""
    if is_disk_full(exc):
        return KbtuiError("no space left for the data directory (disk full); nothing was changed")
    if is_database_busy(exc):
        return KbtuiError("the database stayed locked by another kbtui process; try again")
    return None
