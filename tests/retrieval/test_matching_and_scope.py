"""What a search says about itself: nothing matched, every collection, one hit
per document, the words that matched highlighted, exact BM25 over left-out words."""

from __future__ import annotations

import json

import pytest

from kbtui.retrieval import lexical
from kbtui.retrieval.fts_query import parse_query
from kbtui.retrieval.matching import EXACT, NONE, RELATED, match_signal
from kbtui.retrieval.search import ALL_COLLECTIONS, SearchRequest
from kbtui.retrieval.snippets import snippet
from store import fts
from store.db import database
from tests.conftest import write

RUNBOOKS = {
    "journal.md": "# Journal\n\nRotate the journal weekly: journalctl --vacuum-time=2weeks keeps it small.",
    "backups.md": "# Backups\n\nThe backups are kept on the NAS under /srv/backup, encrypted with restic.",
    "tls.md": "# TLS\n\nCertificates are renewed by certbot thirty days before they expire.",
}


def highlighted(text: str, query: str, width: int = 200) -> list[str]:
    return [s.text for s in snippet(text, query, width) if s.highlighted]


# ---------------------------------------------------------------- no match


@pytest.fixture
def local_node(make_node):
    try:
        from kbtui.embedding.local import locate_model_files

        locate_model_files()
    except Exception:  # noqa: BLE001 - the packaged model is part of `make setup`
        pytest.skip("the local embedding model is not installed")
    return make_node(embedding_provider="local")


def test_a_nonsense_query_says_nothing_matched_and_shows_no_hits(local_node, tmp_path):
    from tests.retrieval.conftest import add_and_index

    for name, text in RUNBOOKS.items():
        add_and_index(local_node, tmp_path, name, text)
    for nonsense in ("xqzvbl wibblefrotz", "🦄🌈", "Wo kann ich heute Abend gut essen gehen?"):
        response = local_node.search(nonsense, "DEFAULT")
        assert response.match.lexical is False and response.match.semantic is False, nonsense
        assert response.match.verdict == NONE and response.hits == [], nonsense
    # A real question is matched by its words and is close in meaning.
    answered = local_node.search("where are the backups kept", "DEFAULT")
    assert answered.match.verdict == EXACT and answered.match.semantic is True
    assert "backups" in answered.hits[0].text


OPERATIONS = {
    "cooling.md": "# Cooling\n\nThe rack's water cooling loop is checked every day: the pump, the hoses and the "
                  "coolant level. Log the best and worst inlet temperature.",
    "builds.md": "# Builds\n\nThe nightly build job ZX_RETRY_4411 retries a failed step three times before it "
                 "pages the on-call engineer.",
    "oven.md": "# Reflow oven\n\nThe reflow oven for circuit boards is set to 245 degrees at its peak.",
}


def test_an_off_topic_question_sharing_an_ordinary_word_finds_nothing_and_a_lookup_still_finds_its_hit(
    local_node, tmp_path
):
    from tests.retrieval.conftest import add_and_index

    for name, text in OPERATIONS.items():
        add_and_index(local_node, tmp_path, name, text)
    # Each shares a word or two with one passage or another, and means nothing here.
    for off_topic in (
        "how much water should I drink every day",
        "who is the best tennis player of all time",
        "what is the best recipe for banana bread",
    ):
        response = local_node.search(off_topic, "DEFAULT")
        assert response.match.lexical is True and response.match.semantic is False, off_topic
        assert response.match.words_together is False, off_topic
        assert response.match.verdict == NONE and response.hits == [], off_topic
    # A one-word lookup the model places nowhere near (cosine about .25), but its passage holds the word.
    lookup = local_node.search("hoses", "DEFAULT")
    assert lookup.match.semantic is False and lookup.match.words_together is True
    assert lookup.match.verdict == EXACT and "hoses" in lookup.hits[0].text
    identifier = local_node.search("ZX_RETRY_4411", "DEFAULT")
    assert identifier.match.verdict == EXACT and "ZX_RETRY_4411" in identifier.hits[0].text
    # A real question still finds its passage.
    answered = local_node.search("how often is the water cooling checked", "DEFAULT")
    assert answered.match.verdict == EXACT and "cooling" in answered.hits[0].text
    # Through the API shape too (a client rebuilds the signal from JSON).
    from kbtui.api.shapes import match_signal as signal_from_json
    from kbtui.api.shapes import match_signal_json

    again = signal_from_json(match_signal_json(local_node.search("how much water should I drink every day", "DEFAULT").match))
    assert again is not None and again.verdict == NONE


