"""Opening a data directory: the checks before anything is written, a fresh
directory's initialisation, the catalog's upgrade. ``store.Store`` and
``store.open_store`` are these."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from peewee import OperationalError, SqliteDatabase

from store.blobs import BlobStore
from store.datadir import (
    BLOB_DIR_NAME,
    CATALOG_ID_KEY,
    CATALOG_SEAL_KEY,
    DB_FILE_NAME,
    DOCTOR_HINT,
    FINGERPRINT_KEY,
    DirectoryFacts,
    Fingerprint,
    directory_lock,
    observe,
    prepare_home,
    recorded_key_fingerprint,
    refuse_foreign_catalog,
    require_writable,
    sqlite_detail,
    write_fingerprint_file,
)
from store.db import open_database, thread_connection
from store.errors import CatalogProblem, DataDirectoryProblem, NoKnowledgeBase
from store.files import create_once
from store.keys import KEY_FILE_NAME, catalog_seal, key_fingerprint, load_or_create_key, verify_key
from store.migrations import LATEST_VERSION, apply_migrations

if TYPE_CHECKING:
    from store.ann import VectorIndexes
    from store.node_lock import NodeLock
    from store.sqlite import SqliteCatalog, SqliteChunks, SqliteLexical, SqliteSources

# The SQLite catalog schema this kbtui reads and writes (an older one is upgraded).
LATEST_SCHEMA_VERSION = LATEST_VERSION

log = logging.getLogger("store")  # the package's logger, as before this module was split out

__all__ = ["DB_FILE_NAME", "LATEST_SCHEMA_VERSION", "Store", "create_store", "open_store"]


@dataclass
class Store:
    """An opened SQLite data directory: the interfaces of :mod:`kbtui.ports`
    over the process's one SQLite catalog, the blobs and the vector index files."""

    home: Path
    db: SqliteDatabase
    blobs: BlobStore
    node_key: bytes
    read_only: bool = False
    backend = "sqlite"

    # The adapters load on first use (store.sqlite imports the catalog modules, which import this one).
    @functools.cached_property
    def catalog(self) -> SqliteCatalog:
        from store.sqlite import SqliteCatalog

        return SqliteCatalog(self)

    @functools.cached_property
    def sources(self) -> SqliteSources:
        from store.sqlite import SqliteSources

        return SqliteSources(self)

    @functools.cached_property
    def chunks(self) -> SqliteChunks:
        from store.sqlite import SqliteChunks

        return SqliteChunks()

    @functools.cached_property
    def lexical(self) -> SqliteLexical:
        from store.sqlite import SqliteLexical

        return SqliteLexical()

    @functools.cached_property
    def vectors(self) -> VectorIndexes:
        # A derived cache of the catalog: a reader still saves it where the
        # directory can be written (the next search loads instead of rebuilding).
        from store.ann import VectorIndexes
        from store.datadir import can_write

        return VectorIndexes(self.home, read_only=not can_write(self.home))

    @property
    def coordination(self) -> None:
        """One node per data directory works alone on SQLite: nothing to coordinate."""
        return None

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """This thread's SQLite connection, opened (and closed after) if it has none."""
        with thread_connection():
            yield

    def lock_node(self) -> NodeLock | None:
        from store.node_lock import NodeLock

        return NodeLock.try_acquire(self.home)

    def node_running(self) -> bool:
        from store.node_lock import node_running

        return node_running(self.home)

    def close(self) -> None:
        try:
            if "vectors" in self.__dict__:
                self.vectors.close()
        finally:
            self._close_catalog()

    def _close_catalog(self) -> None:
        # SQLite's advice for long-lived connections: refresh the planner's
        # statistics where they went stale (cheap when nothing changed). A
        # read-only connection leaves that to the writers.
        try:
            if not self.db.is_closed() and not self.read_only:
                self.db.execute_sql("PRAGMA optimize")
        except OperationalError:
            pass  # only statistics: a full disk or a lock must not fail a close (nor hide why a command failed)
        finally:
            self.db.close()


def open_store(home: Path, *, read_only: bool = False) -> Store:
    """Open the data directory ``home``: read-only, or for writing (initialising it
    when it is fresh).

    Refuses, before anything is written, a directory others can write, a wrong
    or missing key, and a catalog that is missing, empty, unreadable, newer
    than this kbtui or not this directory's own (see :mod:`store.datadir`). A
    new catalog and key are made only in a fresh directory. A read-only open
    never writes the catalog and never creates the directory.
    """
    prepare_home(home, create=not read_only)
    if not read_only:
        require_writable(home)
    facts = observe(home)
    if facts.fresh:
        if read_only:
            raise _nothing_here(home)
        with directory_lock(home, exclusive=True):
            facts = observe(home)  # another process may have initialised it meanwhile
            if facts.fresh:
                return _initialise(home)
    elif facts.fingerprint is None:
        # Perhaps mid-initialisation by another process: look again once it is done.
        with directory_lock(home, exclusive=False):
            facts = observe(home)
        if facts.fresh and read_only:
            raise _nothing_here(home)
    key = _verified_key(home, facts)
    if facts.catalog.version < LATEST_VERSION and read_only:
        _upgrade_schema(home)
    db = _open_catalog(home, read_only=read_only)
    try:
        if not read_only:
            apply_migrations(db)
            _record_fingerprint(home, db, key, facts)
        return Store(home=home, db=db, blobs=BlobStore(home / BLOB_DIR_NAME, key), node_key=key, read_only=read_only)
    except BaseException:
        db.close()
        raise


