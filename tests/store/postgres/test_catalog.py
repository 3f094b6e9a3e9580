"""Catalog writes on PostgreSQL: a document and its blob commit together, an
index commit is all or nothing, a delete always wins, and writers from many
connections (many nodes) keep the statistics right without deadlocking."""

from __future__ import annotations

import hashlib
import io
import threading

import numpy as np
import psycopg
import pytest

from store.blobs import FileChanged, open_name
from store.models import Status
from store.postgres import catalog as pg_catalog
from store.postgres import lexical
from store.postgres.blobs import PostgresBlobStore
from store.postgres.connection import PostgresSettings, connect, register_types

from .corpus import DIM, IDENTITY, KEY, add_postgres, text_chunks


@pytest.fixture
def blobs(settings: PostgresSettings, conn: psycopg.Connection) -> PostgresBlobStore:
    return PostgresBlobStore(lambda: connect(settings), KEY)


def test_a_document_row_and_its_blob_commit_together(conn, blobs) -> None:
    data = b"# Title\n\nbody text"
    document_id = pg_catalog.create_document(
        conn, blobs, KEY, "DEFAULT", io.BytesIO(data), content_hash=hashlib.sha256(data).hexdigest(),
        display_name="secret-name.md", fmt="markdown",
    )
    row = conn.execute("SELECT status, size_bytes, display_name FROM document WHERE id = %s", (document_id,)).fetchone()
    assert row[0] == "Pending" and row[1] == len(data)
    assert open_name(KEY, document_id, bytes(row[2])) == "secret-name.md"
    assert blobs.read_bytes(document_id) == data
    history = conn.execute("SELECT status FROM status_history WHERE document_id = %s", (document_id,)).fetchall()
    assert history == [("Pending",)]

    with pytest.raises(FileChanged):
        pg_catalog.create_document(
            conn, blobs, KEY, "DEFAULT", io.BytesIO(b"other bytes"), content_hash="0" * 64,
            display_name="x.md", fmt="markdown",
        )
    with pytest.raises(psycopg.errors.UniqueViolation):  # the same upload twice in a collection
        pg_catalog.create_document(
            conn, blobs, KEY, "DEFAULT", io.BytesIO(data), content_hash=hashlib.sha256(data).hexdigest(),
            display_name="again.md", fmt="markdown",
        )
    assert conn.execute("SELECT count(*) FROM document").fetchone() == (1,)
    assert blobs.blob_ids() == {document_id}


def test_set_status_records_history_and_respects_the_bytes(conn, blobs) -> None:
    document_id, _ = add_postgres(conn, blobs, "doc", text_chunks("doc", ["words"]))
    assert pg_catalog.set_status(conn, document_id, Status.PENDING, progress=0.0)
    assert not pg_catalog.set_status(conn, document_id, Status.EXTRACTING, content_hash="0" * 64)
    assert pg_catalog.set_status(conn, document_id, Status.FAILED, reason="extract_timeout")
    assert not pg_catalog.set_status(conn, "no-such-document", Status.PENDING)
    history = [r[0] for r in conn.execute("SELECT status FROM status_history WHERE document_id = %s ORDER BY id",
                                          (document_id,))]
    assert history == ["Pending", "Indexed", "Pending", "Failed"]
    assert conn.execute("SELECT failure_reason, progress FROM document").fetchone() == ("extract_timeout", 0.0)


def test_a_failing_commit_leaves_the_previous_index_serving(conn, blobs) -> None:
    document_id, old_ids = add_postgres(conn, blobs, "doc", text_chunks("doc", ["original words"]))
    with pytest.raises(psycopg.errors.UniqueViolation):
        # Two chunks with one uid: the database refuses the second, the whole commit rolls back.
        chunks = text_chunks("doc-v2", ["new words", "more new words"])
        chunks[1] = chunks[1].__class__(**{**chunks[1].__dict__, "chunk_uid": chunks[0].chunk_uid})
        pg_catalog.commit_index(
            conn, document_id, sections=[], chunks=chunks, vectors=np.ones((2, DIM), np.float32), identity=IDENTITY,
            parser_version=1, chunker_version=1,
        )
    assert [r[0] for r in conn.execute("SELECT id FROM chunk ORDER BY id")] == old_ids
    assert lexical.term_row_counts(conn, ["original", "new"], 10, generation=0) == {"original": 1, "new": 0}
    assert lexical.integrity_check(conn)


def test_a_purge_waiting_on_a_commit_still_wins(settings: PostgresSettings, conn, blobs) -> None:
    document_id, _ = add_postgres(conn, blobs, "doc", text_chunks("doc", ["first"]))
    with connect(settings) as committer, connect(settings) as purger:
        register_types(committer)
        purged: list[object] = []
        with committer.transaction():
            committer.execute("SELECT 1 FROM document WHERE id = %s FOR UPDATE", (document_id,))
            thread = threading.Thread(target=lambda: purged.append(pg_catalog.purge_document(purger, document_id)))
            thread.start()
            # The purge waits for the row lock the commit holds ...
            deadline = 50
            while deadline and not committer.execute(
                "SELECT count(*) FROM pg_locks WHERE NOT granted"
            ).fetchone()[0]:
                deadline -= 1
                threading.Event().wait(0.1)
            assert deadline, "the purge never waited for the commit"
            pg_catalog.commit_index(
                committer, document_id, sections=[], chunks=text_chunks("doc-v2", ["second"]),
                vectors=np.ones((1, DIM), np.float32), identity=IDENTITY, parser_version=1, chunker_version=1,
            )
        thread.join(10)
    # ... and then deletes what the commit wrote: nothing of the document is left.
    assert purged and purged[0] is not None
    assert conn.execute("SELECT count(*) FROM chunk").fetchone() == (0,)
    assert blobs.blob_ids() == set()
    assert lexical.integrity_check(conn)
    assert pg_catalog.commit_index(
        conn, document_id, sections=[], chunks=text_chunks("doc-v3", ["third"]),
        vectors=np.ones((1, DIM), np.float32), identity=IDENTITY, parser_version=1, chunker_version=1,
    ) is None


def test_many_writers_at_once_keep_the_statistics_right(settings: PostgresSettings, conn, blobs) -> None:
    words = "backup restore replica cluster index query the of and".split()
    errors: list[BaseException] = []

    def writer(number: int) -> None:
        rng = np.random.default_rng(number)
        try:
            with connect(settings) as own:
                register_types(own)
                for doc in range(6):
                    texts = [" ".join(rng.choice(words, 12)) for _ in range(8)]
                    name = f"w{number}-{doc}"
                    document_id, _ = add_postgres(own, blobs, name, text_chunks(name, texts))
                    if doc % 3 == 2:  # replace one and purge another while the others write
                        add_postgres(own, blobs, f"{name}-x", text_chunks(f"{name}-x", texts[:2]))
                        pg_catalog.purge_document(own, document_id)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    assert lexical.integrity_check(conn)
    rows, _ = lexical.bm25_statistics(conn)
    assert rows == conn.execute("SELECT count(*) FROM chunk").fetchone()[0] == 4 * (4 * 8 + 2 * 2)
