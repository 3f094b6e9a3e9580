"""Rank fusion of the retrieval arms: pure functions over ranked id lists.

Each arm gives ``(chunk id, score)`` pairs best first, with scores oriented so
higher is better (the lexical arm negates FTS5 bm25). The fused set is the
union of every id either arm returned.

* ``rrf``: Reciprocal Rank Fusion, score(id) = sum of 1 / (k + rank). Uses
  rank only: the comparison baseline and the fallback.
* ``score_aware``: RRF whose every contribution is tilted by the arm's own
  min-max normalised score, ``1/(k + rank) * (1 + weight * norm)``, so a rank
  whose score sits far above its arm's floor outranks an equally ranked but
  marginal one. An arm whose scores are single or constant carries no such
  signal and contributes rank-only RRF, scaled as though each entry sat at
  its arm's top (it does: there is no spread). The reference design scales
  it by 1 instead, which lets the other arm's tilted ranks bury it: a rare
  keyword found by the lexical arm alone lost to every vector-only hit. An
  arm with non-finite scores contributes plain, untilted RRF.
* ``convex`` (the default): ``alpha * vector + (1 - alpha) * lexical`` over
  each arm's scores normalised by their own distribution over the candidate
  pool: mean - 3 sd maps to 0 and mean + 3 sd to 1, and a candidate further
  above its pool counts up to ``DISTRIBUTION_CEILING`` (min-max would give
  every arm's top exactly 1, however unremarkable it is). An id missing from
  an arm gets 0 from it. A lexical list shorter than the pool it was asked
  for is exhaustive (nothing else holds any query word), so it is normalised
  as if the rest of the pool had scored 0: a word found in one chunk makes
  that chunk stand far out, as an exact identifier should. An arm with no
  usable scores (empty, single, constant, not finite) falls back to RRF.

  The vector arm's weight ``alpha`` follows the query: for an embedding
  model with a measured similarity midpoint it is ``0.5 + (top cosine -
  midpoint) + 0.02 * (15 - words)``, clipped to [0.2, 0.9], where
  ``words`` counts the query's words that are not stop words (a one-word
  query, a lookup, leaves that term out). A query the model matches closely
  (a question whose answer it recognises) leans on the dense arm, a query
  it cannot place (an identifier, a word it never saw: the top cosine is
  low) leans on the lexical arm; and every word the query says is more
  evidence for BM25, so a short question ("how do I rotate the journal":
  two words BM25 can use) leans on meaning while a paragraph of keywords
  leans on the words. A model without a measured midpoint gets
  ``CONVEX_ALPHA``.

Why (measured with ``kbtui eval`` and ``benchmarks/retrieval_study.py``, see
the README): every fixed weighting fails one regime. Rank fusion (``rrf``,
``score_aware``) falls well below the dense arm when the lexical arm is
much weaker (FAQ questions), a vector-leaning fixed alpha loses most
exact-identifier lookups, where the dense arm is clueless, and a balanced
one loses on short questions. The top cosine tells lookups from questions
(about .7 for real questions, .15 to .4 for identifier lookups with
all-MiniLM-L6-v2); the query's length tells short questions (debfaq: 5
words at the median; the vector arm alone beats BM25 by .18) from long
keyword queries (Cranfield 10, CISI 20: the arms are within .03 and fusion
gains most from both).

Ties break by first appearance (the arms' order), so results are stable.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

RRF_K = 60
SCORE_AWARE_WEIGHT = 0.5
CONVEX_ALPHA = 0.5  # the vector arm's weight when the model has no measured midpoint
ALPHA_RANGE = (0.2, 0.9)
# Per query word (not a stop word) below LENGTH_PIVOT, the vector arm's weight
# rises by LENGTH_SLOPE (and falls above it). Chosen on Cranfield, CISI and
# debfaq together (benchmarks/retrieval_study.py); a slope of .015 or a pivot
# of 12 moved no set by more than .01.
LENGTH_SLOPE = 0.02
LENGTH_PIVOT = 15
DISTRIBUTION_SPREAD = 3.0
DISTRIBUTION_CEILING = 1.5
# Top cosine at which both arms weigh the same, per embedding model. Measured
# for all-MiniLM-L6-v2 on Cranfield, CISI and known-item queries: the value
# with the smallest worst-case loss against the better arm across regimes.
SIMILARITY_MIDPOINTS = {"all-MiniLM-L6-v2-int8": 0.55}

FUSION_STRATEGIES = ("rrf", "score_aware", "convex")
DEFAULT_FUSION = "convex"


# The ids fused: chunk ids in search, anything hashable in tests and benchmarks.
Id = TypeVar("Id", bound=Hashable)


@dataclass(frozen=True)
class ArmResult(Generic[Id]):
    """One arm's ranking: ``(id, score)`` best first, higher score is better.

    ``unlisted_zeros``: how many more candidates are known to score 0 (the
    lexical arm returned fewer than the pool it was asked for: every other
    chunk holds none of the words). Used by ``convex`` normalisation only.
    """

    name: str
    ranked: Sequence[tuple[Id, float]]
    unlisted_zeros: int = 0


def reciprocal_rank_fusion(
    ranked_lists: Sequence[Sequence[Id]], k: int = RRF_K
) -> list[tuple[Id, float]]:
    """Fuse ranked id lists: score(id) = sum over lists of 1 / (k + rank).

    Ranks are 1-based. Ties break by first appearance so the order is stable.
    """
    scores: dict[Id, float] = {}
    for ranked in ranked_lists:
        for rank, item in enumerate(ranked, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return _sorted(scores)


def normalised_scores(scores: Sequence[float]) -> list[float] | None:
    """Min-max normalisation to [0, 1]; None when it would carry no signal
    (fewer than two scores, all equal, or any not finite)."""
    if len(scores) < 2 or not all(math.isfinite(s) for s in scores):
        return None
    low, high = min(scores), max(scores)
    if high - low <= 1e-12 * max(1.0, abs(high)):
        return None
    return [(s - low) / (high - low) for s in scores]


def score_aware_fusion(
    arms: Sequence[ArmResult[Id]], k: int = RRF_K, weight: float = SCORE_AWARE_WEIGHT
) -> list[tuple[Id, float]]:
    """RRF tilted by each arm's normalised score (see the module docstring)."""
    scores: dict[Id, float] = {}
    for arm in arms:
        raw = [s for _, s in arm.ranked]
        normalised = normalised_scores(raw)
        if normalised is None:
            # No spread to read: every entry is at the arm's top (or the scores are broken).
            flat = 1.0 + weight if all(math.isfinite(s) for s in raw) else 1.0
            normalised_tilts = [flat] * len(raw)
        else:
            normalised_tilts = [1.0 + weight * n for n in normalised]
        for rank, ((item, _), tilt) in enumerate(zip(arm.ranked, normalised_tilts, strict=True), start=1):
            scores[item] = scores.get(item, 0.0) + tilt / (k + rank)
    return _sorted(scores)