def create_store(home: Path, key: bytes) -> Store:
    """Initialise the fresh data directory ``home`` around an existing node key
    (``kbtui recover`` rebuilds a catalog for sources sealed with it)."""
    prepare_home(home, create=True)
    with directory_lock(home, exclusive=True):
        if not observe(home).fresh:
            raise DataDirectoryProblem(f"the data directory {home} is not empty; give a new one")
        return _initialise(home, key)


def _nothing_here(home: Path) -> NoKnowledgeBase:
    return NoKnowledgeBase(f"no knowledge base in {home} yet; add documents with kbtui add, or point KBTUI_HOME elsewhere")


def _verified_key(home: Path, facts: DirectoryFacts) -> bytes:
    recorded = recorded_key_fingerprint(facts)
    key = load_or_create_key(home, data_exists=True)
    verify_key(key, recorded)
    refuse_foreign_catalog(facts, key)
    return key


def _open_catalog(home: Path, *, read_only: bool) -> SqliteDatabase:
    try:
        return open_database(home / DB_FILE_NAME, read_only=read_only)
    except OperationalError as exc:
        raise CatalogProblem(
            f"the catalog ({DB_FILE_NAME}) could not be opened{' read-only' if read_only else ''} "
            f"({sqlite_detail(exc)}) {DOCTOR_HINT}"
        ) from None


def _initialise(home: Path, key: bytes | None = None) -> Store:
    """Make the key (or record ``key``), the catalog and the fingerprint file of a
    fresh directory, in that order: the fingerprint file, written last, marks it initialised."""
    os.makedirs(home / BLOB_DIR_NAME, mode=0o700, exist_ok=True)
    if key is None:
        key = load_or_create_key(home, data_exists=False)
    elif not create_once(home / KEY_FILE_NAME, key):
        raise DataDirectoryProblem(f"the data directory {home} is not empty; give a new one")
    db_path = home / DB_FILE_NAME
    # SQLite itself never creates the catalog (mode=rw): only this does, owner-only.
    # An empty file already there was checked by the caller.
    with contextlib.suppress(FileExistsError):
        os.close(os.open(db_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    db = open_database(db_path)
    try:
        apply_migrations(db)
        fingerprint = Fingerprint(key_fingerprint(key), secrets.token_hex(16))
        with db.atomic():
            db.execute_sql(
                "INSERT OR REPLACE INTO node_meta(key, value) VALUES (?, ?), (?, ?), (?, ?)",
                (FINGERPRINT_KEY, fingerprint.key_fingerprint, CATALOG_ID_KEY, fingerprint.catalog_id.encode("ascii"),
                 CATALOG_SEAL_KEY, catalog_seal(key, fingerprint.catalog_id)),
            )
        write_fingerprint_file(home, fingerprint)
    except BaseException:
        db.close()
        raise
    log.info("initialised a new data directory")
    return Store(home=home, db=db, blobs=BlobStore(home / BLOB_DIR_NAME, key), node_key=key)


def _record_fingerprint(home: Path, db: SqliteDatabase, key: bytes, facts: DirectoryFacts) -> None:
    """A directory initialised before ``node.fingerprint`` existed gets one now
    (and its catalog an id), and a catalog from before the seal its id sealed
    with the key, from a catalog that the key has just been checked against."""
    if facts.fingerprint is not None and facts.catalog.catalog_id is not None and facts.catalog.catalog_seal is not None:
        return
    catalog_id = facts.fingerprint.catalog_id if facts.fingerprint else secrets.token_hex(16)
    with db.atomic():
        db.execute_sql(
            "INSERT OR IGNORE INTO node_meta(key, value) VALUES (?, ?)", (CATALOG_ID_KEY, catalog_id.encode("ascii"))
        )
        row = db.execute_sql("SELECT value FROM node_meta WHERE key = ?", (CATALOG_ID_KEY,)).fetchone()
        catalog_id = bytes(row[0]).decode("ascii")
        db.execute_sql(
            "INSERT OR IGNORE INTO node_meta(key, value) VALUES (?, ?)", (CATALOG_SEAL_KEY, catalog_seal(key, catalog_id))
        )
    fingerprint = Fingerprint(key_fingerprint(key), catalog_id)
    if write_fingerprint_file(home, fingerprint) != fingerprint:
        raise CatalogProblem(
            f"the catalog ({DB_FILE_NAME}) is not the one this data directory was initialised with "
            f"(node.fingerprint names another) {DOCTOR_HINT}"
        )


def _upgrade_schema(home: Path) -> None:
    """A read-only command found a catalog from an older kbtui: the one write it
    makes is the schema upgrade, through a writing open, once."""
    try:
        open_store(home).close()
    except (OSError, OperationalError, DataDirectoryProblem):
        raise CatalogProblem(
            f"the catalog ({DB_FILE_NAME}) was written by an older kbtui and must be upgraded, which "
            "needs write access: start kbtui serve once where the data directory is writable"
        ) from None
    log.info("upgraded the catalog schema to version %d", LATEST_VERSION)

