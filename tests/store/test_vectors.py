"""The vector store: exact search, identity isolation, and search through the
hnswlib index agreeing with it in every scope.

Vectors are committed through the real catalog into a real SQLite file.
"""

from __future__ import annotations

import sqlite3

import numpy as np

from store import catalog
from store.ann import IndexSettings, VectorIndexes
from store.db import database
from store.models import Chunk, Vector
from store.vectors import committed_vectors, exact_search, top_k
from tests.store.vector_corpus import (
    GRAPH_ONLY,
    IDENTITY,
    OTHER_IDENTITY,
    add_document,
    commit,
    recall_at_10,
    unit_vectors,
)


def test_top_k_is_best_first_and_fast_on_mostly_equal_scores():
    scores = np.zeros(200_000, np.float32)
    scores[[5, 70_000, 199_999]] = [0.3, 0.9, 0.5]
    assert top_k(scores, 3).tolist() == [70_000, 199_999, 5]
    assert top_k(scores, 5).tolist()[:3] == [70_000, 199_999, 5]
    assert top_k(np.array([0.1, 0.7], np.float32), 10).tolist() == [1, 0]


def test_graph_search_agrees_with_exact_search(node, tmp_path, rng):
    data = unit_vectors(rng, 1500)
    for part in range(3):
        add_document(node, tmp_path, f"doc{part}", data[part * 500 : (part + 1) * 500])
    indexes = VectorIndexes(node.config.home, GRAPH_ONLY)
    assert recall_at_10(indexes, unit_vectors(rng, 30)) >= 0.95
    indexes.close()


def test_search_is_confined_to_the_collection_on_every_path(node, tmp_path, rng):
    data = unit_vectors(rng, 1200)
    _, big_ids = add_document(node, tmp_path, "big", data[:1000], collection="BIG")
    _, small_ids = add_document(node, tmp_path, "small", data[1000:], collection="SMALL")
    for settings in (GRAPH_ONLY, IndexSettings(inline_build_max_rows=100_000)):
        indexes = VectorIndexes(node.config.home, settings)
        for query in unit_vectors(rng, 10):
            small = indexes.search(query, IDENTITY, "SMALL", limit=10)
            big = indexes.search(query, IDENTITY, "BIG", limit=10)
            assert len(small) == 10 and {c for c, _ in small} <= set(small_ids)
            assert len(big) == 10 and {c for c, _ in big} <= set(big_ids)
            assert [c for c, _ in small] == [c for c, _ in exact_search(query, IDENTITY, "SMALL", limit=10)]
        assert indexes.search(data[0], IDENTITY, "NOWHERE", limit=10) == []
        indexes.close()


def test_vectors_of_another_identity_or_width_are_never_compared(node, tmp_path, rng):
    data = unit_vectors(rng, 400)
    _, mine = add_document(node, tmp_path, "mine", data[:200])
    _, theirs = add_document(node, tmp_path, "theirs", data[200:], identity=OTHER_IDENTITY)
    _, wide = add_document(node, tmp_path, "wide", unit_vectors(rng, 50, 48), identity="test:unit-vectors@0000:native:48")
    indexes = VectorIndexes(node.config.home, GRAPH_ONLY)
    for query in data[200:210]:  # exact copies of the other identity's vectors
        hits = indexes.search(query, IDENTITY, "DEFAULT", limit=20)
        assert hits and {c for c, _ in hits} <= set(mine)
        assert {c for c, _ in indexes.search(query, OTHER_IDENTITY, "DEFAULT", limit=20)} <= set(theirs)
    # A query of another width never reaches vectors of this identity's width.
    narrow_hits = indexes.search(unit_vectors(rng, 1, 48)[0], IDENTITY, "DEFAULT", limit=20)
    assert narrow_hits == []
    assert not set(wide) & {c for c, _ in indexes.search(data[0], IDENTITY, "DEFAULT", limit=50)}
    indexes.close()


def test_a_failed_document_is_not_served_by_the_graph(node, tmp_path, rng):
    data = unit_vectors(rng, 300)
    failing, ids = add_document(node, tmp_path, "failing", data[:100])
    add_document(node, tmp_path, "fine", data[100:])
    indexes = VectorIndexes(node.config.home, GRAPH_ONLY)
    catalog.set_status(failing, catalog.Status.FAILED, reason="extract_failed")
    hits = indexes.search(data[0], IDENTITY, "DEFAULT", limit=10)
    assert len(hits) == 10 and not {c for c, _ in hits} & set(ids)
    indexes.close()


def test_a_document_with_more_vectors_than_one_statement_may_bind_is_replaced_and_purged(node, tmp_path, rng):
    # SQLite before 3.32 binds at most 999 parameters per statement: every
    # list of ids the store sends is batched below that.
    database.connection().setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
    document_id, first = add_document(node, tmp_path, "long", unit_vectors(rng, 1200))
    replaced = unit_vectors(rng, 1200)
    second = commit(document_id, replaced, salt="again")
    assert Vector.select().count() == 1200 and not set(first) & set(second)
    assert exact_search(replaced[7], IDENTITY, "DEFAULT", limit=1)[0][0] == second[7]
    hashes = [c.content_hash for c in Chunk.select(Chunk.content_hash)]
    reused = committed_vectors(hashes, identity=IDENTITY, dim=replaced.shape[1], parser_version=1, chunker_version=1)
    assert len(reused) == 1200
    assert sorted(catalog.purge_document(node.store, document_id)) == sorted(second)
    assert Vector.select().count() == 0
