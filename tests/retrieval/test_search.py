"""The search service on a real store: hostile queries, CJK, scope, degradation, explain."""

from __future__ import annotations

import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbtui.embedding import EmbeddingUnavailable
from kbtui.embedding.hashing import HashEmbedder
from kbtui.retrieval.search import SearchRequest, SearchService
from store import catalog
from store.db import database

HOSTILE = ['"x', "(a OR", "a AND", "NEAR(a b", "*a", "-a", "col:foo", "a NOT b", "content:x", '"', "''", "^", "a\x00b"]


class StoppedEmbedder(HashEmbedder):
    """The hash embedder after its provider went away: every query fails as a real outage does."""

    def embed_query(self, text: str):
        raise EmbeddingUnavailable("embedder_unreachable", "the embedding provider is not reachable")


@pytest.fixture
def corpus(indexed):
    return {
        "near": indexed("near.md", "# Operators\n\nThe NEAR(a b operator and col:foo filters are literal text here."),
        "backup": indexed("backup.md", "# Backups\n\nNightly pg_basebackup runs at 02:00 with WAL archiving."),
        "tokyo": indexed("tokyo.md", "# 住所\n\n東京都に住んでいます。毎日ラーメンを食べます。"),
        "ssh": indexed("ssh.md", "# SSH\n\nJump hosts accept ed25519 keys only. 🎉 release party"),
    }


def search(node, query, **options):
    return node.searcher.search(SearchRequest(query=query, collection_id=options.pop("collection", "DEFAULT"), **options))


@pytest.mark.parametrize("query", HOSTILE)
def test_fts_syntax_is_literal_text_and_never_an_error(node, corpus, caplog, query):
    caplog.set_level(logging.DEBUG)
    for mode in ("hybrid", "lexical", "vector"):
        response = search(node, query, mode=mode)
        assert "lexical_failed" not in response.degraded and "search_failed" not in response.degraded
    assert "fts5" not in caplog.text.lower() and "syntax error" not in caplog.text.lower()


def test_hostile_words_find_the_document_that_contains_them_literally(node, corpus):
    hits = search(node, "NEAR(a b", mode="lexical").hits
    assert hits and hits[0].document_id == corpus["near"]
    hits = search(node, "col:foo", mode="lexical").hits
    assert hits and hits[0].document_id == corpus["near"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=60))
def test_any_query_text_searches_without_failing(node, corpus, text):
    response = search(node, text)
    assert not {"lexical_failed", "vector_failed", "search_failed"} & set(response.degraded)


def test_cjk_words_match_inside_a_longer_run(node, corpus):
    for query in ("東京", "住んで", "ラーメンを食べ", "京"):
        hits = search(node, query, mode="lexical").hits
        assert [h.document_id for h in hits] == [corpus["tokyo"]], query


def test_emoji_are_not_searchable_lexically(node, corpus):
    response = search(node, "🎉", mode="lexical")
    assert response.hits == [] and response.explain.lexical_plan is None
    # Hybrid still answers from the vector arm (whatever it finds), without failing.
    assert not search(node, "🎉").degraded


def test_a_word_in_the_text_finds_its_document_first_in_every_mode(node, corpus):
    for mode in ("hybrid", "lexical"):
        hits = search(node, "basebackup", mode=mode).hits
        assert hits[0].document_id == corpus["backup"], mode
        assert "pg_basebackup" in hits[0].text


def test_hits_carry_provenance_and_per_arm_ranks(node, corpus):
    response = search(node, "jump hosts ed25519")
    top = response.hits[0]
    assert top.document_id == corpus["ssh"] and top.heading_path == "SSH"
    assert top.score_kind == "Fusion" and top.lexical_rank == 1 and top.vector_rank is not None
    assert top.lexical_score is not None and top.vector_score is not None and top.fusion_rank == 1
    assert response.explain.fusion == node.config.search_fusion
    assert response.explain.lexical_plan.ranked


def test_a_stopped_embedder_degrades_to_lexical_only(node, corpus):
    service = SearchService(node.config, StoppedEmbedder(), node.store)
    try:
        response = service.search(SearchRequest("ed25519 keys", "DEFAULT"))
    finally:
        service.close()
    assert response.degraded == ["embedder_unavailable"]
    assert response.hits and response.hits[0].document_id == corpus["ssh"]
    assert all(h.vector_rank is None for h in response.hits)
    no_embedder = SearchService(node.config, None, node.store)
    try:
        assert no_embedder.search(SearchRequest("ed25519", "DEFAULT")).degraded == ["embedder_unavailable"]
    finally:
        no_embedder.close()


def test_every_arm_stays_inside_the_collection(node, indexed):
    secret = indexed("secret.md", "# Payroll\n\nThe zebracorn budget is confidential. 東京の給料", collection="HR")
    public = indexed("lunch.md", "# Lunch\n\nSoup on Fridays near the zebra crossing.", collection="OPS")
    for mode in ("hybrid", "lexical", "vector"):
        for query in ("zebracorn budget", "東京", "confidential payroll"):
            hits = search(node, query, mode=mode, collection="OPS", limit=50).hits
            assert all(h.collection_id == "OPS" and h.document_id != secret for h in hits), (mode, query)
        hits = search(node, "zebracorn", mode=mode, collection="HR").hits
        assert hits and all(h.document_id == secret for h in hits)
    # A document id from another collection returns nothing rather than weakening the boundary.
    assert search(node, "zebracorn", collection="OPS", document_id=secret).hits == []
    assert [h.document_id for h in search(node, "soup", collection="OPS", document_id=public).hits] == [public]


