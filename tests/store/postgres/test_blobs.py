"""Encrypted blobs in PostgreSQL rows: the store.blobs format, streamed, atomic."""

from __future__ import annotations

import hashlib
import io
import os
import tracemalloc
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import psycopg
import pytest

from store.blobs import SEGMENT_SIZE, BlobStore, FileChanged
from store.errors import BlobCorrupt, StoreError
from store.postgres.blobs import PostgresBlobStore
from store.postgres.connection import PostgresSettings, connect

KEY = bytes(range(32))


@pytest.fixture
def connection_source(settings: PostgresSettings, conn: psycopg.Connection) -> Callable[[], AbstractContextManager]:
    return lambda: connect(settings)


@pytest.fixture
def blobs(connection_source) -> PostgresBlobStore:
    return PostgresBlobStore(connection_source, KEY)


class CountingReader(io.RawIOBase):
    """``size`` pseudo-random bytes produced on demand (never all in memory)."""

    def __init__(self, size: int) -> None:
        self.remaining = size
        self.digest = hashlib.sha256()
        self.block = os.urandom(SEGMENT_SIZE)

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        n = self.remaining if n < 0 else min(n, self.remaining)
        data = (self.block * (n // len(self.block) + 1))[:n]
        self.remaining -= n
        self.digest.update(data)
        return data


@pytest.mark.parametrize("size", [0, 1, SEGMENT_SIZE - 1, SEGMENT_SIZE, SEGMENT_SIZE + 1, 3 * SEGMENT_SIZE + 17])
def test_round_trip_at_segment_boundaries(blobs: PostgresBlobStore, size: int) -> None:
    data = os.urandom(size)
    assert blobs.write_bytes("doc1", data) == size
    assert blobs.read_bytes("doc1") == data
    assert blobs.verify("doc1") == size


def test_rows_laid_end_to_end_are_the_file_store_blobs_format(
    blobs: PostgresBlobStore, conn: psycopg.Connection, tmp_path: Path
) -> None:
    data = os.urandom(2 * SEGMENT_SIZE + 5)
    blobs.write_bytes("doc1", data)
    header = conn.execute("SELECT header FROM blob WHERE id = 'doc1'").fetchone()[0]
    records = [r[0] for r in conn.execute("SELECT record FROM blob_segment WHERE blob_id = 'doc1' ORDER BY counter")]
    assert len(records) == 3
    (tmp_path / "blobs").mkdir()
    (tmp_path / "blobs" / "doc1").write_bytes(bytes(header) + b"".join(bytes(r) for r in records))
    assert BlobStore(tmp_path / "blobs", KEY).read_bytes("doc1") == data


def test_a_large_blob_streams_in_bounded_memory(blobs: PostgresBlobStore) -> None:
    size = 48 * 1024 * 1024
    source = CountingReader(size)
    tracemalloc.start()
    try:
        sealed = blobs.seal("big", source)
        _, written_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        digest = hashlib.sha256()
        for part in blobs.iter_plaintext("big"):
            digest.update(part)
        _, read_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sealed.size == size and sealed.sha256 == source.digest.hexdigest() == digest.hexdigest()
    assert written_peak < 8 * 1024 * 1024, f"writing held {written_peak} bytes"
    assert read_peak < 8 * 1024 * 1024, f"reading held {read_peak} bytes"


def test_a_blob_copied_to_another_document_fails_authentication(blobs: PostgresBlobStore, conn) -> None:
    blobs.write_bytes("doc1", b"first document")
    blobs.write_bytes("doc2", b"second document")
    conn.execute("DELETE FROM blob_segment WHERE blob_id = 'doc2'")
    conn.execute("UPDATE blob SET header = (SELECT header FROM blob WHERE id = 'doc1') WHERE id = 'doc2'")
    conn.execute("INSERT INTO blob_segment SELECT 'doc2', counter, record FROM blob_segment WHERE blob_id = 'doc1'")
    with pytest.raises(BlobCorrupt, match="failed authentication"):
        blobs.read_bytes("doc2")


def test_truncated_reordered_or_tampered_segments_are_detected(blobs: PostgresBlobStore, conn) -> None:
    data = os.urandom(3 * SEGMENT_SIZE)
    blobs.write_bytes("doc1", data)
    conn.execute("DELETE FROM blob_segment WHERE blob_id = 'doc1' AND counter = 2")  # a segment boundary
    with pytest.raises(BlobCorrupt):
        blobs.verify("doc1")

    blobs.write_bytes("doc1", data)
    conn.execute("UPDATE blob_segment SET counter = 9 WHERE blob_id = 'doc1' AND counter = 0")
    conn.execute("UPDATE blob_segment SET counter = 0 WHERE blob_id = 'doc1' AND counter = 1")
    conn.execute("UPDATE blob_segment SET counter = 1 WHERE blob_id = 'doc1' AND counter = 9")
    with pytest.raises(BlobCorrupt):
        blobs.verify("doc1")

    blobs.write_bytes("doc1", data)
    conn.execute(
        "UPDATE blob_segment SET record = overlay(record placing '\\xff'::bytea from 10 for 1)"
        " WHERE blob_id = 'doc1' AND counter = 1"
    )
    with pytest.raises(BlobCorrupt):
        blobs.verify("doc1")


def test_another_key_cannot_read(blobs: PostgresBlobStore, connection_source) -> None:
    blobs.write_bytes("doc1", b"secret")
    with pytest.raises(BlobCorrupt):
        PostgresBlobStore(connection_source, bytes(32)).read_bytes("doc1")


def test_a_missing_blob_is_reported(blobs: PostgresBlobStore) -> None:
    with pytest.raises(BlobCorrupt, match="missing"):
        blobs.read_bytes("nothing")


def test_a_refused_write_stores_nothing_and_keeps_the_old_blob(blobs: PostgresBlobStore, conn) -> None:
    blobs.write_bytes("doc1", b"old bytes")
    with pytest.raises(FileChanged):
        blobs.write("doc1", io.BytesIO(b"new bytes"), expected_sha256="0" * 64)
    assert blobs.read_bytes("doc1") == b"old bytes"
    with pytest.raises(FileChanged):
        blobs.write("doc2", io.BytesIO(b"new bytes"), expected_sha256="0" * 64)
    assert blobs.blob_ids() == {"doc1"}
    assert conn.execute("SELECT count(*) FROM blob_segment WHERE blob_id = 'doc2'").fetchone() == (0,)


def test_a_write_joins_the_callers_transaction(blobs: PostgresBlobStore, settings: PostgresSettings) -> None:
    with connect(settings) as conn:
        with pytest.raises(RuntimeError), conn.transaction():
            blobs.seal("doc1", io.BytesIO(b"bytes"), conn=conn)
            raise RuntimeError("the document row failed")
        assert blobs.blob_ids() == set()
        with conn.transaction():
            blobs.seal("doc1", io.BytesIO(b"bytes"), conn=conn)
    assert blobs.read_bytes("doc1") == b"bytes"


def test_read_bytes_refuses_more_than_the_cap_and_delete_removes(blobs: PostgresBlobStore) -> None:
    blobs.write_bytes("doc1", b"x" * (SEGMENT_SIZE + 10))
    with pytest.raises(StoreError, match="larger than the allowed limit"):
        blobs.read_bytes("doc1", max_bytes=SEGMENT_SIZE)
    assert blobs.delete("doc1") is True
    assert blobs.delete("doc1") is False
    assert blobs.blob_ids() == set()