def test_an_exact_match_shows_its_hit_and_hides_the_unrelated_ones_after_it_counted(local_node, tmp_path):
    from kbtui.api.shapes import search_json, search_response
    from tests.retrieval.conftest import add_and_index

    for name, text in {**OPERATIONS, **RUNBOOKS}.items():
        add_and_index(local_node, tmp_path, name, text)
    found = local_node.search("ZX_RETRY_4411", "DEFAULT")
    # The identifier's passage, and none of the five that neither hold it nor mean anything like it.
    assert found.match.verdict == EXACT
    assert [h.text for h in found.hits] == [OPERATIONS["builds.md"].split("\n\n", 1)[1]]
    assert found.hidden == 5
    # An explicit --min-score is the operator's own threshold: everything above it, nothing hidden.
    every = local_node.search("ZX_RETRY_4411", "DEFAULT", min_relevance=0.0)
    assert len(every.hits) == 6 and every.hidden == 0
    assert every.hits[0].text == found.hits[0].text
    # A real question keeps the passages close in meaning.
    question = local_node.search("where are the backups kept and how are they encrypted", "DEFAULT")
    assert "backups" in question.hits[0].text and question.hidden < 6
    # The API says how many it hid.
    assert search_response(search_json(found, explain=False)).hidden == 5


def test_the_cli_says_nothing_matched_and_the_json_carries_the_signal(run_cli, tmp_path):
    write(tmp_path / "a.md", "# Alpha\n\nThe zebracorn budget is confidential.")
    assert run_cli("add", str(tmp_path / "a.md")).code == 0
    payload = json.loads(run_cli("search", "xqzvbl", "--json").out)
    # The hash test embedder has no calibrated floor: no word matched, meaning unknown.
    assert payload["match"]["lexical"] is False and payload["match"]["semantic"] is None
    assert payload["match"]["verdict"] == RELATED
    assert "no exact matches, showing related passages" in run_cli("search", "xqzvbl", "--format", "table").out
    found = json.loads(run_cli("search", "zebracorn", "--json").out)
    assert found["match"]["verdict"] == EXACT and found["hits"][0]["relevance"] == 1.0
    assert found["hidden_below_floor"] == 0  # no floor known for the hash embedder: nothing hidden


def test_the_verdict_reads_both_signals():
    model = "all-MiniLM-L6-v2-int8"
    assert match_signal(lexical_found=True, best_similarity=0.1, model=model).verdict == EXACT
    assert match_signal(lexical_found=False, best_similarity=0.7, model=model).verdict == RELATED
    assert match_signal(lexical_found=False, best_similarity=0.2, model=model).verdict == NONE
    assert match_signal(lexical_found=False, best_similarity=None, model=model).verdict == NONE
    assert match_signal(lexical_found=False, best_similarity=0.2, model="unmeasured").verdict == RELATED
    # Words found and the meaning far: they count only when one passage holds them all.
    assert match_signal(lexical_found=True, best_similarity=0.2, model=model, words_together=False).verdict == NONE
    assert match_signal(lexical_found=True, best_similarity=0.2, model=model, words_together=True).verdict == EXACT
    assert match_signal(lexical_found=True, best_similarity=0.7, model=model, words_together=False).verdict == EXACT
    assert match_signal(lexical_found=True, best_similarity=0.2, model="unmeasured", words_together=False).verdict == EXACT


def test_a_query_whose_real_words_are_nowhere_matches_no_chunk_by_its_stop_words(node, indexed):
    indexed("a.md", "# A\n\nWhat is the plan for the week?")
    response = node.searcher.search(SearchRequest("what is the xqzvbl", "DEFAULT", mode="lexical"))
    assert response.hits == [] and response.match.lexical is False


def test_min_score_drops_hits_below_the_relevance_asked_for(node, indexed):
    indexed("a.md", "# A\n\nThe zebracorn budget is confidential.")
    indexed("b.md", "# B\n\nSoup on Fridays, and the budget for soup.")
    every = node.search("zebracorn budget", "DEFAULT")
    assert [h.relevance for h in every.hits] == sorted((h.relevance for h in every.hits), reverse=True)
    strict = node.search("zebracorn budget", "DEFAULT", min_relevance=0.9)
    assert [h.text for h in strict.hits] == ["The zebracorn budget is confidential."]


# ---------------------------------------------------------------- scope


def test_all_collections_finds_documents_in_each_and_names_their_collection(node, indexed, run_cli):
    ops = indexed("ops.md", "# Ops\n\nThe flangewidget pager rota lives here.", collection="OPS")
    dev = indexed("dev.md", "# Dev\n\nThe flangewidget build pipeline lives here.", collection="DEV")
    other = indexed("other.md", "# Other\n\nNothing relevant.", collection="DEFAULT")
    response = node.search("flangewidget", ALL_COLLECTIONS)
    top = {(h.document_id, h.collection_id) for h in response.hits[:2]}
    assert top == {(ops, "OPS"), (dev, "DEV")}
    assert {(h.document_id, h.collection_id) for h in response.hits[2:]} <= {(other, "DEFAULT")}
    # One collection still means only that one.
    assert {h.document_id for h in node.search("flangewidget", "OPS").hits} == {ops}
    out = run_cli("search", "flangewidget", "--collection", "all", "--format", "table").out
    assert "OPS ·" in out and "DEV ·" in out
    hits = json.loads(run_cli("search", "flangewidget", "-c", "ALL", "--json").out)["hits"]
    assert {h["collection"] for h in hits[:2]} == {"OPS", "DEV"}


