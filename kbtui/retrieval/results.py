"""What a search returns: hits with provenance, the lexical plan, how it ran.

Plain frozen values with no dependencies, so a face that only shows results
(``kbtui search`` through a running node) need not load the search machinery.
:mod:`kbtui.retrieval.search` and :mod:`kbtui.retrieval.lexical` re-export them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The scope of every collection (not a valid collection id: "*" is not allowed in one).
ALL_COLLECTIONS = "*"

# Whether anything matched a query (see kbtui.retrieval.matching).
EXACT = "exact"
RELATED = "related"
NONE = "none"


@dataclass(frozen=True)
class MatchSignal:
    lexical: bool  # some query word matched a chunk in scope
    semantic: bool | None  # the best similarity clears the floor (None: no floor known, or no vector arm)
    best_similarity: float | None
    similarity_floor: float | None
    # Some passage shown holds every content word of the query (None: not judged).
    words_together: bool | None = None

    @property
    def verdict(self) -> str:
        """``exact``, ``related`` or ``none`` (see :mod:`kbtui.retrieval.matching`)."""
        if self.lexical and (self.semantic is not False or self.words_together is not False):
            return EXACT
        if self.lexical:
            return NONE  # an ordinary word here and there, and the meaning far: nothing here
        if self.semantic is False or (self.semantic is None and self.best_similarity is None):
            return NONE
        return RELATED


@dataclass(frozen=True)
class LexicalPlan:
    ranked: tuple[str, ...]  # words ranked with BM25
    repeats: tuple[int, ...]  # query-term frequency of each ranked word
    pruned: tuple[str, ...]  # words left out as too common
    recency: tuple[str, ...]  # all-common query: newest chunks holding these
    missing: tuple[str, ...]  # words found in no chunk
    completed: tuple[str, ...] = ()  # left-out words added to the best rows afterwards
    exact: bool | None = None  # the top rows are provably exact BM25 over every content word


@dataclass(frozen=True)
class Neighbour:
    """A chunk next to a hit in its document (same scope)."""

    chunk_id: str
    ordinal: int
    heading_path: str
    page: int | None
    start_offset: int
    end_offset: int
    text: str


@dataclass(frozen=True)
class Hit:
    collection_id: str
    document_id: str
    chunk_id: str
    source_path: str
    heading_path: str
    page: int | None
    start_offset: int
    end_offset: int
    kind: str
    language: str | None
    symbol: str | None
    score: float
    score_kind: str  # "Fusion" (fused rank score) or "Rerank" (raw cross-encoder relevance)
    text: str
    lexical_rank: int | None
    vector_rank: int | None
    lexical_score: float | None = None
    vector_score: float | None = None
    fusion_rank: int | None = None  # rank before reranking
    neighbors: tuple[Neighbour, ...] = ()
    # Per-document results: how many more of this document's chunks ranked (not shown).
    more_in_document: int = 0
    # How well this chunk answers, 0..1 on one scale for every query (see matching.relevance).
    relevance: float | None = None
    similarity: float | None = None  # its own cosine similarity to the query (None: no vector)
    # Its relevance is below the model's similarity floor: unrelated, hidden unless asked for.
    below_floor: bool = False


@dataclass(frozen=True)
class SearchExplain:
    """How a search ran: for ``kbtui search --explain`` and the eval harness."""

    mode: str
    fusion: str
    pool: int
    lexical_candidates: int
    vector_candidates: int
    lexical_plan: LexicalPlan | None
    reranked: bool
    timings_ms: dict[str, float]
    vector_weight: float | None = None  # convex fusion's weight of the vector arm for this query


@dataclass(frozen=True)
class SearchResponse:
    hits: list[Hit]
    degraded: list[str] = field(default_factory=list)
    elapsed_ms: float = 0.0
    explain: SearchExplain | None = None
    match: MatchSignal | None = None  # None only when the search itself failed
    hidden: int = 0  # hits left out as below the similarity floor (Hit.below_floor)
