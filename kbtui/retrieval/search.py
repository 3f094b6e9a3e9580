"""The search service: lexical and semantic arms, fusion, optional rerank, hydration.

Query → (query embedding ‖ lexical arm) → vector arm → fusion → optional
rerank under the latency budget → hydrate → optional neighbour expansion.

The lexical arm runs on a small thread pool in that thread's own store
session while the calling thread embeds the query and scans vectors, so
the embedding round trip overlaps the full-text query. Every arm and the hydration
apply the same scope (collection, optional document, served documents). The
scope "all collections" (``ALL_COLLECTIONS``) is every collection's own
scope: each arm runs once per collection and the lists merge by score (BM25
and cosine are on one scale across collections), and each hit is hydrated
in the collection it was found in.

Every response says whether anything matched (``SearchResponse.match``):
whether a query word matched lexically, and whether the best semantic
similarity clears the embedding model's calibrated floor
(:mod:`kbtui.retrieval.matching`). When neither holds the hits are dropped:
ten passages chosen only because something had to be shown are not answers.

A search never raises and never fails because a model is missing: an
unavailable embedder gives lexical-only results, a cold, busy or slow
reranker gives fusion order, and the response says why in ``degraded``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace

import numpy as np

from kbtui.config import Config
from kbtui.embedding import EmbeddingProvider, EmbeddingUnavailable
from kbtui.ports import Storage
from kbtui.retrieval.fts_query import MAX_QUERY_CHARS, STOP_WORDS, QueryTerms, parse_query
from kbtui.retrieval.fusion import (
    DEFAULT_FUSION,
    FUSION_STRATEGIES,
    ArmResult,
    fuse,
    reciprocal_rank_fusion,
    vector_weight,
)
from kbtui.retrieval.lexical import LexicalResult, lexical_candidates
from kbtui.retrieval.matching import NONE as NO_MATCH
from kbtui.retrieval.matching import match_signal, relevance, word_coverage
from kbtui.retrieval.rerank import LlamaServerReranker, rerank_skip_reason
from kbtui.retrieval.results import ALL_COLLECTIONS, Hit, Neighbour, SearchExplain, SearchResponse
from kbtui.retrieval.sections import with_section_openings
from kbtui.retrieval.snippets import QueryHighlighter
from store.errors import StoreUnavailable
from store.records import ChunkRecord

log = logging.getLogger(__name__)

MODES = ("hybrid", "lexical", "vector")
NEIGHBOUR_WINDOW = 1
RERANKER_TARGET = "reranker"


@dataclass(frozen=True)
class SearchRequest:
    query: str
    collection_id: str  # or ALL_COLLECTIONS
    document_id: str | None = None
    limit: int = 10
    expand_neighbors: bool = False
    mode: str = "hybrid"  # hybrid | lexical | vector (eval and benchmarks compare the arms)
    fusion: str | None = None  # None: the configured strategy
    per_document: bool = False  # one hit per document (its best chunk), up to ``limit`` documents
    # Drop hits whose relevance (Hit.relevance: 0..1, comparable across queries) is below this.
    # None: hide those below the model's similarity floor, and count them (SearchResponse.hidden).
    min_relevance: float | None = None
    # Keep hits even when nothing matched or they are below the floor (eval measures the
    # arms' raw rankings; such hits say so in Hit.below_floor).
    keep_unmatched: bool = False


@dataclass(frozen=True)
class VectorArm:
    """The semantic arm's answer for one query."""

    ranked: list[tuple[int, float]]  # chunk id, score (cosine blended with its section's opening), best first
    similarity: dict[int, float]  # chunk id -> its own cosine with the query
    query_vector: np.ndarray | None = None

    @property
    def top_similarity(self) -> float | None:
        return max(self.similarity.values()) if self.similarity else None


NO_VECTORS = VectorArm([], {})


