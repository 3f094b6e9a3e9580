"""The SQLite connection: one deferred peewee database, configured on open.

``busy_timeout`` is the first pragma so that nothing else can fail with
"database is locked" before it is set; every transaction is ``BEGIN
IMMEDIATE`` by default because a deferred transaction that reads and then
writes can fail at once whatever the busy timeout.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from peewee import OperationalError, SqliteDatabase, _transaction

BUSY_TIMEOUT_MS = 15_000

# One writer at a time within this process, queued on a Python lock. Left to
# SQLite, threads contending for the write lock poll it with the busy handler's
# growing sleeps (up to 100 ms each); py-spy found most pipeline time inside
# BEGIN IMMEDIATE, and queueing here raised ingestion by a third. Other
# processes still meet SQLite's own lock and busy timeout.
_process_writer = threading.Lock()


class _SerialisedTransaction(_transaction):
    """An outermost transaction that takes the process writer lock around
    ``BEGIN IMMEDIATE`` ... ``COMMIT``/``ROLLBACK``."""

    _holds_writer = False

    def __enter__(self):
        if self.db.transaction_depth() == 0:
            if not _process_writer.acquire(timeout=BUSY_TIMEOUT_MS / 1000):
                raise OperationalError("database is locked")
            self._holds_writer = True
        try:
            return super().__enter__()
        except BaseException:
            self._release()
            raise

    def __exit__(self, exc_type, exc_val, exc_tb):
        try:
            return super().__exit__(exc_type, exc_val, exc_tb)
        finally:
            self._release()  # a no-op for a savepoint-level transaction

    def _release(self) -> None:
        if self._holds_writer:
            self._holds_writer = False
            _process_writer.release()


class _Database(SqliteDatabase):
    def transaction(self, *args, **kwargs):
        return _SerialisedTransaction(self, *args, **kwargs)

    def rollback(self) -> None:
        # After SQLITE_FULL (and some I/O errors) SQLite has already rolled the
        # transaction back; a second ROLLBACK would raise and hide the real error.
        if not self.is_closed() and not self.connection().in_transaction:
            return
        super().rollback()


database = _Database(None, lock_type="IMMEDIATE")

PRAGMAS = [
    ("busy_timeout", BUSY_TIMEOUT_MS),
    ("journal_mode", "wal"),
    ("foreign_keys", 1),
    ("synchronous", "normal"),
    # After a checkpoint, truncate the WAL file back to this size: a reader
    # that once held the WAL open must not leave a huge file behind.
    ("journal_size_limit", 64 * 1024 * 1024),
]


class _NoQueryText(logging.Filter):
    """peewee logs every SQL statement with its parameters at DEBUG; those carry
    document and query text, so they never leave the logger."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno > logging.DEBUG


logging.getLogger("peewee").addFilter(_NoQueryText())


def open_database(path: Path) -> SqliteDatabase:
    """Point the shared database at ``path`` (creating it) and connect this thread."""
    if not database.is_closed():
        database.close()
    database.init(str(path), pragmas=PRAGMAS, timeout=BUSY_TIMEOUT_MS / 1000)
    database.connect(reuse_if_open=True)
    return database


@contextmanager
def thread_connection() -> Iterator[None]:
    """Use this thread's connection, opening one (and closing it after) if it has none.

    peewee keeps one connection per thread; a worker thread that only reads
    must not leave its connection open when it ends.
    """
    opened = database.is_closed()
    if opened:
        database.connect()
    try:
        yield
    finally:
        if opened:
            database.close()
