"""Did anything match? The no-match signal of a search and a hit's relevance.

Fusion scores rank the candidates of one query; they say nothing about
whether the best of them answers it (a nonsense word still gets ten hits
whose fused scores look like a real match's). Two absolute signals do:

* lexical: some query word (not a stop word, unless the query has only
  those) is in a chunk in scope: the lexical arm found something;
* semantic: the best cosine similarity between the query and a chunk in
  scope clears a floor calibrated per embedding model. A model without a
  measured floor gives no semantic verdict (None).

The verdict: ``exact`` (words matched), ``related`` (no word matched, but a
passage is close in meaning; or no floor is known for the model), ``none``
(neither). Words match only as a whole when the meaning is far: below the
floor, a query whose words are spread over the base (an off-topic question
sharing "water" or "best" with a passage here and one there) is ``none``
unless some passage holds every one of its content words (a lookup of an
identifier the model cannot place, or of a phrase, stays ``exact``).

A hit's ``relevance`` puts both on one 0..1 scale comparable across
queries: the larger of its cosine similarity to the query and the share of
the query's words (stems) it holds. ``--min-score`` filters on it.
"""

from __future__ import annotations

import math

from kbtui.retrieval.results import EXACT, NONE, RELATED, MatchSignal
from kbtui.retrieval.snippets import QueryHighlighter

__all__ = ["EXACT", "NONE", "RELATED", "MatchSignal", "match_signal", "relevance", "similarity_floor", "word_coverage"]

# Top cosine below which no passage is close in meaning, per embedding model.
# Calibrated with benchmarks/retrieval_study.py: the highest floor at which at
# most 1 % of the real queries of Cranfield, CISI and debfaq (418) have no
# chunk that close (their lowest tops: .29, .41 at 1 %, .46 at 2 %); 65 of 66
# queries that mean nothing there (made-up words, emoji, German, French and
# Spanish sentences, cake recipes: top cosine .09 to .50, .32 at the 95th
# percentile) fall below it. Questions whose answer was removed do not: their
# top cosine (median .57 to .68) is that of answerable ones, so on their own
# topic the floor cannot tell them apart (kbtui eval's NO-ANSWER column).
SIMILARITY_FLOORS: dict[str, float] = {"all-MiniLM-L6-v2-int8": 0.40}


def similarity_floor(model: str | None) -> float | None:
    """The calibrated floor of ``model``, or None when it was never measured."""
    return SIMILARITY_FLOORS.get(model or "")


def match_signal(
    *, lexical_found: bool, best_similarity: float | None, model: str | None, words_together: bool | None = None
) -> MatchSignal:
    """The signal for a search whose lexical arm found something or not, whose
    best vector candidate has cosine ``best_similarity`` (None: no vector arm),
    and where some passage holds every content word of the query or not
    (``words_together``; None: not judged)."""
    floor = similarity_floor(model)
    usable = best_similarity if best_similarity is not None and math.isfinite(best_similarity) else None
    semantic = None if floor is None or usable is None else usable >= floor
    return MatchSignal(lexical_found, semantic, usable, floor, words_together)


def word_coverage(text: str, highlighter: QueryHighlighter) -> float:
    """Share of the query's content words (by stem) that ``text`` holds, 0..1."""
    if not highlighter.stems and not highlighter.cjk_runs:
        return 0.0
    wanted = set(highlighter.stems) | set(highlighter.cjk_runs)
    found = {key for _, _, key in highlighter.matches(text)}
    return len(found & wanted) / len(wanted)


def relevance(similarity: float | None, coverage: float) -> float:
    """A hit's relevance: the larger of its similarity (clipped to 0..1) and its word coverage."""
    semantic = min(1.0, max(0.0, similarity)) if similarity is not None and math.isfinite(similarity) else 0.0
    return round(max(semantic, coverage), 4)
