"""The search service: lexical and semantic arms, fusion, hydration."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from kbtui.config import Config
from kbtui.embedding import EmbeddingProvider, EmbeddingUnavailable
from kbtui.retrieval.fts_query import fts_match_expression
from kbtui.retrieval.fusion import reciprocal_rank_fusion
from store.db import database
from store.models import SERVED_DOCUMENT_SQL
from store.fts import lexical_search
from store.vectors import VectorIndexes, exact_search


@dataclass(frozen=True)
class SearchRequest:
    query: str
    collection_id: str
    document_id: str | None = None
    limit: int = 10


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
    score_kind: str
    text: str
    lexical_rank: int | None
    vector_rank: int | None


@dataclass(frozen=True)
class SearchResponse:
    hits: list[Hit]
    degraded: list[str] = field(default_factory=list)
    elapsed_ms: float = 0.0


class SearchService:
    def __init__(self, config: Config, embedder: EmbeddingProvider | None, vectors: VectorIndexes | None = None) -> None:
        self.config = config
        self.embedder = embedder
        self.vectors = vectors

    def search(self, request: SearchRequest) -> SearchResponse:
        started = time.perf_counter()
        limit = max(1, request.limit)
        pool = max(limit * self.config.candidate_pool_multiplier, self.config.minimum_candidate_pool)
        degraded: list[str] = []

        lexical: list[tuple[int, float]] = []
        expression = fts_match_expression(request.query)
        if expression is not None:
            lexical = lexical_search(
                expression, request.collection_id, document_id=request.document_id, limit=pool
            )

        semantic: list[tuple[int, float]] = []
        if self.embedder is None:
            degraded.append("embedder_unavailable")
        elif request.query.strip():
            try:
                # embed_query applies the model's query-intent prefix itself.
                query_vector = self.embedder.embed_query(request.query)
                semantic = (self.vectors.search if self.vectors is not None else exact_search)(
                    query_vector,
                    self.embedder.identity.canonical(),
                    request.collection_id,
                    document_id=request.document_id,
                    limit=pool,
                )
            except EmbeddingUnavailable:
                degraded.append("embedder_unavailable")

        lexical_ranks = {cid: rank for rank, (cid, _) in enumerate(lexical, start=1)}
        vector_ranks = {cid: rank for rank, (cid, _) in enumerate(semantic, start=1)}
        fused = reciprocal_rank_fusion([[c for c, _ in lexical], [c for c, _ in semantic]])[:limit]
        hits = self._hydrate(request.collection_id, fused, lexical_ranks, vector_ranks)
        return SearchResponse(hits, degraded, (time.perf_counter() - started) * 1000)

    def _hydrate(self, collection_id, fused, lexical_ranks, vector_ranks) -> list[Hit]:
        if not fused:
            return []
        ids = [cid for cid, _ in fused]
        placeholders = ", ".join("?" for _ in ids)
        rows = database.execute_sql(
            "SELECT c.id, c.collection_id, c.document_id, c.chunk_uid, c.source_path, c.heading_path, "
            "c.page, c.start_offset, c.end_offset, c.kind, c.language, c.symbol, c.content "
            "FROM chunk AS c JOIN document AS d ON d.id = c.document_id "
            f"WHERE c.id IN ({placeholders}) AND c.collection_id = ? AND d.collection_id = ? "
            f"AND {SERVED_DOCUMENT_SQL}",
            [*ids, collection_id, collection_id],
        ).fetchall()
        by_id = {row[0]: row for row in rows}
        hits = []
        for chunk_id, score in fused:
            row = by_id.get(chunk_id)
            if row is None:
                continue  # deleted or re-indexed between ranking and hydration
            hits.append(
                Hit(
                    collection_id=row[1],
                    document_id=row[2],
                    chunk_id=row[3],
                    source_path=row[4],
                    heading_path=row[5],
                    page=row[6],
                    start_offset=row[7],
                    end_offset=row[8],
                    kind=row[9],
                    language=row[10],
                    symbol=row[11] or None,
                    score=score,
                    score_kind="Fusion",
                    text=row[12],
                    lexical_rank=lexical_ranks.get(chunk_id),
                    vector_rank=vector_ranks.get(chunk_id),
                )
            )
        return hits
