"""The lexical arm on PostgreSQL gives what the SQLite arm gives: the same
chunks, written into both stores, rank the same under BM25 (same rows, same
order, same scores), with the same statistics, the same scope and the same
visibility; CJK text matches as substrings."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import psycopg
import pytest

from store import catalog
from store import fts as sqlite_fts
from store.models import Status
from store.postgres import catalog as pg_catalog
from store.postgres import lexical
from store.postgres.blobs import PostgresBlobStore
from store.postgres.connection import PostgresSettings, connect

from .corpus import KEY, WORDS, add_postgres, add_sqlite, random_chunks, text_chunks


@dataclass
class BothStores:
    conn: psycopg.Connection
    blobs: PostgresBlobStore
    sqlite_uid: dict[int, str]
    postgres_uid: dict[int, str]
    sqlite_documents: dict[str, str]  # name -> id
    postgres_documents: dict[str, str]

    def from_sqlite(self, found: list[tuple[int, float]]) -> list[tuple[str, float]]:
        return [(self.sqlite_uid[chunk_id], score) for chunk_id, score in found]

    def from_postgres(self, found: list[tuple[int, float]]) -> list[tuple[str, float]]:
        return [(self.postgres_uid[chunk_id], score) for chunk_id, score in found]


@pytest.fixture
def both(node, conn: psycopg.Connection, settings: PostgresSettings) -> BothStores:
    rng = np.random.default_rng(11)
    blobs = PostgresBlobStore(lambda: connect(settings), KEY)
    stores = BothStores(conn, blobs, {}, {}, {}, {})
    for number in range(6):
        name = f"guide{number}"
        sections, chunks = random_chunks(rng, name, 40)
        collection = "OTHER" if number == 5 else "DEFAULT"
        sqlite_id, sqlite_ids = add_sqlite(node, name, chunks, sections=sections, collection=collection)
        postgres_id, postgres_ids = add_postgres(conn, blobs, name, chunks, sections=sections, collection=collection)
        stores.sqlite_uid.update(zip(sqlite_ids, (c.chunk_uid for c in chunks), strict=True))
        stores.postgres_uid.update(zip(postgres_ids, (c.chunk_uid for c in chunks), strict=True))
        stores.sqlite_documents[name] = sqlite_id
        stores.postgres_documents[name] = postgres_id
    return stores


def same_ranking(sqlite: list[tuple[str, float]], postgres: list[tuple[str, float]]) -> None:
    """Same rows with the same scores, and the same order up to ties."""
    assert dict(postgres) == pytest.approx(dict(sqlite), rel=1e-6, abs=1e-9)

    def canonical(found: list[tuple[str, float]]) -> list[str]:
        return [uid for uid, _ in sorted(found, key=lambda item: (-round(item[1], 6), item[0]))]

    assert canonical(postgres) == canonical(sqlite)


def test_statistics_and_row_lengths_are_fts5s(both: BothStores) -> None:
    rows, average = lexical.bm25_statistics(both.conn)
    assert (rows, average) == pytest.approx(sqlite_fts.bm25_statistics())
    sqlite_lengths = sqlite_fts.row_token_counts(list(both.sqlite_uid))
    postgres_lengths = lexical.row_token_counts(both.conn, list(both.postgres_uid))
    assert {both.postgres_uid[i]: n for i, n in postgres_lengths.items()} == {
        both.sqlite_uid[i]: n for i, n in sqlite_lengths.items()
    }
    assert lexical.integrity_check(both.conn)


def test_term_counts_are_fts5s(both: BothStores) -> None:
    words = [*WORDS, "nowhere", "pg_basebackup", "résumé", "x86_64", "_"]
    for cap in (5, 1_000):
        generation = sqlite_fts.indexed_chunk_count()
        expected = sqlite_fts.term_row_counts(words, cap, generation=generation)
        assert lexical.term_row_counts(both.conn, words, cap, generation=0) == expected


@pytest.mark.parametrize("collection", ["DEFAULT", "OTHER"])
def test_bm25_rankings_are_fts5s(both: BothStores, collection: str) -> None:
    rng = np.random.default_rng(5)
    queries = [[w] for w in WORDS[::3]] + [
        [WORDS[int(i)] for i in rng.choice(len(WORDS), int(rng.integers(2, 5)), replace=False)] for _ in range(40)
    ]
    queries += [["pg_basebackup", "restore"], ["cafe"], ["café", "müller"], ["running"], ["x86_64", "deploy"]]
    matched = 0
    for words in queries:
        repeats = [int(r) for r in rng.integers(1, 4, len(words))]
        sqlite = sqlite_fts.ranked_matches(words, collection, limit=1000, repeats=repeats)
        postgres = lexical.ranked_matches(both.conn, words, collection, limit=1000, repeats=repeats)
        matched += bool(sqlite)
        same_ranking(both.from_sqlite(sqlite), both.from_postgres(postgres))
        top = lexical.ranked_matches(both.conn, words, collection, limit=10, repeats=repeats)
        assert top == postgres[:10]
    assert matched >= 0.8 * len(queries)


def test_a_document_scope_ranks_within_the_document(both: BothStores) -> None:
    words = ["backup", "restore", "the"]
    sqlite = sqlite_fts.ranked_matches(words, "DEFAULT", document_id=both.sqlite_documents["guide2"], limit=100)
    postgres = lexical.ranked_matches(
        both.conn, words, "DEFAULT", document_id=both.postgres_documents["guide2"], limit=100
    )
    assert postgres and len(postgres) <= 40
    same_ranking(both.from_sqlite(sqlite), both.from_postgres(postgres))


def test_only_served_documents_in_the_collection_are_found(both: BothStores) -> None:
    words = ["backup", "database"]
    other = {both.postgres_uid[c] for c, _ in lexical.ranked_matches(both.conn, words, "OTHER", limit=1000)}
    default = {both.postgres_uid[c] for c, _ in lexical.ranked_matches(both.conn, words, "DEFAULT", limit=1000)}
    assert other and default and not other & default
    assert lexical.ranked_matches(both.conn, words, "NOWHERE", limit=10) == []

    failed = both.postgres_documents["guide1"]
    before = lexical.ranked_matches(both.conn, words, "DEFAULT", limit=1000)
    assert pg_catalog.set_status(both.conn, failed, Status.FAILED, reason="extract_timeout")
    after = lexical.ranked_matches(both.conn, words, "DEFAULT", limit=1000)
    failed_chunks = {row[0] for row in both.conn.execute("SELECT id FROM chunk WHERE document_id = %s", (failed,))}
    assert {c for c, _ in after} == {c for c, _ in before} - failed_chunks
    assert lexical.newest_matches(both.conn, ["backup"], "DEFAULT", document_id=failed, limit=10, window=1000) == []


def test_newest_matches_are_fts5s(both: BothStores) -> None:
    for words in (["the"], ["the", "of", "and"], ["backup", "restore"], ["nowhere"], ["the", "nowhere"]):
        for window, limit in ((1000, 10), (30, 10), (1000, 1000)):
            sqlite = sqlite_fts.newest_matches(words, "DEFAULT", limit=limit, window=window)
            postgres = lexical.newest_matches(both.conn, words, "DEFAULT", limit=limit, window=window)
            assert [both.postgres_uid[c] for c in postgres] == [both.sqlite_uid[c] for c in sqlite], (words, window)


def test_statistics_follow_replacement_and_purge(both: BothStores) -> None:
    document_id = both.postgres_documents["guide3"]
    rows_before, _ = lexical.bm25_statistics(both.conn)
    chunks = text_chunks("guide3-v2", ["a single replacement chunk about zebras"])
    pg_catalog.commit_index(
        both.conn, document_id, sections=[], chunks=chunks, vectors=np.ones((1, 32), np.float32),
        identity="test:unit-vectors@0000:native:32", parser_version=1, chunker_version=1,
    )
    assert lexical.bm25_statistics(both.conn)[0] == rows_before - 40 + 1
    assert lexical.term_row_counts(both.conn, ["zebras"], 10, generation=0) == {"zebras": 1}
    assert lexical.integrity_check(both.conn)
    removed = pg_catalog.purge_document(both.conn, document_id)
    assert removed is not None and len(removed) == 1
    assert lexical.term_row_counts(both.conn, ["zebras"], 10, generation=0) == {"zebras": 0}
    assert lexical.bm25_statistics(both.conn)[0] == rows_before - 40
    assert lexical.integrity_check(both.conn)
    both.conn.execute("UPDATE lexical_total SET chunks = chunks + 1")
    assert not lexical.integrity_check(both.conn)


def test_query_words_are_never_syntax(both: BothStores) -> None:
    # parse_query only makes \\w runs; even so, nothing passed in can break out of its quotes.
    for words in (["it's"], ["a'b", "c\\"], ["&", "|", "!"], ["'", "<->"], ["canary7731"]):
        assert isinstance(lexical.ranked_matches(both.conn, words, "DEFAULT", limit=5), list)
        assert isinstance(lexical.newest_matches(both.conn, words, "DEFAULT", limit=5, window=50), list)
        lexical.term_row_counts(both.conn, words, 10, generation=0)


JAPANESE = [
    "東京都に住んでいます。毎日電車で会社に行きます。",
    "大阪と京都は近いです。東京から新幹線で行けます。",
    "北海道の冬はとても寒いです。",
    "the english chunk without any ideographs",
]


def test_cjk_runs_match_as_substrings(node, conn: psycopg.Connection, settings: PostgresSettings) -> None:
    blobs = PostgresBlobStore(lambda: connect(settings), KEY)
    chunks = text_chunks("japanese", JAPANESE)
    _, postgres_ids = add_postgres(conn, blobs, "japanese", chunks)
    _, sqlite_ids = add_sqlite(node, "japanese", chunks)
    # 東京 (two characters, below trigrams) inside 東京都に住んでいます.
    found = lexical.cjk_substring_matches(conn, "東京", "DEFAULT", limit=10, window=100)
    assert set(found) == {postgres_ids[0], postgres_ids[1]}
    expected = sqlite_fts.cjk_substring_matches("東京", "DEFAULT", limit=10, window=100)
    assert [sqlite_ids.index(c) for c in expected] == [postgres_ids.index(c) for c in found]
    # Three characters and more: through the trigram index, ranked.
    for runs in (["東京都"], ["新幹線", "北海道"], ["住んでいます"]):
        ranked = lexical.cjk_ranked_matches(conn, runs, "DEFAULT", limit=10)
        expected_ranked = sqlite_fts.cjk_ranked_matches(runs, "DEFAULT", limit=10)
        assert {postgres_ids.index(c) for c, _ in ranked} == {sqlite_ids.index(c) for c, _ in expected_ranked}
        assert ranked and all(score > 0 for _, score in ranked)
    assert lexical.cjk_ranked_matches(conn, ["存在しない"], "DEFAULT", limit=10) == []
    assert lexical.cjk_ranked_matches(conn, ["東京都"], "OTHER", limit=10) == []


def test_a_commit_of_a_deleted_document_writes_nothing(conn: psycopg.Connection, settings: PostgresSettings) -> None:
    blobs = PostgresBlobStore(lambda: connect(settings), KEY)
    document_id, chunk_ids = add_postgres(conn, blobs, "gone", text_chunks("gone", ["first words"]))
    assert pg_catalog.purge_document(conn, document_id) == chunk_ids
    assert pg_catalog.purge_document(conn, document_id) is None
    result = pg_catalog.commit_index(
        conn, document_id, sections=[], chunks=text_chunks("gone", ["second words"]),
        vectors=np.ones((1, 32), np.float32), identity="x:y@z:native:32", parser_version=1, chunker_version=1,
    )
    assert result is None
    assert conn.execute("SELECT count(*) FROM chunk").fetchone() == (0,)
    assert blobs.blob_ids() == set()
    with pytest.raises(catalog.Superseded):
        other, _ = add_postgres(conn, blobs, "changed", text_chunks("changed", ["words"]))
        pg_catalog.commit_index(
            conn, other, sections=[], chunks=text_chunks("changed", ["new words"]),
            vectors=np.ones((1, 32), np.float32), identity="x:y@z:native:32", parser_version=1, chunker_version=1,
            content_hash="0" * 64,
        )
    assert list(itertools.chain.from_iterable(conn.execute("SELECT content FROM chunk").fetchall())) == ["words"]
