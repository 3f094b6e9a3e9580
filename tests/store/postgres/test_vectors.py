"""The vector arm on pgvector: one HNSW index per identity and width, exact
agreement where it must be exact, recall where it is approximate, a small
collection inside a large base still gets its k hits, and vectors of another
identity or width are never compared."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from store.models import Status
from store.postgres import catalog as pg_catalog
from store.postgres import vectors
from store.postgres.blobs import PostgresBlobStore
from store.postgres.connection import PostgresSettings, connect

from .corpus import DIM, IDENTITY, KEY, add_postgres, text_chunks, unit_vectors

OTHER_IDENTITY = "test:other-model@1111:native:32"


@pytest.fixture
def blobs(settings: PostgresSettings, conn: psycopg.Connection) -> PostgresBlobStore:
    return PostgresBlobStore(lambda: connect(settings), KEY)


def add(conn, blobs, name: str, data: np.ndarray, *, collection: str = "DEFAULT", identity: str = IDENTITY) -> list[int]:
    chunks = text_chunks(name, [f"chunk {i} of {name}" for i in range(len(data))])
    return add_postgres(conn, blobs, name, chunks, vectors=data, collection=collection, identity=identity)[1]


def brute_force(data: np.ndarray, ids: list[int], query: np.ndarray, k: int) -> list[int]:
    scores = data @ query
    return [ids[i] for i in np.argsort(-scores, kind="stable")[:k]]


def test_each_identity_gets_its_own_hnsw_index(conn, blobs) -> None:
    rng = np.random.default_rng(1)
    add(conn, blobs, "a", unit_vectors(rng, 10))
    add(conn, blobs, "b", unit_vectors(rng, 10), identity=OTHER_IDENTITY)
    add(conn, blobs, "c", unit_vectors(rng, 10, 48), identity="test:wide@0000:native:48")
    rows = conn.execute("SELECT identity, dim, name FROM vector_index ORDER BY identity").fetchall()
    assert [(r[0], r[1]) for r in rows] == [
        (OTHER_IDENTITY, 32), ("test:unit-vectors@0000:native:32", 32), ("test:wide@0000:native:48", 48)
    ]
    definitions = {
        row[0]: row[1] for row in conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'chunk_vector'")
    }
    for _, dim, name in rows:
        assert "USING hnsw" in definitions[name] and f"vector({dim})" in definitions[name]
        assert "vector_cosine_ops" in definitions[name]


def test_exact_search_is_brute_force(conn, blobs) -> None:
    rng = np.random.default_rng(2)
    data = unit_vectors(rng, 300)
    ids = add(conn, blobs, "doc", data)
    for query in unit_vectors(rng, 5):
        found = vectors.exact_search(conn, query, IDENTITY, "DEFAULT", limit=10)
        assert [c for c, _ in found] == brute_force(data, ids, query, 10)
        best = int(np.argmax(data @ query))
        assert found[0][1] == pytest.approx(float(data[best] @ query), abs=1e-5)


def test_hnsw_search_has_recall_and_uses_the_index(conn, blobs) -> None:
    rng = np.random.default_rng(3)
    data = unit_vectors(rng, 4000)
    ids = add(conn, blobs, "many", data)
    queries = unit_vectors(rng, 30)
    hits = 0
    for query in queries:
        found = vectors.search(conn, query, IDENTITY, "DEFAULT", limit=10)
        assert len(found) == 10
        assert [s for _, s in found] == sorted((s for _, s in found), reverse=True)
        hits += len({c for c, _ in found} & set(brute_force(data, ids, query, 10)))
    assert hits / (10 * len(queries)) >= 0.95
    plan = "\n".join(
        row[0] for row in conn.execute(
            "EXPLAIN SELECT v.chunk_id FROM chunk_vector AS v WHERE v.identity = %s AND v.dim = 32 "
            "ORDER BY v.embedding::vector(32) <=> %s::vector(32) LIMIT 10",
            (IDENTITY, queries[0]),
        )
    )
    assert vectors.index_name(IDENTITY, DIM) in plan


def test_a_small_collection_in_a_large_base_still_gets_k_hits(conn, blobs) -> None:
    rng = np.random.default_rng(4)
    big = unit_vectors(rng, 6000)
    add(conn, blobs, "big", big, collection="BIG")
    # Two small collections: one under the exact-scan size, one above it (an iterative index scan).
    tiny_data = unit_vectors(rng, 40)
    tiny = add(conn, blobs, "tiny", tiny_data, collection="TINY")
    small_data = unit_vectors(rng, 2500)
    small = add(conn, blobs, "small", small_data, collection="SMALL")
    recall = 0
    for query in unit_vectors(rng, 10):
        found_tiny = vectors.search(conn, query, IDENTITY, "TINY", limit=10)
        assert [c for c, _ in found_tiny] == brute_force(tiny_data, tiny, query, 10)
        found_small = vectors.search(conn, query, IDENTITY, "SMALL", limit=10)
        assert len(found_small) == 10 and {c for c, _ in found_small} <= set(small)
        recall += len({c for c, _ in found_small} & set(brute_force(small_data, small, query, 10)))
    assert recall / 100 >= 0.9
    assert vectors.search(conn, big[0], IDENTITY, "NOWHERE", limit=10) == []


def test_vectors_of_another_identity_or_width_are_never_compared(conn, blobs) -> None:
    rng = np.random.default_rng(5)
    data = unit_vectors(rng, 400)
    mine = add(conn, blobs, "mine", data[:200])
    add(conn, blobs, "theirs", data[200:], identity=OTHER_IDENTITY)
    add(conn, blobs, "wide", unit_vectors(rng, 50, 48), identity="test:wide@0000:native:48")
    for query in data[200:205]:  # exact copies of the other identity's vectors
        assert {c for c, _ in vectors.search(conn, query, IDENTITY, "DEFAULT", limit=20)} <= set(mine)
        assert {c for c, _ in vectors.exact_search(conn, query, IDENTITY, "DEFAULT", limit=20)} <= set(mine)
    assert vectors.exact_search(conn, unit_vectors(rng, 1, 16)[0], IDENTITY, "DEFAULT", limit=5) == []


def test_failed_documents_and_document_scope(conn, blobs) -> None:
    rng = np.random.default_rng(6)
    first = add(conn, blobs, "first", unit_vectors(rng, 50))
    second = add(conn, blobs, "second", unit_vectors(rng, 50))
    second_id = conn.execute("SELECT document_id FROM chunk WHERE id = %s", (second[0],)).fetchone()[0]
    query = unit_vectors(rng, 1)[0]
    scoped = vectors.search(conn, query, IDENTITY, "DEFAULT", document_id=second_id, limit=10)
    assert len(scoped) == 10 and {c for c, _ in scoped} <= set(second)
    pg_catalog.set_status(conn, second_id, Status.FAILED, reason="embed_failed")
    assert {c for c, _ in vectors.search(conn, query, IDENTITY, "DEFAULT", limit=100)} == set(first)


def test_stored_and_committed_vectors_for_reuse(conn, blobs) -> None:
    rng = np.random.default_rng(7)
    data = unit_vectors(rng, 5)
    ids = add(conn, blobs, "doc", data)
    stored = vectors.stored_vectors(conn, ids, IDENTITY, DIM)
    assert set(stored) == set(ids)
    assert np.allclose(stored[ids[2]], data[2])
    assert vectors.stored_vectors(conn, ids, OTHER_IDENTITY, DIM) == {}
    hashes = [row[0] for row in conn.execute("SELECT content_hash FROM chunk ORDER BY id")]
    reused = vectors.committed_vectors(
        conn, [*hashes, "missing"], identity=IDENTITY, dim=DIM, parser_version=1, chunker_version=1
    )
    assert set(reused) == set(hashes) and np.allclose(reused[hashes[0]], data[0])
    assert vectors.committed_vectors(conn, hashes, identity=IDENTITY, dim=DIM, parser_version=2, chunker_version=1) == {}
