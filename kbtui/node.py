"""The use cases, in one place: every face (CLI, terminal UI, agent tools, MCP,
eval) calls a :class:`Node` and none of them touches the store directly.

A node is an opened data directory plus the configured embedder, the ANN
indexes and search. Its methods are safe to call from any thread: each use
case runs on that thread's own database connection (opened and closed around
the call when the thread has none). Everything a method returns is a frozen
read model (:mod:`kbtui.reads`), a report, or a plain value.
"""

from __future__ import annotations

import functools
import hashlib
import io
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ParamSpec, TypeVar

from pykka import ActorRef

from actors.runtime import NodeAlreadyRunning, Runtime
from actors.stage import PipelineContext
from actors.status_writer import published_admission, read_node_status
from kbtui.collect import AddReport, CollectedFiles, RefusedFile, add_files
from kbtui.config import Config
from kbtui.embedding import EmbeddingProvider, make_provider
from kbtui.embedding.reuse import CacheBounds, ChunkEmbeddingReuse, VectorCache
from kbtui.errors import OPERATOR_ERRORS, NotFound
from kbtui.follow import FollowResult, follow_documents
from kbtui.reads import (
    CatalogSnapshot,
    DocumentDetail,
    DocumentRow,
    DocumentText,
    NameCache,
    catalog_stamp,
    load_document_detail,
    load_document_rows,
    read_document_text,
    read_neighbours,
    status_counts,
)
from kbtui.repository.importer import ImportReport, import_repository, register_repository
from kbtui.repository.scan import ScanLimits
from kbtui.retrieval.rerank import build_reranker, reranker_warmer
from kbtui.retrieval.search import (
    RERANKER_TARGET,
    SearchRequest,
    SearchResponse,
    SearchService,
)
from store import Store, catalog, open_store, repositories
from store.ann import VectorIndexes
from store.chunks import ChunkRecord
from store.datadir import can_write
from store.db import thread_connection
from store.doctor import PROBLEM, Examination, examination_json, examine
from store.models import Document, Status
from store.node_lock import node_running
from store.repositories import RegisteredRepository
from store.vectors import committed_vectors

# What an add answers for each file; a client of the node's API rebuilds it.
AddOutcome = catalog.AddOutcome