def test_a_failed_document_is_served_by_no_arm(node, corpus):
    catalog.set_status(corpus["backup"], catalog.Status.FAILED, reason="internal_error")
    for mode in ("hybrid", "lexical", "vector"):
        assert all(h.document_id != corpus["backup"] for h in search(node, "basebackup", mode=mode, limit=50).hits)


def test_neighbour_expansion_returns_adjacent_chunks_of_the_same_document(node, indexed):
    paragraphs = "\n\n".join(f"Paragraph {i} talks about topic{i} " + "filler words " * 60 for i in range(6))
    document = indexed("long.md", "# Long\n\n" + paragraphs)
    hits = search(node, "topic3", mode="lexical", expand_neighbors=True, limit=1).hits
    assert hits and hits[0].document_id == document
    ordinals = [n.ordinal for n in hits[0].neighbors]
    hit_ordinal = database.execute_sql("SELECT ordinal FROM chunk WHERE chunk_uid = ?", [hits[0].chunk_id]).fetchone()[0]
    assert ordinals and set(ordinals) <= {hit_ordinal - 1, hit_ordinal + 1}


def test_a_query_of_only_very_common_words_is_answered_from_a_bounded_window(node, indexed, monkeypatch):
    from kbtui.retrieval import lexical

    for i in range(5):
        indexed(f"c{i}.md", f"# C{i}\n\nthe cat and the dog number{i}")
    monkeypatch.setattr(lexical, "ROW_BUDGET", 2)  # make every word "over budget" on this small index
    from store import fts

    fts.forget_row_counts()
    response = search(node, "cat dog", mode="lexical")
    assert response.explain.lexical_plan.recency == ("cat", "dog")
    assert len(response.hits) == 5
    fts.forget_row_counts()


def test_a_word_indexed_after_a_search_is_found_at_once(node, indexed):
    indexed("first.md", "# First\n\nnothing special")
    assert search(node, "quokkaword", mode="lexical").hits == []
    added = indexed("second.md", "# Second\n\nthe quokkaword arrives")
    assert [h.document_id for h in search(node, "quokkaword", mode="lexical").hits] == [added]


def test_a_word_repeated_in_the_query_weighs_more_in_the_lexical_arm(node, indexed):
    gears = indexed("gears.md", "# Notes\n\nThe quillon gearbox needs oil.")
    pumps = indexed("pumps.md", "# Notes\n\nThe quillon pumphouse needs oil.")
    first = search(node, "gearbox pumphouse pumphouse", mode="lexical").hits
    assert [h.document_id for h in first] == [pumps, gears]
    second = search(node, "gearbox gearbox pumphouse", mode="lexical").hits
    assert [h.document_id for h in second] == [gears, pumps]
    assert second[0].lexical_score > first[1].lexical_score  # the repeat added to the score
    assert search(node, "gearbox gearbox pumphouse", mode="lexical").explain.lexical_plan.repeats == (2, 1)


def test_per_document_search_returns_each_documents_best_chunk_once(node, indexed):
    long_text = "\n\n".join(f"## Part {i}\n\nThe lorikeet migration, chapter {i}. " + "filler words " * 80 for i in range(5))
    crowded = indexed("crowded.md", "# Lorikeets\n\n" + long_text)
    others = [indexed(f"other{i}.md", f"# Other {i}\n\nA lorikeet was seen once near tower {i}.") for i in range(3)]
    for mode in ("hybrid", "lexical", "vector"):
        chunks = search(node, "lorikeet migration", mode=mode, limit=4).hits
        documents = search(node, "lorikeet migration", mode=mode, limit=4, per_document=True).hits
        ids = [h.document_id for h in documents]
        assert len(ids) == len(set(ids)) == 4, mode
        assert set(ids) == {crowded, *others}, mode
        # The best chunk of the top document is the chunk search ranks first.
        assert documents[0].chunk_id == chunks[0].chunk_id, mode
    assert len({h.document_id for h in search(node, "lorikeet migration", mode="lexical", limit=4).hits}) < 4


def test_ranking_before_the_scope_check_gives_the_scoped_answer(node, indexed, monkeypatch):
    from store import fts

    crowd = [indexed(f"hr{i}.md", f"# HR {i}\n\nwalrus walrus walrus payroll {i}", collection="HR") for i in range(4)]
    ops = [indexed(f"ops{i}.md", f"# Ops {i}\n\nthe walrus tank needs cleaning, item {i} of many more words", collection="OPS")
           for i in range(2)]

    def scoped(collection):
        sql_scope, params = fts._scope(collection, None)
        rows = database.execute_sql(
            f"SELECT f.rowid FROM chunk_fts AS f {sql_scope} AND chunk_fts MATCH ? "
            f"ORDER BY bm25(chunk_fts, {fts._WEIGHTS_SQL}) LIMIT 10",
            [*params, '"walrus"'],
        ).fetchall()
        return [r[0] for r in rows]

    # Only two rows overall are looked at first: both are HR's, so OPS needs the scoped query.
    monkeypatch.setattr(fts, "OVERALL_DEPTH_MIN", 2)
    monkeypatch.setattr(fts, "OVERALL_DEPTH_FACTOR", 1)
    for collection, expected in (("OPS", ops), ("HR", crowd)):
        found = fts.ranked_matches(["walrus"], collection, limit=2)
        assert [c for c, _ in found] == scoped(collection)[:2]
        hits = search(node, "walrus", mode="lexical", collection=collection, limit=2).hits
        assert {h.document_id for h in hits} <= set(expected) and len(hits) == 2
    assert [c for c, _ in fts.ranked_matches(["walrus"], "OPS", limit=10)] == scoped("OPS")
