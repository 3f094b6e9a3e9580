"""Opening the data directory: an up-to-date catalog is opened without a write
transaction, and a directory from before node.fingerprint is adopted."""

from __future__ import annotations

import json
import sqlite3
import time
from contextlib import closing

from store import open_store
from store.datadir import FINGERPRINT_FILE_NAME


def test_an_up_to_date_catalog_opens_while_another_process_holds_the_write_lock(tmp_path):
    home = tmp_path / "home"
    open_store(home).close()
    with closing(sqlite3.connect(home / "kb.sqlite3", isolation_level=None)) as holder:
        holder.execute("BEGIN IMMEDIATE")
        for read_only in (True, False):
            started = time.monotonic()
            open_store(home, read_only=read_only).close()
            # The migrations used to take BEGIN IMMEDIATE on every open: 15 s, then "database is locked".
            assert time.monotonic() - started < 5, f"read_only={read_only}: the open waited for the write lock"
        holder.execute("ROLLBACK")


def test_a_directory_from_before_the_fingerprint_record_is_adopted_by_a_writing_open_only(tmp_path):
    home = tmp_path / "home"
    open_store(home).close()
    (home / FINGERPRINT_FILE_NAME).unlink()
    with closing(sqlite3.connect(home / "kb.sqlite3")) as conn, conn:
        conn.execute("DELETE FROM node_meta WHERE key = 'catalog_id'")

    open_store(home, read_only=True).close()
    assert not (home / FINGERPRINT_FILE_NAME).exists()

    open_store(home).close()
    recorded = json.loads((home / FINGERPRINT_FILE_NAME).read_text())
    with closing(sqlite3.connect(home / "kb.sqlite3")) as conn:
        catalog_id = conn.execute("SELECT value FROM node_meta WHERE key = 'catalog_id'").fetchone()[0]
    assert recorded["catalog_id"] == bytes(catalog_id).decode()
    assert (home / FINGERPRINT_FILE_NAME).stat().st_mode & 0o777 == 0o600
