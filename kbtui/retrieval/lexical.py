"""The lexical arm: which words to rank with BM25, and the arm itself.

Semantics are OR-of-terms (a chunk with some of the words still ranks). What
makes that expensive is a very common word: bm25() scores every chunk that
holds it, and such a word adds almost nothing to the ranking (its idf is near
zero). The plan, from cheap capped row counts:

1. words found nowhere are dropped, and English and German function words
   ("what", "the", "der") when the query has any other word (measured on
   Cranfield and CISI: nDCG@10 up by .01 to .02); a query whose other words
   are all found nowhere matches nothing ("what is xqzv" is not a match for
   every chunk holding "what"): the search can then say nothing matched;
2. a word in more than ``COMMON_SHARE`` of the chunks is left out when the
   query has a rarer word: bm25 gives it no weight anyway (its idf is
   clamped at zero there), it would only cost time;
3. the remaining words, rarest first, are ranked together while the rows
   they match stay within ``ROW_BUDGET`` (the latency bound); a word said
   several times in the query is ranked with its repeats (BM25 query-term
   frequency) and costs its rows once per repeat;
4. when not even the rarest word fits the budget (a query of only very
   common words on a large index), the newest chunks holding all of them
   (up to four) are returned without ranking, from a bounded window.

Words left out by the budget still count: the best ``COMPLETION_DEPTH``
rows of the FTS5 ranking get each left-out word's BM25 contribution added
(:mod:`kbtui.retrieval.bm25`, FTS5's own formula and statistics), and are
re-sorted. That is exact BM25 over every word that is not a stop word
whenever the tenth completed score is at least what any other row could
reach (the depth-th partial score plus each left-out word's upper bound);
the plan says whether it was (``exact``). Measured on benchmarks/search.py's
corpus at a million chunks, it lifts long queries from .59 to .97 top-10
agreement with exact BM25, and questions from .89 to 1.00, together with the
larger row budget (benchmarks/lexical_engines.py).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from kbtui.ports import LexicalIndex
from kbtui.retrieval.bm25 import CorpusStatistics, completed_scores, idf, upper_bound
from kbtui.retrieval.fts_query import MAX_REPEATS, STOP_WORDS, QueryTerms
from kbtui.retrieval.fusion import reciprocal_rank_fusion
from kbtui.retrieval.results import LexicalPlan

log = logging.getLogger(__name__)

# Rows bm25 may score for one query. Ranked over the whole index first and
# scope-checked after (store.fts), a row costs about 1 us: at a million chunks
# 30,000 rows keep questions and long queries under 40 ms at p95 on this
# 2-core machine with top-10 agreement with exact BM25 of 1.00 and .97
# (10,000: .91 and .78; benchmarks/lexical_engines.py). A small collection in
# a large index falls back to the scoped query, about 4 us a row.
ROW_BUDGET = 30_000
COMMON_SHARE = 0.5
RECENCY_WORDS = 4
RECENCY_WINDOW = 20_000
CJK_SUBSTRING_WINDOW = 20_000
# Rows (best by the partial FTS5 score) that left-out words are added to,
# and how many of the completed top rows must be provably exact.
COMPLETION_DEPTH = 100
EXACT_TOP = 10


@dataclass(frozen=True)
class LexicalResult:
    ranked: list[tuple[int, float]]  # chunk id, score (higher is better)
    plan: LexicalPlan


def plan_words(
    words: Sequence[str],
    row_counts: Mapping[str, int],
    total_chunks: int,
    *,
    budget: int = ROW_BUDGET,
    repeats: Mapping[str, int] | None = None,
) -> LexicalPlan:
    """Decide how to search ``words`` given how many chunks hold each (counts
    capped above ``budget``) and how often each occurs in the query (a
    repeated word is read once per repeat, so it costs that many times its
    rows). Pure: see the module docstring."""
    repeats = repeats or {}
    missing = tuple(w for w in words if row_counts.get(w, 0) == 0)
    present = sorted((w for w in words if row_counts.get(w, 0) > 0), key=lambda w: row_counts[w])
    content_words = [w for w in present if w not in STOP_WORDS]
    if not content_words and any(w not in STOP_WORDS for w in words):
        return LexicalPlan((), (), tuple(present), (), missing)  # its real words are nowhere
    stopped = [w for w in present if w in STOP_WORDS] if content_words else []
    present = content_words or present
    common_limit = max(1.0, COMMON_SHARE * total_chunks)
    rare = [w for w in present if row_counts[w] <= common_limit]
    candidates = rare or present
    ranked: list[str] = []
    spent = 0
    for word in candidates:
        cost = row_counts[word] * max(1, repeats.get(word, 1))
        if spent + cost > budget:
            if not ranked and row_counts[word] <= budget:
                ranked.append(word)  # the rarest word fits once: rank it without its repeats
                spent += row_counts[word]
                repeats = {**repeats, word: 1}
            break
        ranked.append(word)
        spent += cost
    if ranked:
        pruned = tuple(w for w in present if w not in ranked) + tuple(stopped)
        return LexicalPlan(tuple(ranked), tuple(max(1, repeats.get(w, 1)) for w in ranked), pruned, (), missing)
    recency = tuple(present[:RECENCY_WORDS])
    pruned = tuple(present[RECENCY_WORDS:]) + tuple(stopped)
    return LexicalPlan((), (), pruned, recency, missing)


def lexical_candidates(
    fts: LexicalIndex, terms: QueryTerms, collection_id: str, *, document_id: str | None, limit: int
) -> LexicalResult:
    """The lexical arm for ``terms`` in scope, at most ``limit`` chunks, best first."""
    words = list(terms.words)
    total = fts.indexed_chunk_count()
    budget = int(ROW_BUDGET / max(1.0, fts.ROW_COST))  # a store that scores rows slower scores fewer
    counts = fts.term_row_counts(words, budget + 1, generation=total) if words else {}
    plan = plan_words(words, counts, total, budget=budget, repeats=terms.repeats_of())
    lists: list[list[tuple[int, float]]] = []
    if plan.ranked:
        # A store that ranks fewer rows completes more of them (its partial ranking is coarser).
        depth = max(limit, int(COMPLETION_DEPTH * max(1.0, fts.ROW_COST)))
        partial = fts.ranked_matches(
            plan.ranked, collection_id, document_id=document_id, limit=depth, repeats=plan.repeats
        )
        left_out = tuple(w for w in plan.pruned if w not in STOP_WORDS)
        if left_out and partial:
            try:
                ranked, exact = _completed(fts, partial, depth, left_out, terms, total)
                plan = replace(plan, completed=left_out, exact=exact)
            except Exception as exc:  # noqa: BLE001 - the FTS5 ranking stands on its own
                log.warning("lexical completion failed: %s", type(exc).__name__)
                ranked = partial
        else:
            ranked = partial
            plan = replace(plan, exact=not left_out)
        lists.append(ranked[:limit])
    elif plan.recency:
        newest = fts.newest_matches(
            plan.recency, collection_id, document_id=document_id, limit=limit, window=RECENCY_WINDOW
        )
        lists.append([(chunk_id, 0.0) for chunk_id in newest])
    if terms.cjk_runs:
        lists.append(fts.cjk_ranked_matches(terms.cjk_runs, collection_id, document_id=document_id, limit=limit))
        for run in terms.cjk_runs:
            if len(run) < 3:
                found = fts.cjk_substring_matches(
                    run, collection_id, document_id=document_id, limit=limit, window=CJK_SUBSTRING_WINDOW
                )
                lists.append([(chunk_id, 0.0) for chunk_id in found])
    lists = [found for found in lists if found]
    if len(lists) <= 1:
        return LexicalResult(lists[0] if lists else [], plan)
    # Words and CJK runs matched through different tables: merge by rank.
    merged = reciprocal_rank_fusion([[c for c, _ in found] for found in lists])[:limit]
    return LexicalResult(merged, plan)


def _completed(
    fts: LexicalIndex, partial: list[tuple[int, float]], depth: int, left_out: tuple[str, ...], terms: QueryTerms, generation: int
) -> tuple[list[tuple[int, float]], bool]:
    """``partial`` (the best rows by BM25 over the ranked words) with the
    ``left_out`` words' contributions added, best first, and whether its top
    ``EXACT_TOP`` are provably the exact BM25 top over all those words."""
    rows, average = fts.bm25_statistics()
    stats = CorpusStatistics(rows, average)
    holding = fts.term_row_counts(list(left_out), rows + 1, generation=generation)
    repeats = terms.repeats_of()
    words = {w: (idf(rows, holding.get(w, 0)), min(max(1, repeats.get(w, 1)), MAX_REPEATS)) for w in left_out}
    ids = [row_id for row_id, _ in partial]
    completed = completed_scores(
        partial, fts.column_texts(ids), fts.row_token_counts(ids), words, fts.COLUMN_WEIGHTS, stats
    )
    # A row not among ``partial`` holds the ranked words at most as well as
    # partial's last row (when partial was cut at ``depth``), or none of them.
    reach = sum(upper_bound(word_idf, n) for word_idf, n in words.values())
    if len(partial) >= depth:
        reach += partial[-1][1]
    exact = len(completed) >= EXACT_TOP and completed[EXACT_TOP - 1][1] >= reach
    return completed, exact
