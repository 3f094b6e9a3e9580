"""Pure retrieval logic: query parsing, the lexical plan, fusion, the rerank policy, metrics."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from kbtui.retrieval.eval import ndcg_at_k, precision_at_k, recall_at_k, reciprocal_rank
from kbtui.retrieval.fts_query import MAX_QUERY_CHARS, MAX_REPEATS, MAX_TERMS, STOP_WORDS, parse_query
from kbtui.retrieval.fusion import (
    ALPHA_RANGE,
    CONVEX_ALPHA,
    SIMILARITY_MIDPOINTS,
    ArmResult,
    convex_fusion,
    distribution_normalised_scores,
    fuse,
    normalised_scores,
    reciprocal_rank_fusion,
    score_aware_fusion,
    vector_weight,
)
from kbtui.retrieval.lexical import ROW_BUDGET, plan_words
from kbtui.retrieval.rerank import parse_rerank_response, rerank_skip_reason
from store.fts_match import weighted_any_of


def test_fts_syntax_in_a_query_is_cut_into_plain_words():
    for hostile in ('"x', "(a OR", "a AND", "NEAR(a b", "*a", "-a", "col:foo", "a NOT b"):
        terms = parse_query(hostile)
        assert all('"' not in w and "(" not in w and "*" not in w and ":" not in w for w in terms.words)
    assert parse_query("NEAR(a b").words == ("near", "a", "b")
    assert parse_query("col:foo").words == ("col", "foo")


def test_cjk_runs_are_kept_apart_from_words_and_emoji_are_not_terms():
    terms = parse_query("Tokyo 東京 ramen 🍜 ソウル")
    assert terms.words == ("tokyo", "ramen")
    assert terms.cjk_runs == ("東京", "ソウル")
    assert parse_query("🍜🎉").empty


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_any_text_parses_into_at_most_max_terms_quote_free_terms(text):
    terms = parse_query(text)
    content = [w for w in terms.words if w not in STOP_WORDS]
    assert len(content) + len(terms.cjk_runs) <= MAX_TERMS
    assert len(terms.words) - len(content) <= MAX_TERMS
    assert not any('"' in t for t in terms.words + terms.cjk_runs)
    assert len(terms.repeats) == len(terms.words) and all(1 <= r <= MAX_REPEATS for r in terms.repeats)


def test_a_word_said_several_times_counts_that_often_up_to_the_cap():
    terms = parse_query("Titles, titles and TITLES: what makes titles useful? titles again")
    assert terms.repeats_of()["titles"] == MAX_REPEATS
    assert terms.repeats_of()["useful"] == 1
    assert weighted_any_of(["titles", "useful"], terms.repeats_of()) == " OR ".join(['"titles"'] * MAX_REPEATS + ['"useful"'])


def test_stop_words_do_not_use_up_the_content_term_cap():
    words = [f"term{i}" for i in range(MAX_TERMS)]
    query = " ".join(f"the {w} of what" for w in words)
    assert [w for w in parse_query(query).words if w not in STOP_WORDS] == words


def test_only_the_first_max_query_chars_are_looked_at():
    query = "a " * (MAX_QUERY_CHARS // 2) + "needle"
    assert "needle" not in parse_query(query).words


def test_plan_drops_stop_words_and_missing_words_but_keeps_a_stop_word_only_query():
    plan = plan_words(["what", "is", "bearing", "zzz"], {"what": 50, "is": 60, "bearing": 5, "zzz": 0}, 1000)
    assert plan.ranked == ("bearing",)
    assert plan.missing == ("zzz",)
    assert set(plan.pruned) == {"what", "is"}
    only_stop = plan_words(["the", "who"], {"the": 10, "who": 3}, 1000)
    assert only_stop.ranked == ("who", "the")


def test_plan_leaves_out_words_in_most_chunks_when_a_rarer_word_exists():
    plan = plan_words(["gear", "pump"], {"gear": 900, "pump": 40}, 1000)
    assert plan.ranked == ("pump",) and plan.pruned == ("gear",)


def test_plan_ranks_rarest_words_within_the_row_budget():
    counts = {"a1": 4000, "b2": 5000, "c3": 3000}
    plan = plan_words(list(counts), counts, 10_000_000, budget=10_000)
    assert plan.ranked == ("c3", "a1")  # 3000 + 4000 fit; + 5000 would not
    assert plan.pruned == ("b2",)


def test_plan_counts_a_repeated_word_once_per_repeat_against_the_budget():
    counts = {"a1": 4500, "c3": 3000}
    plan = plan_words(list(counts), counts, 10_000_000, budget=10_000, repeats={"c3": 2, "a1": 1})
    assert plan.ranked == ("c3",) and plan.repeats == (2,)  # 6000 + 4500 would pass the budget
    alone = plan_words(["c3"], {"c3": 6000}, 10_000_000, budget=10_000, repeats={"c3": 3})
    assert alone.ranked == ("c3",) and alone.repeats == (1,)  # fits once: ranked without its repeats


def test_plan_falls_back_to_newest_matches_when_every_word_is_over_budget():
    counts = {w: ROW_BUDGET + 1 for w in ("alpha", "beta", "gamma", "delta", "omega")}
    plan = plan_words(list(counts), counts, 10_000_000)
    assert plan.ranked == () and len(plan.recency) == 4 and len(plan.pruned) == 1


def test_rrf_rewards_agreement_and_is_stable():
    fused = reciprocal_rank_fusion([["a", "b"], ["b", "c"]])
    assert [i for i, _ in fused] == ["b", "a", "c"]
    assert math.isclose(dict(fused)["b"], 1 / 62 + 1 / 61)


def test_normalisation_carries_no_signal_for_single_constant_or_non_finite_scores():
    assert normalised_scores([]) is None
    assert normalised_scores([3.0]) is None
    assert normalised_scores([2.0, 2.0, 2.0]) is None
    assert normalised_scores([1.0, float("nan")]) is None
    assert normalised_scores([1.0, float("inf")]) is None
    assert normalised_scores([3.0, 1.0, 2.0]) == [1.0, 0.0, 0.5]


def test_score_aware_falls_back_to_rrf_order_for_arms_without_signal():
    lexical = ArmResult("lexical", [("a", 5.0), ("b", 5.0)])
    vector = ArmResult("vector", [("c", 0.9)])
    rrf = reciprocal_rank_fusion([["a", "b"], ["c"]])
    assert [i for i, _ in score_aware_fusion([lexical, vector])] == [i for i, _ in rrf]


def test_a_lone_lexical_match_is_not_buried_by_the_other_arms_tilt():
    # A rare keyword only the lexical arm finds, against a vector arm with a spread of scores.
    lexical = ArmResult("lexical", [("keyword-chunk", 7.5)])
    vector = ArmResult("vector", [(f"v{i}", 0.30 - i * 0.001) for i in range(40)])
    fused = [i for i, _ in score_aware_fusion([lexical, vector])]
    assert fused.index("keyword-chunk") <= 1


def test_score_aware_prefers_a_rank_far_above_its_arms_floor():
    # Both arms rank x and y first; x's lexical score is far above the floor, y's is marginal.
    lexical = ArmResult("lexical", [("x", 10.0), ("q", 1.1), ("r", 1.0)])
    vector = ArmResult("vector", [("y", 0.50), ("s", 0.49), ("t", 0.10)])
    fused = [i for i, _ in score_aware_fusion([lexical, vector])]
    assert fused[0] == "x"


def test_score_aware_still_lets_agreement_beat_one_arms_top():
    lexical = ArmResult("lexical", [("pg", 3.0)])
    vector = ArmResult("vector", [("ssh", 0.02), ("pg", 0.01)])
    assert score_aware_fusion([lexical, vector])[0][0] == "pg"


def test_distribution_normalisation_maps_three_deviations_and_needs_spread():
    assert distribution_normalised_scores([1.0]) is None
    assert distribution_normalised_scores([2.0, 2.0]) is None
    assert distribution_normalised_scores([1.0, float("nan")]) is None
    even = distribution_normalised_scores([float(x) for x in range(10, 0, -1)])
    assert 0.7 < even[0] < 0.8 and 0.2 < even[-1] < 0.3  # an even spread: no candidate stands out
    outlier = distribution_normalised_scores([100.0] + [1.0 + 0.01 * i for i in range(39)])
    assert outlier[0] == 1.5 and all(0.4 < x < 0.5 for x in outlier[1:])  # far out: up to the ceiling


def test_a_short_exhaustive_list_is_normalised_against_the_zeros_it_left_out():
    assert distribution_normalised_scores([7.0]) is None
    alone = distribution_normalised_scores([7.0], unlisted_zeros=39)
    assert alone == [1.5]
    pair = distribution_normalised_scores([7.0, 6.5], unlisted_zeros=38)
    assert pair[0] > 1.0 and pair[1] > 1.0


def test_convex_fusion_keeps_a_one_chunk_exact_match_above_the_vector_arms_top():
    # An identifier found in one chunk only; the vector arm knows nothing about it.
    lexical = ArmResult("lexical", [("exact", 7.3)], unlisted_zeros=39)
    vector = ArmResult("vector", [(f"v{i}", 0.50 - 0.005 * i) for i in range(40)])
    assert convex_fusion(vector, lexical)[0][0] == "exact"
    # Without knowing the list is exhaustive there is no signal: plain RRF, where ranks tie.
    plain = convex_fusion(vector, ArmResult("lexical", [("exact", 7.3)]))
    assert plain == reciprocal_rank_fusion([[i for i, _ in vector.ranked], ["exact"]])


def test_convex_fusion_puts_agreement_above_either_arms_lone_top():
    vector = ArmResult("vector", [("v", 0.62), ("both", 0.60)] + [(f"v{i}", 0.40 - 0.005 * i) for i in range(20)])
    lexical = ArmResult("lexical", [("l", 9.0), ("both", 8.8)] + [(f"l{i}", 4.0 - 0.05 * i) for i in range(20)])
    assert convex_fusion(vector, lexical)[0][0] == "both"


def test_the_vector_weight_follows_how_closely_the_model_matched_the_query():
    model = "all-MiniLM-L6-v2-int8"
    midpoint = SIMILARITY_MIDPOINTS[model]
    assert math.isclose(vector_weight(midpoint, model), 0.5)
    assert vector_weight(midpoint + 0.2, model) > 0.5 > vector_weight(midpoint - 0.2, model)
    assert vector_weight(0.99, model) == ALPHA_RANGE[1] and vector_weight(-0.5, model) == ALPHA_RANGE[0]
    # A model nobody measured, or no vector hit: the fixed weight.
    assert vector_weight(0.9, "some-other-model") == CONVEX_ALPHA
    assert vector_weight(None, model) == CONVEX_ALPHA and vector_weight(float("nan"), model) == CONVEX_ALPHA


def test_convex_fusion_leans_on_the_arm_the_weight_favours():
    # The arms disagree on the order of the same candidates.
    vector = ArmResult("vector", [(f"c{i}", 0.70 - 0.01 * i) for i in range(30)])
    lexical = ArmResult("lexical", [(f"c{29 - i}", 12.0 - 0.3 * i) for i in range(30)])
    model = "all-MiniLM-L6-v2-int8"
    close = fuse("convex", lexical, vector, alpha=vector_weight(0.80, model))
    clueless = fuse("convex", lexical, vector, alpha=vector_weight(0.20, model))
    assert close[0][0] == "c0" and clueless[0][0] == "c29"


def test_convex_fusion_blends_normalised_scores_and_falls_back_to_rrf():
    vector = ArmResult("vector", [("a", 0.9), ("b", 0.1)])
    lexical = ArmResult("lexical", [("b", 9.0), ("a", 8.9)])
    assert convex_fusion(vector, lexical, alpha=0.8)[0][0] == "a"
    assert convex_fusion(vector, lexical, alpha=0.2)[0][0] == "b"
    single = ArmResult("lexical", [("z", 1.0)])
    assert convex_fusion(vector, single) == reciprocal_rank_fusion([["a", "b"], ["z"]])


def test_adaptive_rerank_policy():
    common = dict(candidates=10, lexical_top=1, vector_top=2, elapsed_s=0.1, budget_s=0.5)
    assert rerank_skip_reason(**common) is None
    assert rerank_skip_reason(**{**common, "vector_top": 1}) == "skipped_agree"
    assert rerank_skip_reason(**{**common, "candidates": 2}) == "skipped_small_pool"
    assert rerank_skip_reason(**{**common, "elapsed_s": 0.4}) == "skipped_budget"
    # Without the adaptive gate every ambiguous or agreeing pool is reranked.
    assert rerank_skip_reason(**{**common, "vector_top": 1, "elapsed_s": 0.45, "adaptive": False}) is None
    assert rerank_skip_reason(**{**common, "candidates": 1, "adaptive": False}) == "skipped_small_pool"


def test_rerank_responses_must_score_every_document_once():
    ok = parse_rerank_response(b'{"results": [{"index": 1, "relevance_score": 2.5}, {"index": 0, "relevance_score": -1}]}', 2)
    assert ok.scores == (-1.0, 2.5)
    for bad in (b"{}", b"not json", b'{"results": [{"index": 0, "relevance_score": 1}]}',
                b'{"results": [{"index": 0, "relevance_score": 1}, {"index": 0, "relevance_score": 2}]}',
                b'{"results": [{"index": 5, "relevance_score": 1}, {"index": 0, "relevance_score": 2}]}',
                b'{"results": [{"index": 0, "relevance_score": "NaN"}, {"index": 1, "relevance_score": 2}]}'):
        assert parse_rerank_response(bad, 2).code == "malformed"


def test_metrics_on_a_known_ranking():
    ranked = ["d3", "d1", "d9", "d2"]
    relevant = {"d1", "d2"}
    assert reciprocal_rank(ranked, relevant) == 0.5
    assert recall_at_k(ranked, relevant, 2) == 0.5 and recall_at_k(ranked, relevant, 4) == 1.0
    assert precision_at_k(ranked, relevant, 2) == 0.5
    expected = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    assert math.isclose(ndcg_at_k(ranked, {"d1": 1, "d2": 1}, 10), expected)
    assert ndcg_at_k([], {"d1": 1}) == 0.0