log = logging.getLogger(__name__)

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _connected(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run a use case on the calling thread's own database connection."""

    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with thread_connection():
            return method(*args, **kwargs)

    return wrapper


@dataclass(frozen=True)
class ReindexReport:
    """Documents queued again, and those left alone because their encrypted
    source is damaged (id and a content-free reason)."""

    queued: tuple[str, ...]
    damaged: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class NodeStatus:
    """Whether a node runs for the data directory, what it last published, and
    documents by status."""

    running: bool
    published: dict[str, object] | None
    counts: dict[str, int]


@dataclass(frozen=True)
class RepositoryRow:
    repository: RegisteredRepository
    document_count: int


@dataclass
class Node:
    config: Config
    store: Store
    embedder: EmbeddingProvider
    searcher: SearchService
    reuse: ChunkEmbeddingReuse
    vectors: VectorIndexes
    _runtime: Runtime | None = field(default=None, repr=False)
    names: NameCache = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.searcher.request_warm = self._request_warm
        self.names = NameCache(self.store)

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

    def close(self) -> None:
        try:
            self.searcher.close()
            self.vectors.close()
        finally:
            self.store.close()

    # ------------------------------------------------------------ the pipeline

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

    def pipeline_running(self) -> bool:
        """Whether some process (this one included) holds the node lock for the data directory."""
        return node_running(self.config.home)

    @_connected
    def index(
        self, document_ids: Sequence[str], *, show_progress: bool | None = False, stall_timeout_s: float = 120.0
    ) -> dict[str, str]:
        """Run the pipeline in this process until the documents are Indexed or
        Failed; return their statuses (a deleted document is absent)."""
        ids = list(dict.fromkeys(document_ids))
        with self.pipeline() as runtime:
            for document_id in ids:
                runtime.admit(document_id)  # Busy is fine: the drain sweep admits it later
            follow_documents(ids, show_progress=show_progress, stall_timeout_s=stall_timeout_s)
        return self._statuses(ids)

    def ingest(self, document_id: str) -> str | None:
        """Index one document now; its final status, or None if it was deleted."""
        return self.index([document_id]).get(document_id)

    @_connected
    def index_and_follow(self, document_ids: Sequence[str], *, show_progress: bool | None = None) -> FollowResult:
        """Get Pending documents indexed, whoever runs the node, and wait for them.

        When no node runs for the data directory this process runs the
        pipeline; otherwise it follows the running node through the database,
        and takes over if that node stops before the documents are done.
        """
        ids = list(dict.fromkeys(document_ids))
        runtime: Runtime | None = None

        def ensure_pipeline() -> None:
            nonlocal runtime
            if runtime is not None or self.pipeline_running():
                return
            try:
                runtime = self.pipeline().start()
            except NodeAlreadyRunning:
                return  # another process won the race; follow it
            for document_id in ids:
                runtime.admit(document_id)  # Busy is fine: the drain sweep admits it later

        try:
            ensure_pipeline()
            return follow_documents(ids, show_progress=show_progress, on_poll=ensure_pipeline)
        finally:
            if runtime is not None:
                runtime.stop()

    # ------------------------------------------------------------ adding

    @_connected
    def add_files(
        self,
        collected: CollectedFiles,
        collection_id: str,
        *,
        on_refused: Callable[[RefusedFile], None] | None = None,
    ) -> AddReport:
        """Store the files an ``add`` listed (:func:`kbtui.collect.collect_files`,
        which a face calls first so a bad argument stops everything before the
        data directory is touched) as Pending documents of ``collection_id``
        (encrypted); nothing is indexed yet.

        Each file is on its own: one that cannot be stored is refused with a
        fixed reason (``on_refused`` hears of it at once) and the rest carry
        on. The same bytes already in the collection are the same document.
        """
        return add_files(
            self.store, collection_id, collected.files, max_bytes=self.config.max_document_bytes,
            on_refused=on_refused, skipped_symlinks=collected.skipped_symlinks,
        )

    @_connected
    def add_at_path(
        self, data: bytes, collection_id: str, *, source_path: str, display_name: str, fmt: str
    ) -> catalog.AddOutcome | None:
        """Store ``data`` as the document at ``source_path`` (identified by the path,
        never de-duplicated by content). The same bytes already there are that
        document (a Failed one is queued again); None when the path holds other bytes."""
        content_hash = hashlib.sha256(data).hexdigest()
        existing = catalog.document_at(collection_id, source_path)
        if existing is None:
            document_id = catalog.create_document(
                self.store, collection_id, io.BytesIO(data), content_hash=content_hash,
                display_name=display_name, fmt=fmt, source_path=source_path,
            )
            return catalog.AddOutcome(document_id, True, Status.PENDING.value)
        if existing.content_hash != content_hash:
            return None
        if existing.status == Status.FAILED.value:
            catalog.mark_pending([existing.id])
            return catalog.AddOutcome(existing.id, False, Status.PENDING.value)
        return catalog.AddOutcome(existing.id, False, existing.status)

    # ------------------------------------------------------------ removing and re-indexing

    @_connected
    def remove(self, document_ids: Sequence[str]) -> int:
        """Delete documents (rows, index entries, ANN labels, encrypted source); how many existed."""
        return sum(self.purge(document_id) for document_id in dict.fromkeys(document_ids))

    @_connected
    def purge(self, document_id: str) -> bool:
        """The one way a document is deleted: the catalog first, then its ANN labels.
        False when it did not exist."""
        removed = catalog.purge_document(self.store, document_id)
        if removed:
            self.vectors.note_removed(removed)
        return removed is not None

    @_connected
    def reindex(self, document_ids: Sequence[str] | None = None, *, collection_id: str | None = None) -> ReindexReport:
        """Queue documents for ingestion again (None: every document, of
        ``collection_id`` when given). They keep serving until the new index commits.

        A document whose encrypted source fails authentication is left alone
        (it could only fail again, and its current index would be lost) and reported.
        """
        if document_ids is None:
            document_ids = [row.document_id for row in load_document_rows(self.names, collection_id)]
        queued: list[str] = []
        damaged: list[tuple[str, str]] = []
        for document_id in dict.fromkeys(document_ids):
            try:
                self.store.blobs.verify(document_id)
            except OPERATOR_ERRORS as problem:
                damaged.append((document_id, problem.message))
                continue
            queued.append(document_id)
        catalog.mark_pending(queued)
        return ReindexReport(tuple(queued), tuple(damaged))

    # ------------------------------------------------------------ reading

    @_connected
    def resolve(self, reference: str, collection_id: str | None = None) -> str:
        """The id of the document ``reference`` names (full id or unique prefix)."""
        return catalog.resolve_document(reference, collection_id).id

    @_connected
    def documents(
        self,
        collection_id: str | None = None,
        status: str | None = None,
        *,
        updated_since: float | None = None,
        document_ids: Sequence[str] | None = None,
    ) -> list[DocumentRow]:
        """Documents oldest first (see :func:`kbtui.reads.load_document_rows`)."""
        return load_document_rows(
            self.names, collection_id, status, updated_since=updated_since, document_ids=document_ids
        )

    @_connected
    def document(self, document_id: str) -> DocumentRow:
        found = load_document_rows(self.names, None, document_ids=[document_id])
        if not found:
            raise NotFound("no such document")
        return found[0]

    @_connected
    def detail(self, document_id: str) -> DocumentDetail | None:
        """Row, versions, history, sections and chunks of one document (None if gone)."""
        return load_document_detail(self.names, document_id)

    @_connected
    def document_text(self, document_id: str, collection_id: str, max_chars: int) -> DocumentText | None:
        """Up to ``max_chars`` of a served document's text, stitched from its chunks."""
        return read_document_text(
            document_id, collection_id, max_chars, overlap_limit=self.config.chunking.overlap_chars
        )

    @_connected
    def neighbours(self, chunk_id: str, collection_id: str, window: int) -> list[ChunkRecord]:
        """A served chunk and up to ``window`` chunks each side, in document order."""
        return read_neighbours(chunk_id, collection_id, window)

    @_connected
    def display_names(self, document_ids: Sequence[str]) -> dict[str, str]:
        """The operator's own file names for these documents (never for hits or tools)."""
        return self.names.names_of(document_ids)

    @_connected
    def collections(self) -> list[str]:
        return catalog.list_collections()

    @_connected
    def collection_exists(self, collection_id: str) -> bool:
        return catalog.collection_exists(collection_id)

    @_connected
    def status(self) -> NodeStatus:
        running = self.pipeline_running()
        return NodeStatus(running, read_node_status(self.config.home) if running else None, status_counts())

    @_connected
    def snapshot(self, collection_id: str, *, with_queue: bool) -> CatalogSnapshot:
        """The cheap look the terminal UI takes once a second (and the running
        node's published queue, when asked for)."""
        running = self.pipeline_running()
        queue = published_admission(self.config.home) if with_queue and running else None
        return CatalogSnapshot(
            collection_id=collection_id,
            stamp=catalog_stamp(collection_id),
            status_counts=tuple(sorted(status_counts(collection_id).items())),
            queue=queue,
            collections=tuple(catalog.list_collections()),
            node_running=running,
        )

    @_connected
    def statuses(self, document_ids: Sequence[str]) -> dict[str, str]:
        return self._statuses(document_ids)

    def _statuses(self, document_ids: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        ids = list(document_ids)
        for start in range(0, len(ids), 500):
            rows = Document.select(Document.id, Document.status).where(Document.id.in_(ids[start : start + 500]))
            found.update({row.id: row.status for row in rows})
        return found

    # ------------------------------------------------------------ search

    @_connected
    def search(
        self, query: str, collection_id: str, *, limit: int | None = None, document_id: str | None = None,
        expand_neighbors: bool = False,
    ) -> SearchResponse:
        return self.searcher.search(
            SearchRequest(
                query=query, collection_id=collection_id, limit=limit or self.config.search_limit,
                document_id=document_id, expand_neighbors=expand_neighbors,
            )
        )

    # ------------------------------------------------------------ repositories

    @_connected
    def register_repository(self, path: Path, name: str | None = None) -> RegisteredRepository:
        """Register ``path``, the top level of a Git working tree, for imports."""
        return register_repository(self.store, path, name)

    @_connected
    def repositories(self) -> list[RepositoryRow]:
        return [
            RepositoryRow(r, repositories.document_count(r.id)) for r in repositories.list_repositories(self.store)
        ]

    @_connected
    def resolve_repository(self, reference: str) -> RepositoryRow:
        """A registration by id, unique id prefix or name."""
        registered = repositories.resolve_repository(self.store, reference)
        return RepositoryRow(registered, repositories.document_count(registered.id))

    @_connected
    def unregister_repository(self, repository_id: str, *, purge: bool) -> int:
        """Forget a registration; with ``purge`` also delete what it imported
        (else its documents stay, as ordinary documents). Returns how many were purged."""
        return repositories.unregister_repository(
            self.store, repository_id, purge=self.purge if purge else None
        )

    def repository_scan_limits(self) -> ScanLimits:
        """The configured per-file and aggregate byte limits of a repository scan."""
        return ScanLimits(
            max_file_bytes=min(self.config.repository_max_file_bytes, self.config.max_document_bytes),
            max_total_bytes=self.config.repository_max_total_bytes,
        )

    @_connected
    def import_repository(
        self, repository_id: str, collection_id: str, *, on_progress: Callable[[int, int], None] | None = None
    ) -> ImportReport:
        """Bring ``collection_id`` in line with a registered repository: add,
        update, leave, and (after a completed scan) purge. Writes Pending rows
        only; :meth:`index_and_follow` or a running node indexes them."""
        return import_repository(
            self.store, repository_id, collection_id, self.repository_scan_limits(),
            purge=self.purge, on_progress=on_progress,
        )


def examine_data_directory(home: Path) -> Examination:
    """What ``kbtui doctor`` reports: the data directory checked (catalog, key,
    modes, sources, vector indexes) without opening a node or changing anything."""
    return examine(home)


__all__ = ["PROBLEM", "AddOutcome", "Node", "RegisteredRepository", "examination_json", "examine_data_directory"]


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
