"""A node: the opened data directory plus the configured embedder and search."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from collections.abc import Sequence

from pykka import ActorRef

from actors.runtime import Runtime
from actors.stage import PipelineContext
from kbtui.config import Config
from kbtui.embedding import EmbeddingProvider, make_provider
from kbtui.ingest import ingest_document
from kbtui.retrieval.rerank import build_reranker
from kbtui.retrieval.search import SearchRequest, SearchResponse, SearchService
from store import Store, catalog, open_store

log = logging.getLogger(__name__)


@dataclass
class Node:
    config: Config
    store: Store
    embedder: EmbeddingProvider
    searcher: SearchService

    @classmethod
    def open(cls, config: Config) -> Node:
        store = open_store(config.home)
        swept = catalog.sweep_orphan_blobs(store)
        if swept:
            log.info("removed %d orphan blob(s)", swept)
        embedder = make_provider(config.embedding_provider)
        return cls(config, store, embedder, SearchService(config, embedder, reranker=build_reranker(config)))

    def ingest(self, document_id: str) -> str | None:
        return ingest_document(self.store, self.config, self.embedder, document_id)

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
        context = PipelineContext(store=self.store, config=self.config, embedder=self.embedder)
        return Runtime(context, listeners=listeners)

    def purge(self, document_id: str) -> bool:
        return catalog.purge_document(self.store, document_id) is not None

    def close(self) -> None:
        self.searcher.close()
        self.store.close()
