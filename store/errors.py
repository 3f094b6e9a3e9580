"""The store's expected failures, and which storage failures are conditions
of the machine (a full disk, a lock held too long) rather than bugs.

The store sits below the application, so it has its own error base:
``kbtui.errors`` re-exports these classes, and the command line maps them to
one line on stderr and their exit code like the application's own errors.
"""

from __future__ import annotations

import errno

_DISK_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}


class StoreError(Exception):
    """An expected failure of the data directory with a message fit for the operator.

    The message must never contain document text, chunk text, file names of
    stored documents or query text: it may be printed and logged.
    """

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class KeyProblem(StoreError):
    """The node key is missing, wrong or unsafe: the program must not start."""

    exit_code = 3


class BlobCorrupt(StoreError):
    """An encrypted blob failed authentication (tampered, truncated or swapped)."""


class NotFound(StoreError):
    """No document, repository or collection answers to the reference given."""


class DataDirectoryProblem(StoreError):
    """The data directory cannot be used as it is (not a directory, writable by
    others, read-only for a command that writes): nothing was changed."""

    exit_code = 3


class CatalogProblem(StoreError):
    """The catalog (``kb.sqlite3``) is missing, empty, damaged, newer than this
    kbtui, or not this data directory's: the program must not go on, and above
    all must not sweep the encrypted sources against it."""

    exit_code = 3


class BackupProblem(StoreError):
    """A backup is unfinished, damaged, or not this node's: nothing was changed."""

    exit_code = 3


class PipelineHeldElsewhere(StoreError):
    """Another node (another data directory) runs the pipeline on this shared
    database: this one must not index beside it. Nothing was changed."""

    exit_code = 3


class StoreUnavailable(StoreError):
    """The store cannot be used right now, through no fault of the data: a
    database server that is down, unreachable, too slow or out of room, or a
    connection lost mid-transaction (which rolled back). Work is retried."""

    exit_code = 3


def is_store_unavailable(exc: BaseException) -> bool:
    return isinstance(exc, StoreUnavailable)


class NoKnowledgeBase(StoreError):
    """A command that only reads found no knowledge base in the data directory."""


def is_disk_full(exc: BaseException) -> bool:
    """The disk (or SQLite's page limit) is full: retry once space returns."""
    if isinstance(exc, OSError) and exc.errno in _DISK_FULL_ERRNOS:
        return True
    import peewee  # here, not at the top: importing the errors must stay cheap

    return isinstance(exc, peewee.OperationalError) and "full" in str(exc).lower()


def is_database_error(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by a database library (SQLite, PostgreSQL)
    rather than by kbtui: a condition of the store, never to be shown raw."""
    import sqlite3
    import sys

    import peewee

    if isinstance(exc, (peewee.DatabaseError, sqlite3.DatabaseError)):
        return True
    psycopg = sys.modules.get("psycopg")  # loaded only by the PostgreSQL store
    return psycopg is not None and isinstance(exc, psycopg.Error)


def is_database_busy(exc: BaseException) -> bool:
    import peewee

    return isinstance(exc, peewee.OperationalError) and "locked" in str(exc).lower()


def storage_problem(exc: BaseException) -> StoreError | None:
    """An operator-facing error for a storage condition, or None if it is something else."""
    if is_disk_full(exc):
        return StoreError("no space left for the data directory (disk full); nothing was changed")
    if is_database_busy(exc):
        return StoreError("the database stayed locked by another kbtui process; try again")
    return None


class SourceAlreadyRegistered(StoreError):
    """That root is already a source of the collection, or the name is taken there."""


class Superseded(Exception):
    """The document's source changed since the pipeline read it: that work is stale."""
