"""The SQLite connection: one deferred peewee database, configured on open.

``busy_timeout`` is the first pragma so that nothing else can fail with
"database is locked" before it is set; every transaction is ``BEGIN
IMMEDIATE`` by default because a deferred transaction that reads and then
writes can fail at once whatever the busy timeout.

The catalog is opened either for writing (``mode=rw``) or read-only
(``mode=ro``). Neither mode ever creates ``kb.sqlite3``: SQLite would make a
fresh, empty catalog wherever the real one went missing, and an empty catalog
calls every stored source an orphan. The file is created only by the
initialisation of a fresh data directory (``store.open_store``).
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from peewee import OperationalError, SqliteDatabase, _transaction

BUSY_TIMEOUT_MS = 15_000
WRITER_LOCK_FILE_NAME = "writer.lock"

# Writers queue twice before SQLite's own lock. Threads of one process queue
# on a Python lock: left to SQLite they poll the lock with the busy handler's
# growing sleeps (up to 100 ms each); py-spy found most pipeline time inside
# BEGIN IMMEDIATE, and queueing here raised ingestion by a third. Processes
# queue on an flock of ``writer.lock``, for the same reason across processes:
# a process whose threads hand SQLite's lock to each other back to back kept a
# second process, sleeping in the busy handler, out for the whole busy timeout
# ("the database stayed locked"); a waiter blocked in flock is woken the moment
# the holder lets go. SQLite's busy timeout stays as the backstop.
_process_writer = threading.Lock()


class ReadOnlyCatalog(RuntimeError):
    """A write was attempted on a catalog opened read-only (a bug in the caller)."""


class _CatalogFile:
    """Where the open catalog lives and whether it may be written."""

    writer_lock: Path | None = None
    read_only = False


_catalog = _CatalogFile()


class _SerialisedTransaction(_transaction):
    """An outermost transaction that holds the process writer lock and the
    cross-process writer lock around ``BEGIN IMMEDIATE`` ... ``COMMIT``/``ROLLBACK``."""

    _holds_writer = False
    _writer_fd = -1

    def __enter__(self):
        if self.db.transaction_depth() == 0:
            if _catalog.read_only:
                raise ReadOnlyCatalog("the catalog is open read-only; this command must not write")
            timeout_s = BUSY_TIMEOUT_MS / 1000
            if not _process_writer.acquire(timeout=timeout_s):
                raise OperationalError("database is locked")
            self._holds_writer = True
            if _catalog.writer_lock is not None:
                try:
                    self._writer_fd = _lock_exclusively(_catalog.writer_lock, timeout_s)
                except BaseException:
                    self._release()
                    raise
                if self._writer_fd < 0:
                    self._release()
                    raise OperationalError("database is locked")
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
        if self._writer_fd >= 0:
            os.close(self._writer_fd)  # closing the only descriptor drops the flock
            self._writer_fd = -1
        if self._holds_writer:
            self._holds_writer = False
            _process_writer.release()


def _lock_exclusively(path: Path, timeout_s: float) -> int:
    """An exclusive flock on ``path`` within ``timeout_s``: its descriptor, or -1.

    A fresh descriptor each time, so a wait given up at the deadline (whose
    helper thread may still get the lock later, and then drops it) can never
    be confused with the next holder.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd
    except BlockingIOError:
        return fd if _BlockingLockWait(fd).acquired(timeout_s) else -1
    except BaseException:
        os.close(fd)
        raise


class _BlockingLockWait:
    """Wait for an flock in the kernel (woken at once on release), bounded by a
    deadline: the blocking call runs in a helper thread that owns the
    descriptor until the caller takes the lock or gives up."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._state = threading.Lock()
        self._done = threading.Event()
        self._abandoned = False
        self._error: OSError | None = None
        threading.Thread(target=self._wait, name="kbtui-writer-wait", daemon=True).start()

    def _wait(self) -> None:
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except OSError as exc:
            self._error = exc
        with self._state:
            self._done.set()
            if self._abandoned:
                os.close(self._fd)

    def acquired(self, timeout_s: float) -> bool:
        self._done.wait(timeout_s)
        with self._state:
            if not self._done.is_set():
                self._abandoned = True
                return False
        if self._error is not None:
            os.close(self._fd)
            raise self._error
        return True


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
# A read-only connection leaves the journal mode alone: it is a property of the
# file (WAL since initialisation), and changing it would be a write.
READ_ONLY_PRAGMAS = [(name, value) for name, value in PRAGMAS if name != "journal_mode"]


class _NoQueryText(logging.Filter):
    """peewee logs every SQL statement with its parameters at DEBUG; those carry
    document and query text, so they never leave the logger."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno > logging.DEBUG


logging.getLogger("peewee").addFilter(_NoQueryText())


def catalog_uri(path: Path, mode: str) -> str:
    """An SQLite URI for ``path``: ``rw`` and ``ro`` never create the file;
    ``immutable`` reads a file that nothing can be writing (no -wal beside it)."""
    query = "mode=ro&immutable=1" if mode == "immutable" else f"mode={mode}"
    return f"{path.absolute().as_uri()}?{query}"


def open_database(path: Path, *, read_only: bool = False) -> SqliteDatabase:
    """Point the shared database at the existing catalog ``path`` and connect this thread.

    Read-only connections work on a read-only mount and while another process
    holds the write lock (WAL readers do not wait for writers). A WAL-mode
    file closed cleanly has no ``-wal``/``-shm`` beside it, and on a read-only
    mount SQLite can neither create them nor open the file ``mode=ro``; it is
    then opened ``immutable``, which is exact because with no ``-wal`` there is
    nothing committed outside the main file and no writer connected.
    """
    if not database.is_closed():
        database.close()
    _catalog.read_only = read_only
    _catalog.writer_lock = None if read_only else path.parent / WRITER_LOCK_FILE_NAME
    if not read_only:
        _connect(catalog_uri(path, "rw"), PRAGMAS)
        return database
    try:
        _connect(catalog_uri(path, "ro"), READ_ONLY_PRAGMAS)
    except OperationalError:
        wal = path.with_name(path.name + "-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise
        _connect(catalog_uri(path, "immutable"), READ_ONLY_PRAGMAS)
    return database


def _connect(uri: str, pragmas: list[tuple[str, object]]) -> None:
    if not database.is_closed():
        database.close()
    database.init(uri, pragmas=pragmas, timeout=BUSY_TIMEOUT_MS / 1000, uri=True)
    database.connect(reuse_if_open=True)
    # A query, so that a file SQLite cannot open fails here, not at first use.
    database.execute_sql("SELECT count(*) FROM sqlite_master").fetchone()


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
