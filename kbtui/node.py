"""A node: the opened data directory plus the configured embedder and search."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kbtui.config import Config
from kbtui.embedding import EmbeddingProvider, make_provider
from kbtui.embedding.reuse import CacheBounds, ChunkEmbeddingReuse, VectorCache
from kbtui.ingest import ingest_document
from kbtui.retrieval.search import SearchRequest, SearchResponse, SearchService
from store import Store, catalog, open_store
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

    @classmethod
    def open(cls, config: Config) -> Node:
        store = open_store(config.home)
        swept = catalog.sweep_orphan_blobs(store)
        if swept:
            log.info("removed %d orphan blob(s)", swept)
        embedder = build_embedder(config)
        vectors = VectorIndexes(config.home)
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
        return cls(config, store, embedder, SearchService(config, embedder, vectors), reuse, vectors)

    def ingest(self, document_id: str) -> str | None:
        status = ingest_document(self.store, self.config, self.embedder, document_id, reuse=self.reuse)
        if status == "Indexed":
            self.vectors.note_committed()
        return status

    def search(self, query: str, collection_id: str, *, limit: int = 10) -> SearchResponse:
        return self.searcher.search(SearchRequest(query=query, collection_id=collection_id, limit=limit))

    def purge(self, document_id: str) -> bool:
        removed = catalog.purge_document(self.store, document_id)
        if removed:
            self.vectors.note_removed(removed)
        return removed is not None

    def close(self) -> None:
        try:
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
