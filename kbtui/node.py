"""A node: the opened data directory plus the configured embedder and search."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from pykka import ActorRef

from actors.runtime import Runtime
from actors.stage import PipelineContext
from kbtui.config import Config
from kbtui.embedding import EmbeddingProvider, make_provider
from kbtui.embedding.reuse import CacheBounds, ChunkEmbeddingReuse, VectorCache
from kbtui.follow import follow_documents
from kbtui.retrieval.rerank import build_reranker, reranker_warmer
from kbtui.retrieval.search import (
    RERANKER_TARGET,
    SearchRequest,
    SearchResponse,
    SearchService,
)
from store import Store, catalog, open_store
from store.datadir import can_write
from store.models import Document
from store.vectors import VectorIndexes, committed_vectors

log = logging.getLogger(__name__)


@dataclass
class Node:
    config: Config
    store: Store
    embedder: EmbeddingProvider
    searcher: SearchService
    reuse: ChunkEmbeddingReuse
    vectors: VectorIndexes
    _runtime: Runtime | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.searcher.request_warm = self._request_warm

    @classmethod
    def open(cls, config: Config, *, read_only: bool = False) -> Node:
        """Open the node's data directory; ``read_only`` for commands that only
        read (they never write the catalog, nor wait for the write lock)."""
        store = open_store(config.home, read_only=read_only)
        if not read_only:
            # Only now: open_store has refused any catalog not known to be whole.
            swept = catalog.sweep_orphan_blobs(store)
            if swept:
                log.info("removed %d orphan blob(s)", swept)
        embedder = build_embedder(config)
        # The vector index is a cache derived from the catalog: a reader may
        # still save it where the directory can be written (the next search
        # loads instead of rebuilding); on a read-only mount it only reads.
        vectors = VectorIndexes(config.home, read_only=not can_write(config.home))
        reuse = ChunkEmbeddingReuse(
            VectorCache(
                CacheBounds(
                    ttl_s=config.embedding_cache_ttl_s,
                    max_entries=config.embedding_cache_max_entries,
                    max_bytes=config.embedding_cache_max_bytes,
                )
            ),
            committed_vectors,
        )
        searcher = SearchService(config, embedder, vectors, reranker=build_reranker(config))
        return cls(config, store, embedder, searcher, reuse, vectors)

    def index(self, document_ids: Sequence[str], *, stall_timeout_s: float = 120.0) -> dict[str, str]:
        """Run the pipeline in this process until the documents are Indexed or
        Failed; return their statuses (a deleted document is absent)."""
        with self.pipeline() as runtime:
            for document_id in document_ids:
                runtime.admit(document_id)
            follow_documents(list(document_ids), show_progress=False, stall_timeout_s=stall_timeout_s)
        rows = Document.select(Document.id, Document.status).where(Document.id.in_(list(document_ids)))
        return {row.id: row.status for row in rows}

    def ingest(self, document_id: str) -> str | None:
        """Index one document now; its final status, or None if it was deleted."""
        return self.index([document_id]).get(document_id)

    def search(
        self, query: str, collection_id: str, *, limit: int = 10, document_id: str | None = None,
        expand_neighbors: bool = False,
    ) -> SearchResponse:
        return self.searcher.search(
            SearchRequest(
                query=query, collection_id=collection_id, limit=limit,
                document_id=document_id, expand_neighbors=expand_neighbors,
            )
        )

    def pipeline(self, *, listeners: Sequence[ActorRef] = ()) -> Runtime:
        """A (not yet started) actor pipeline for this node."""
        context = PipelineContext(
            store=self.store, config=self.config, embedder=self.embedder, reuse=self.reuse, vector_index=self.vectors
        )
        warmers = {}
        if self.searcher.reranker is not None:
            warmers[RERANKER_TARGET] = reranker_warmer(self.searcher.reranker)
        self._runtime = Runtime(context, listeners=listeners, warmers=warmers)
        return self._runtime

    def _request_warm(self, target: str) -> None:
        """A search found the reranker cold: warm it in the background if this
        process runs the pipeline (search itself never starts it)."""
        if self._runtime is not None and self._runtime.running:
            self._runtime.request_warm(target)

    def purge(self, document_id: str) -> bool:
        removed = catalog.purge_document(self.store, document_id)
        if removed:
            self.vectors.note_removed(removed)
        return removed is not None

    def close(self) -> None:
        try:
            self.searcher.close()
            self.vectors.close()
        finally:
            self.store.close()


def build_embedder(config: Config) -> EmbeddingProvider:
    """The configured embedding provider (built lazily: nothing loads or connects yet)."""
    return make_provider(
        config.embedding_provider,
        model=config.embedding_model,
        ollama_host=config.ollama_host,
        vector_mode=config.embedding_vector_mode,
        batch_size=config.max_embedding_batch_size,
        threads=config.embedding_threads,
        timeout_s=config.embedding_timeout_s,
        query_timeout_s=config.embedding_query_timeout_s,
        connect_timeout_s=config.embedding_connect_timeout_s,
        identity_ttl_s=config.embedding_identity_ttl_s,
    )

