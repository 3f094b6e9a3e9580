"""A long read transaction (e.g. a UI holding a cursor) delays checkpoints; once
it ends, checkpoints proceed and the WAL returns to a bounded size (HOSTILE 21)."""

from __future__ import annotations

import sqlite3

from store.db import database
from tests.actors.conftest import add_documents


def wal_bytes(home) -> int:
    wal = home / "kb.sqlite3-wal"
    return wal.stat().st_size if wal.exists() else 0


def test_the_wal_is_bounded_once_a_long_reader_lets_go(make_node, tmp_path):
    node = make_node()
    home = node.config.home
    reader = sqlite3.connect(home / "kb.sqlite3", isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM document").fetchone()  # holds a snapshot

    ids = add_documents(node, tmp_path, 150, words=400)
    assert set(node.index(ids).values()) == {"Indexed"}
    grown = wal_bytes(home)
    assert grown > 4 * 1024 * 1024, "the held snapshot kept the writer from checkpointing"

    reader.execute("COMMIT")
    reader.close()
    more = add_documents(node, tmp_path / "more", 5)
    assert set(node.index(more).values()) == {"Indexed"}
    # Checkpoints proceed: a passive one now copies every frame back.
    busy, log_frames, checkpointed = database.execute_sql("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert busy == 0 and log_frames == checkpointed
    assert database.execute_sql("PRAGMA journal_size_limit").fetchone()[0] == 64 * 1024 * 1024
