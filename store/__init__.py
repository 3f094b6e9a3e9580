"""Everything on disk: the SQLite catalog, encrypted blobs, vectors and the node key."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from peewee import SqliteDatabase

from store.blobs import BlobStore
from store.db import open_database
from store.keys import key_fingerprint, load_or_create_key, verify_key
from store.migrations import apply_migrations

DB_FILE_NAME = "kb.sqlite3"
_FINGERPRINT_KEY = "node_key_fingerprint"


@dataclass
class Store:
    home: Path
    db: SqliteDatabase
    blobs: BlobStore
    node_key: bytes

    def close(self) -> None:
        # SQLite's advice for long-lived connections: refresh the planner's
        # statistics where they went stale (cheap when nothing changed).
        try:
            if not self.db.is_closed():
                self.db.execute_sql("PRAGMA optimize")
        finally:
            self.db.close()


def open_store(home: Path) -> Store:
    """Open (or initialise) the data directory ``home``.

    Refuses to start with a wrong key, and never creates a new key when
    encrypted data already exists.
    """
    home.mkdir(parents=True, exist_ok=True)
    os.chmod(home, 0o700)
    db = open_database(home / DB_FILE_NAME)
    apply_migrations(db)
    row = db.execute_sql("SELECT value FROM node_meta WHERE key = ?", (_FINGERPRINT_KEY,)).fetchone()
    fingerprint = bytes(row[0]) if row else None
    blob_dir = home / "blobs"
    has_blobs = blob_dir.exists() and any(blob_dir.iterdir())
    try:
        key = load_or_create_key(home, data_exists=fingerprint is not None or has_blobs)
        verify_key(key, fingerprint)
    except BaseException:
        db.close()
        raise
    if fingerprint is None:
        with db.atomic():
            db.execute_sql(
                "INSERT OR IGNORE INTO node_meta(key, value) VALUES (?, ?)",
                (_FINGERPRINT_KEY, key_fingerprint(key)),
            )
        # Another process may have initialised the same directory concurrently.
        row = db.execute_sql("SELECT value FROM node_meta WHERE key = ?", (_FINGERPRINT_KEY,)).fetchone()
        verify_key(key, bytes(row[0]))
    return Store(home=home, db=db, blobs=BlobStore(blob_dir, key), node_key=key)
