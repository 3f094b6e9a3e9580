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
* ``convex``: a convex combination of min-max normalised scores
  (``alpha`` for the vector arm); an id missing from an arm counts as that
  arm's floor. Falls back to RRF when either arm has no usable scores.

Ties break by first appearance (the arms' order), so results are stable.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

RRF_K = 60
SCORE_AWARE_WEIGHT = 0.5
CONVEX_ALPHA = 0.5

FUSION_STRATEGIES = ("rrf", "score_aware", "convex")
DEFAULT_FUSION = "score_aware"


@dataclass(frozen=True)
class ArmResult:
    """One arm's ranking: ``(id, score)`` best first, higher score is better."""

    name: str
    ranked: Sequence[tuple[Hashable, float]]


def reciprocal_rank_fusion(
    ranked_lists: Sequence[Sequence[Hashable]], k: int = RRF_K
) -> list[tuple[Hashable, float]]:
    """Fuse ranked id lists: score(id) = sum over lists of 1 / (k + rank).

    Ranks are 1-based. Ties break by first appearance so the order is stable.
    """
    scores: dict[Hashable, float] = {}
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
    arms: Sequence[ArmResult], k: int = RRF_K, weight: float = SCORE_AWARE_WEIGHT
) -> list[tuple[Hashable, float]]:
    """RRF tilted by each arm's normalised score (see the module docstring)."""
    scores: dict[Hashable, float] = {}
    for arm in arms:
        raw = [s for _, s in arm.ranked]
        normalised = normalised_scores(raw)
        if normalised is None:
            # No spread to read: every entry is at the arm's top (or the scores are broken).
            flat = 1.0 + weight if all(math.isfinite(s) for s in raw) else 1.0
            normalised_tilts = [flat] * len(raw)
        else:
            normalised_tilts = [1.0 + weight * n for n in normalised]
        for rank, ((item, _), tilt) in enumerate(zip(arm.ranked, normalised_tilts), start=1):
            scores[item] = scores.get(item, 0.0) + tilt / (k + rank)
    return _sorted(scores)


def convex_fusion(
    vector: ArmResult, lexical: ArmResult, alpha: float = CONVEX_ALPHA, k: int = RRF_K
) -> list[tuple[Hashable, float]]:
    """``alpha * vector + (1 - alpha) * lexical`` over min-max normalised scores."""
    vector_norm = normalised_scores([s for _, s in vector.ranked])
    lexical_norm = normalised_scores([s for _, s in lexical.ranked])
    if vector_norm is None or lexical_norm is None:
        return reciprocal_rank_fusion([[i for i, _ in vector.ranked], [i for i, _ in lexical.ranked]], k)
    scores: dict[Hashable, float] = {}
    for (item, _), value in zip(vector.ranked, vector_norm):
        scores[item] = scores.get(item, 0.0) + alpha * value
    for (item, _), value in zip(lexical.ranked, lexical_norm):
        scores[item] = scores.get(item, 0.0) + (1.0 - alpha) * value
    return _sorted(scores)


def fuse(strategy: str, lexical: ArmResult, vector: ArmResult) -> list[tuple[Hashable, float]]:
    """Fuse the two arms with the named strategy (one of ``FUSION_STRATEGIES``)."""
    if strategy == "rrf":
        return reciprocal_rank_fusion([[i for i, _ in lexical.ranked], [i for i, _ in vector.ranked]], RRF_K)
    if strategy == "score_aware":
        return score_aware_fusion([lexical, vector], RRF_K, SCORE_AWARE_WEIGHT)
    if strategy == "convex":
        return convex_fusion(vector, lexical, CONVEX_ALPHA, RRF_K)
    raise ValueError(f"unknown fusion strategy {strategy!r}")


def _sorted(scores: dict[Hashable, float]) -> list[tuple[Hashable, float]]:
    order = {item: i for i, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda pair: (-pair[1], order[pair[0]]))
