"""The vector arm scores a chunk together with the opening of its section.

A section longer than one chunk is cut into windows; a window from its
middle ("...software packages (in the non-free and contrib sections), which
are...") is embedded without the sentences that say what the section is
about, so it drifts: it matches questions its section does not answer, and
a document ranked by its best chunk is promoted by such a window. Measured on
debfaq (FAQ answers among git manual pages), ranking documents by their best
chunk scored nDCG@10 .720 while one vector per whole passage (its first 256
word pieces) scored .754.

So a chunk that continues a section is scored ``(1 - w) * its own cosine +
w * the cosine of the section's first chunk``; a chunk that opens its section
keeps its own. This is a query-time blend of stored vectors: nothing is
re-embedded and embedding reuse is untouched (a chunk's vector still depends
only on its own contextual text).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# The opening's share of a continuation chunk's score (benchmarks/retrieval_study.py):
# debfaq .720 (w = 0) -> .740 (.3), .750 (.5), .754 (.7), .760 (only first chunks).
SECTION_OPENING_WEIGHT = 0.5


def with_section_openings(
    candidates: Sequence[tuple[int, float]],
    openers: Mapping[int, int],
    opener_similarity: Mapping[int, float],
    weight: float = SECTION_OPENING_WEIGHT,
) -> list[tuple[int, float]]:
    """``candidates`` (chunk id, cosine) rescored with their section openings
    and re-sorted, best first (ties keep the given order). A chunk whose
    opening is unknown keeps its own cosine."""
    rescored = []
    for position, (chunk_id, similarity) in enumerate(candidates):
        opener = openers.get(chunk_id, chunk_id)
        opening = opener_similarity.get(opener) if opener != chunk_id else None
        score = similarity if opening is None else (1.0 - weight) * similarity + weight * opening
        rescored.append((score, position, chunk_id))
    rescored.sort(key=lambda item: (-item[0], item[1]))
    return [(chunk_id, score) for score, _, chunk_id in rescored]