class SearchService:
    """Hybrid search over one opened store. Thread-safe; call :meth:`close` when done."""

    def __init__(
        self,
        config: Config,
        embedder: EmbeddingProvider | None,
        store: Storage,
        *,
        reranker: LlamaServerReranker | None = None,
        request_warm: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self.embedder = embedder
        self.store = store
        self.reranker = reranker
        self.request_warm = request_warm
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def close(self) -> None:
        with self._pool_lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None

    # ------------------------------------------------------------ the search

    def search(self, request: SearchRequest) -> SearchResponse:
        """Run one search. Failures become ``degraded`` reasons, except a store
        that cannot be used at all (a database server down or unreachable):
        :class:`StoreUnavailable`, one line for the operator, rather than no results."""
        started = time.perf_counter()
        try:
            return self._search(request, started)
        except StoreUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001 - search degrades, never errors
            log.error("search failed: %s", type(exc).__name__)
            return SearchResponse([], ["search_failed"], (time.perf_counter() - started) * 1000)

    def _search(self, request: SearchRequest, started: float) -> SearchResponse:
        limit = max(1, request.limit)
        pool = max(limit * self.config.candidate_pool_multiplier, self.config.minimum_candidate_pool)
        mode = request.mode if request.mode in MODES else "hybrid"
        strategy = request.fusion or self.config.search_fusion
        if strategy not in FUSION_STRATEGIES:
            strategy = DEFAULT_FUSION
        degraded: list[str] = []
        timings: dict[str, float] = {}
        terms = parse_query(request.query)
        scopes = self._scopes(request)
        found_in: dict[int, str] = {}  # chunk id -> the collection an arm found it in

        lexical_future: Future[tuple[tuple[LexicalResult | None, dict[int, str]], float]] | None = None
        if mode != "vector" and not terms.empty and scopes:
            lexical_future = self._executor().submit(self._lexical_on_own_connection, terms, request, scopes, pool)
        vector_arm = NO_VECTORS
        if mode != "lexical" and scopes:
            vector_arm = self._semantic_arm(request, scopes, pool, degraded, timings, found_in)
        semantic = vector_arm.ranked
        lexical: LexicalResult | None = None
        if lexical_future is not None:
            (lexical, lexical_found_in), timings["lexical_ms"] = lexical_future.result()
            if lexical is None:
                degraded.append("lexical_failed")
            else:
                found_in.update(lexical_found_in)

        lexical_ranked = lexical.ranked if lexical else []
        model = self.embedder.identity.model if self.embedder else None
        top_similarity = vector_arm.top_similarity
        match = match_signal(lexical_found=bool(lexical_ranked), best_similarity=top_similarity, model=model)
        fusion_started = time.perf_counter()
        alpha: float | None = None
        if mode == "lexical":
            fused = _as_fused(lexical_ranked)
        elif mode == "vector":
            fused = _as_fused(semantic)
        elif lexical_ranked and semantic:
            # A short bm25 list is exhaustive: every other chunk in scope holds none of the words.
            unlisted = pool - len(lexical_ranked) if lexical and lexical.plan.ranked else 0
            alpha = vector_weight(top_similarity, model, sum(w not in STOP_WORDS for w in terms.words))
            fused = fuse(
                strategy, ArmResult("lexical", lexical_ranked, max(0, unlisted)), ArmResult("vector", semantic),
                alpha=alpha,
            )
        else:
            # One arm is empty (no word terms, or the embedder is down): its ranks on the fusion scale.
            fused = reciprocal_rank_fusion([[c for c, _ in (lexical_ranked or semantic)]])
        timings["fusion_ms"] = (time.perf_counter() - fusion_started) * 1000
        arm_down = {"lexical_failed", "vector_failed", "embedder_unavailable"} & set(degraded)
        if match.verdict == NO_MATCH and not request.keep_unmatched and not arm_down:
            fused = []  # nothing matched: no hits rather than the least bad passages

        lexical_by_id = {c: (rank, s) for rank, (c, s) in enumerate(lexical_ranked, start=1)}
        vector_by_id = {c: (rank, s) for rank, (c, s) in enumerate(semantic, start=1)}
        reranked = self._maybe_rerank(
            request, fused, lexical_ranked, semantic, started, limit, degraded, timings, found_in
        )
        if reranked is not None:
            ordered, score_kind, rows = reranked
        else:
            ordered, score_kind, rows = fused, "Fusion", {}
        fusion_rank = {c: rank for rank, (c, _) in enumerate(fused, start=1)}

        hydrate_started = time.perf_counter()
        more: dict[int, int] = {}
        if request.per_document:
            selected, rows, more = self._best_chunk_per_document(request, ordered, limit, rows, found_in)
        else:
            selected = ordered[:limit]
            missing = [c for c, _ in selected if c not in rows]
            rows = {**rows, **self._hydrate(request, missing, found_in)} if missing else rows
        highlighter = QueryHighlighter.for_query(request.query)
        similarities = self._similarities(selected, vector_arm)
        hits = []
        hidden = 0
        # With a floor known and both arms up, a hit the lexical arm did not find, as far in
        # meaning as an off-topic question's best, is unrelated: left out, counted. (Hits the
        # lexical arm found stay: on long queries a relevant one may hold few of the words.)
        floor = match.similarity_floor if not arm_down and request.min_relevance is None else None
        whole_words = False  # some passage shown holds every content word of the query
        for chunk_id, score in selected:
            row = rows.get(chunk_id)
            if row is None:
                continue  # deleted or re-indexed between ranking and hydration
            lexical_hit = lexical_by_id.get(chunk_id)
            vector_hit = vector_by_id.get(chunk_id)
            similarity = similarities.get(chunk_id)
            coverage = word_coverage(row.text, highlighter)
            whole_words = whole_words or coverage >= 1.0
            hit_relevance = relevance(similarity, coverage)
            if request.min_relevance is not None and hit_relevance < request.min_relevance:
                continue
            below_floor = floor is not None and similarity is not None and lexical_hit is None and hit_relevance < floor
            if below_floor and not request.keep_unmatched:
                hidden += 1
                continue
            hits.append(
                Hit(
                    collection_id=row.collection_id,
                    document_id=row.document_id,
                    chunk_id=row.chunk_id,
                    source_path=row.source_path,
                    heading_path=row.heading_path,
                    page=row.page,
                    start_offset=row.start_offset,
                    end_offset=row.end_offset,
                    kind=row.kind,
                    language=row.language,
                    symbol=row.symbol,
                    score=float(score),
                    score_kind=score_kind,
                    text=row.text,
                    lexical_rank=lexical_hit[0] if lexical_hit else None,
                    vector_rank=vector_hit[0] if vector_hit else None,
                    lexical_score=lexical_hit[1] if lexical_hit else None,
                    vector_score=vector_hit[1] if vector_hit else None,
                    fusion_rank=fusion_rank.get(chunk_id),
                    more_in_document=more.get(chunk_id, 0),
                    relevance=hit_relevance,
                    similarity=similarity,
                    below_floor=below_floor,
                )
            )
        if match.lexical and match.semantic is False:
            # Words found, meaning far: they count only as a whole (kbtui.retrieval.matching).
            match = replace(match, words_together=whole_words)
            if match.verdict == NO_MATCH and not request.keep_unmatched and not arm_down:
                hits, hidden = [], 0
        if request.expand_neighbors:
            hits = [self._with_neighbours(hit) for hit in hits]
        timings["hydrate_ms"] = (time.perf_counter() - hydrate_started) * 1000
        explain = SearchExplain(
            mode=mode,
            fusion=strategy if mode == "hybrid" else mode,
            pool=pool,
            lexical_candidates=len(lexical_ranked),
            vector_candidates=len(semantic),
            lexical_plan=lexical.plan if lexical else None,
            reranked=score_kind == "Rerank",
            timings_ms={k: round(v, 3) for k, v in timings.items()},
            vector_weight=round(alpha, 3) if alpha is not None and strategy == "convex" else None,
        )
        return SearchResponse(hits, degraded, (time.perf_counter() - started) * 1000, explain, match, hidden)

    # ------------------------------------------------------------ scope

    def _scopes(self, request: SearchRequest) -> list[str]:
        """The collections the request covers: one, or every collection."""
        if request.collection_id == ALL_COLLECTIONS:
            return self.store.catalog.list_collections()
        return [request.collection_id]

    # ------------------------------------------------------------ the arms

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="kbtui-search")
            return self._pool

    def _lexical_on_own_connection(
        self, terms: QueryTerms, request: SearchRequest, scopes: Sequence[str], pool: int
    ) -> tuple[tuple[LexicalResult | None, dict[int, str]], float]:
        """The lexical arm in this worker thread's own store session.
        Several collections: each is searched in its own scope, merged by score."""
        started = time.perf_counter()
        found_in: dict[int, str] = {}
        try:
            with self.store.session():
                results = []
                for collection_id in scopes:
                    found = lexical_candidates(
                        self.store.lexical, terms, collection_id, document_id=request.document_id, limit=pool
                    )
                    found_in.update((chunk_id, collection_id) for chunk_id, _ in found.ranked)
                    results.append(found)
            result: LexicalResult | None = _merged_lexical(results, pool)
        except StoreUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001 - database errors echo query words: type only
            log.warning("lexical arm failed: %s", type(exc).__name__)
            result = None
        return (result, found_in), (time.perf_counter() - started) * 1000

    def _semantic_arm(
        self,
        request: SearchRequest,
        scopes: Sequence[str],
        pool: int,
        degraded: list[str],
        timings: dict[str, float],
        found_in: dict[int, str],
    ) -> VectorArm:
        """The vector arm: the pool's nearest chunks, scored with their section openings."""
        if self.embedder is None:
            degraded.append("embedder_unavailable")
            return NO_VECTORS
        if not request.query.strip():
            return NO_VECTORS
        started = time.perf_counter()
        try:
            query_vector = self.embedder.embed_query(request.query[:MAX_QUERY_CHARS])
            # The identity the query was embedded with: only vectors of exactly it are compared.
            identity = self.embedder.identity.canonical()
        except EmbeddingUnavailable as exc:
            log.info("query embedding unavailable: %s", exc.code)
            degraded.append("embedder_unavailable")
            return NO_VECTORS
        except Exception as exc:  # noqa: BLE001 - a broken embedder degrades to lexical-only
            log.warning("query embedding failed: %s", type(exc).__name__)
            degraded.append("embedder_unavailable")
            return NO_VECTORS
        finally:
            timings["embed_ms"] = (time.perf_counter() - started) * 1000
        vector_started = time.perf_counter()
        try:
            merged: list[tuple[int, float]] = []
            # Twice the pool: the blend below can lift a chunk from just outside it.
            for collection_id in scopes:
                found = self._vector_candidates(query_vector, identity, request, 2 * pool, collection_id)
                found_in.update((chunk_id, collection_id) for chunk_id, _ in found)
                merged.extend(found)
            similarity = dict(merged)
            ranked = self._with_section_openings(merged, similarity, query_vector, identity)[:pool]
            return VectorArm(ranked, {c: similarity[c] for c, _ in ranked}, query_vector)
        except StoreUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001
            log.warning("vector arm failed: %s", type(exc).__name__)
            degraded.append("vector_failed")
            return NO_VECTORS
        finally:
            timings["vector_ms"] = (time.perf_counter() - vector_started) * 1000

    def _with_section_openings(
        self, candidates: list[tuple[int, float]], similarity: dict[int, float], query_vector: np.ndarray,
        identity: str,
    ) -> list[tuple[int, float]]:
        """``candidates`` rescored with the cosine of their sections' first
        chunks (:mod:`kbtui.retrieval.sections`); openings not among the
        candidates are read from their stored vectors (same document: same scope)."""
        openers = self.store.chunks.section_openers([c for c, _ in candidates])
        missing = {o for o in openers.values() if o not in similarity}
        opening = dict(similarity)
        if missing:
            query = query_vector.astype(np.float32)
            stored = self.store.vectors.stored_vectors(sorted(missing), identity, int(query.shape[0]))
            for chunk_id, vector in stored.items():
                opening[chunk_id] = float(vector @ query)
        return with_section_openings(candidates, openers, opening)

    def _vector_candidates(
        self, query_vector: np.ndarray, identity: str, request: SearchRequest, pool: int,
        collection_id: str | None = None,
    ) -> list[tuple[int, float]]:
        """The one call into the vector index."""
        return self.store.vectors.search(
            query_vector, identity, collection_id or request.collection_id,
            document_id=request.document_id, limit=pool,
        )

    # ------------------------------------------------------------ rerank

    def _maybe_rerank(
        self,
        request: SearchRequest,
        fused: list[tuple[int, float]],
        lexical: Sequence[tuple[int, float]],
        semantic: Sequence[tuple[int, float]],
        started: float,
        limit: int,
        degraded: list[str],
        timings: dict[str, float],
        found_in: dict[int, str],
    ) -> tuple[list[tuple[int, float]], str, dict[int, ChunkRecord]] | None:
        """Reranked selection, or None for fusion order (the reason goes in ``degraded``)."""
        if self.reranker is None or request.mode != "hybrid":
            return None
        budget_s = self.config.search_latency_budget_ms / 1000
        candidates = fused[: self.config.rerank_max_candidates]
        skip = rerank_skip_reason(
            candidates=len(candidates),
            lexical_top=lexical[0][0] if lexical else None,
            vector_top=semantic[0][0] if semantic else None,
            elapsed_s=time.perf_counter() - started,
            budget_s=budget_s,
            adaptive=self.config.adaptive_reranking,
        )
        if skip is not None:
            degraded.append(f"reranker_{skip}")
            return None
        rerank_started = time.perf_counter()
        rows = self._hydrate(request, [c for c, _ in candidates], found_in)
        present = [(c, s) for c, s in candidates if c in rows]
        remaining = budget_s - (time.perf_counter() - started)
        outcome = self.reranker.rerank(
            request.query[:MAX_QUERY_CHARS], [rows[c].text for c, _ in present], deadline_s=remaining
        )
        timings["rerank_ms"] = (time.perf_counter() - rerank_started) * 1000
        scores = outcome.scores
        if scores is None:
            degraded.append(f"reranker_{outcome.code}")
            if outcome.code != "busy":
                self._ask_for_warm(RERANKER_TARGET)
            return None
        order = sorted(range(len(present)), key=lambda i: (-scores[i], i))
        return [(present[i][0], scores[i]) for i in order], "Rerank", rows

    def _ask_for_warm(self, target: str) -> None:
        if self.request_warm is None:
            return
        try:
            self.request_warm(target)
        except Exception as exc:  # noqa: BLE001 - a warm request is best effort
            log.warning("warm request failed: %s", type(exc).__name__)

    # ------------------------------------------------------------ hydration

    def _hydrate(
        self, request: SearchRequest, chunk_ids: Sequence[int], found_in: dict[int, str]
    ) -> dict[int, ChunkRecord]:
        """The chunks ``chunk_ids`` that are still served in the scope each was found in."""
        if request.collection_id != ALL_COLLECTIONS:
            return self.store.chunks.served_chunks(list(chunk_ids), request.collection_id, document_id=request.document_id)
        by_collection: dict[str, list[int]] = {}
        for chunk_id in chunk_ids:
            if chunk_id in found_in:
                by_collection.setdefault(found_in[chunk_id], []).append(chunk_id)
        rows: dict[int, ChunkRecord] = {}
        for collection_id, ids in by_collection.items():
            rows.update(self.store.chunks.served_chunks(ids, collection_id, document_id=request.document_id))
        return rows

    def _best_chunk_per_document(
        self,
        request: SearchRequest,
        ordered: Sequence[tuple[int, float]],
        limit: int,
        rows: dict[int, ChunkRecord],
        found_in: dict[int, str],
    ) -> tuple[list[tuple[int, float]], dict[int, ChunkRecord], dict[int, int]]:
        """The first (best) chunk of each document in ``ordered``, up to
        ``limit`` documents, and for each how many more of its document's
        chunks are in the ranking (every candidate is hydrated: at most the pool)."""
        missing = [c for c, _ in ordered if c not in rows]
        rows = {**rows, **self._hydrate(request, missing, found_in)} if missing else dict(rows)
        best: dict[str, int] = {}
        selected: list[tuple[int, float]] = []
        more: dict[int, int] = {}
        for chunk_id, score in ordered:
            row = rows.get(chunk_id)
            if row is None:
                continue
            first = best.get(row.document_id)
            if first is None:
                if len(selected) < limit:
                    best[row.document_id] = chunk_id
                    selected.append((chunk_id, score))
                    more[chunk_id] = 0
            else:
                more[first] += 1
        return selected, rows, more

    def _similarities(self, selected: Sequence[tuple[int, float]], arm: VectorArm) -> dict[int, float]:
        """Each selected chunk's own cosine similarity to the query: from the
        vector arm, else from its stored vector of the query's exact identity."""
        found: dict[int, float] = {c: arm.similarity[c] for c, _ in selected if c in arm.similarity}
        missing = [int(c) for c, _ in selected if c not in found]
        if not missing or arm.query_vector is None or self.embedder is None:
            return found
        query = arm.query_vector.astype(np.float32)
        identity = self.embedder.identity.canonical()
        for chunk_id, vector in self.store.vectors.stored_vectors(missing, identity, int(query.shape[0])).items():
            found[chunk_id] = float(vector @ query)
        return found

    def _with_neighbours(self, hit: Hit) -> Hit:
        neighbours = tuple(
            Neighbour(r.chunk_id, r.ordinal, r.heading_path, r.page, r.start_offset, r.end_offset, r.text)
            for r in self.store.chunks.neighbours(hit.chunk_id, hit.collection_id, NEIGHBOUR_WINDOW)
            if r.chunk_id != hit.chunk_id
        )
        return Hit(**{**hit.__dict__, "neighbors": neighbours})


def _merged_lexical(results: Sequence[LexicalResult], pool: int) -> LexicalResult:
    """One lexical result from several collections' (BM25 is one scale: the
    index's own statistics, whatever the scope). The first plan stands for all."""
    if len(results) == 1:
        return results[0]
    merged = sorted((pair for result in results for pair in result.ranked), key=lambda pair: -pair[1])[:pool]
    return LexicalResult(merged, results[0].plan)


def _as_fused(ranked: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """A single arm's own order and scores (lexical-only or vector-only mode)."""
    return [(c, float(s)) for c, s in ranked]