def distribution_normalised_scores(
    scores: Sequence[float],
    *,
    unlisted_zeros: int = 0,
    spread: float = DISTRIBUTION_SPREAD,
    ceiling: float = DISTRIBUTION_CEILING,
) -> list[float] | None:
    """Scores mapped so that mean - spread*sd is 0 and mean + spread*sd is 1,
    floored at 0 and capped at ``ceiling``; mean and sd also count
    ``unlisted_zeros`` scores of 0. None when that carries no signal (fewer
    than two scores in all, no spread, or any not finite)."""
    count = len(scores) + max(0, unlisted_zeros)
    if count < 2 or not scores or not all(math.isfinite(s) for s in scores):
        return None
    mean = sum(scores) / count
    variance = (sum((s - mean) ** 2 for s in scores) + max(0, unlisted_zeros) * mean * mean) / count
    sd = math.sqrt(variance)
    if sd <= 1e-12 * max(1.0, abs(mean)):
        return None
    low = mean - spread * sd
    return [min(ceiling, max(0.0, (s - low) / (2 * spread * sd))) for s in scores]


def convex_fusion(
    vector: ArmResult[Id], lexical: ArmResult[Id], alpha: float = CONVEX_ALPHA, k: int = RRF_K
) -> list[tuple[Id, float]]:
    """``alpha * vector + (1 - alpha) * lexical`` over distribution-normalised scores."""
    vector_norm = distribution_normalised_scores([s for _, s in vector.ranked], unlisted_zeros=vector.unlisted_zeros)
    lexical_norm = distribution_normalised_scores([s for _, s in lexical.ranked], unlisted_zeros=lexical.unlisted_zeros)
    if vector_norm is None or lexical_norm is None:
        return reciprocal_rank_fusion([[i for i, _ in vector.ranked], [i for i, _ in lexical.ranked]], k)
    scores: dict[Id, float] = {}
    for (item, _), value in zip(vector.ranked, vector_norm, strict=True):
        scores[item] = scores.get(item, 0.0) + alpha * value
    for (item, _), value in zip(lexical.ranked, lexical_norm, strict=True):
        scores[item] = scores.get(item, 0.0) + (1.0 - alpha) * value
    return _sorted(scores)


def vector_weight(top_similarity: float | None, model: str | None, words: int | None = None) -> float:
    """The vector arm's ``alpha`` in ``convex`` for a query of ``words`` words
    (not stop words; None: leave length out) whose best vector hit has
    cosine ``top_similarity`` under embedding ``model``."""
    midpoint = SIMILARITY_MIDPOINTS.get(model or "")
    if midpoint is None or top_similarity is None or not math.isfinite(top_similarity):
        return CONVEX_ALPHA
    length = LENGTH_SLOPE * (LENGTH_PIVOT - words) if words is not None and words >= 2 else 0.0
    low, high = ALPHA_RANGE
    return min(high, max(low, 0.5 + top_similarity - midpoint + length))


def fuse(
    strategy: str, lexical: ArmResult[Id], vector: ArmResult[Id], *, alpha: float = CONVEX_ALPHA
) -> list[tuple[Id, float]]:
    """Fuse the two arms with the named strategy (one of ``FUSION_STRATEGIES``);
    ``alpha`` is the vector arm's weight in ``convex`` (see :func:`vector_weight`)."""
    if strategy == "rrf":
        return reciprocal_rank_fusion([[i for i, _ in lexical.ranked], [i for i, _ in vector.ranked]], RRF_K)
    if strategy == "score_aware":
        return score_aware_fusion([lexical, vector], RRF_K, SCORE_AWARE_WEIGHT)
    if strategy == "convex":
        return convex_fusion(vector, lexical, alpha, RRF_K)
    raise ValueError(f"unknown fusion strategy {strategy!r}")


def _sorted(scores: dict[Id, float]) -> list[tuple[Id, float]]:
    order = {item: i for i, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda pair: (-pair[1], order[pair[0]]))