def test_all_collections_serves_no_failed_document(node, indexed):
    kept = indexed("kept.md", "# Kept\n\nquuxplorer notes", collection="OPS")
    gone = indexed("gone.md", "# Gone\n\nquuxplorer notes too", collection="DEV")
    database.execute_sql("UPDATE document SET status = 'Failed' WHERE id = ?", [gone])
    for mode in ("hybrid", "lexical", "vector"):
        hits = node.searcher.search(SearchRequest("quuxplorer", ALL_COLLECTIONS, mode=mode)).hits
        assert gone not in {h.document_id for h in hits} and kept in {h.document_id for h in hits}, mode


# ---------------------------------------------------------------- per document


def test_results_are_documents_with_the_rest_of_their_chunks_counted(node, indexed, run_cli):
    sections = "\n\n".join(f"## Part {i}\n\nThe gizmotron calibration step {i} needs care." for i in range(3))
    long_doc = indexed("long.md", "# Gizmotron\n\n" + sections)
    short_doc = indexed("short.md", "# Note\n\nA gizmotron is a device.")
    grouped = node.search("gizmotron calibration", "DEFAULT", per_document=True)
    assert [h.document_id for h in grouped.hits] == [long_doc, short_doc]
    assert grouped.hits[0].more_in_document == 2 and grouped.hits[1].more_in_document == 0
    chunks = node.search("gizmotron calibration", "DEFAULT")
    assert [h.document_id for h in chunks.hits].count(long_doc) == 3
    out = run_cli("search", "gizmotron calibration", "--format", "table").out
    assert "+2 more in this document" in out and "2 documents" in out
    raw = run_cli("search", "gizmotron calibration", "--chunks", "--format", "table").out
    assert "more in this document" not in raw and "4 chunks" in raw
    payload = json.loads(run_cli("search", "gizmotron calibration", "--json").out)
    assert [h["more_in_document"] for h in payload["hits"]] == [2, 0]
    assert {"chunk_id", "text", "heading_path", "score", "similarity", "relevance"} <= set(payload["hits"][0])


# ---------------------------------------------------------------- snippets


def test_snippets_highlight_whole_matched_words_never_parts_or_stop_words():
    text = "Put the logs into the journal, then stop the service to rotate it. Rotation runs daily."
    assert highlighted(text, "how to rotate the journal into stop") == ["journal", "stop", "rotate", "Rotation"]
    # "to" is a stop word: not "into", not "stop", not "to" itself.
    assert highlighted("Go into the stop to wait.", "to") == []
    assert highlighted("Backups are kept on the NAS.", "where are the backups kept") == ["Backups", "kept"]


def test_the_snippet_window_opens_and_closes_on_word_boundaries_around_the_best_match():
    text = "alpha " * 60 + "the journald rotation settings and the journal vacuum time " + "omega " * 60
    segments = snippet(text, "journal vacuum", 60)
    shown = "".join(s.text for s in segments)
    assert [s.text for s in segments if s.highlighted] == ["journal", "vacuum"]
    assert shown.startswith("…") and shown.endswith("…") and len(shown) <= 60
    inner = shown.strip("…")
    words = inner.split()
    assert all(w in {"alpha", "omega", "the", "journald", "rotation", "settings", "and", "journal", "vacuum", "time"}
               for w in words)


# ---------------------------------------------------------------- exact BM25


def test_a_word_left_out_by_the_row_budget_still_counts_exactly(node, indexed, monkeypatch):
    for i in range(12):
        indexed(f"d{i}.md", f"# D{i}\n\nThe widget manual, part {i}." + (" Common widget." * (i % 3)))
    indexed("target.md", "# Target\n\nThe widget manual flux capacitor.")
    fts.forget_row_counts()
    monkeypatch.setattr(lexical, "ROW_BUDGET", 3)  # "widget" and "manual" are now too common to rank
    result = lexical.lexical_candidates(
        node.store.lexical, parse_query("widget manual flux"), "DEFAULT", document_id=None, limit=20
    )
    assert "widget" in result.plan.completed and result.plan.ranked == ("flux",)
    expression = " OR ".join(f'"{w}"' for w in ("widget", "manual", "flux"))
    exact = database.execute_sql(
        f"SELECT rowid, -bm25(chunk_fts, {fts._WEIGHTS_SQL}) FROM chunk_fts WHERE chunk_fts MATCH ? "
        "ORDER BY 2 DESC LIMIT 1", [expression],
    ).fetchall()
    assert result.ranked[0][0] == exact[0][0]
    assert result.ranked[0][1] == pytest.approx(exact[0][1], rel=1e-9)
