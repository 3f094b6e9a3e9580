"""The use cases, in one place: every face (CLI, terminal UI, agent tools, MCP,
eval) calls a :class:`Node` and none of them touches the store directly.

A node is an opened knowledge base (its :class:`kbtui.ports.Storage`: the
SQLite data directory, or PostgreSQL) plus the configured embedder and
search. Its methods are safe to call from any thread: each use case runs in
that thread's own store session (a connection opened and closed around the
call when the thread has none). Everything a method returns is a frozen
read model (:mod:`kbtui.reads`), a report, or a plain value.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import io
import json
import logging
import os
import socket
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from pykka import ActorRef

from actors.faults import pause_point
from actors.runtime import NodeAlreadyRunning, Runtime
from actors.stage import PipelineContext
from actors.status_writer import published_admission, read_node_status
from kbtui import backups
from kbtui.config import Config
from kbtui.embedding import EmbeddingProvider, make_provider
from kbtui.embedding.reuse import CacheBounds, ChunkEmbeddingReuse, VectorCache
from kbtui.errors import OPERATOR_ERRORS, BlobCorrupt, KbtuiError, NotFound, PipelineHeldElsewhere
from kbtui.extract import SNIFF_BYTES, detect_format
from kbtui.follow import FollowResult, counting_in, follow_documents
from kbtui.ports import Storage
from kbtui.reads import (
    CatalogSnapshot,
    DocumentDetail,
    DocumentRow,
    DocumentText,
    NameCache,
    ReaderText,
    is_interrupted,
    load_document_detail,
    load_document_rows,
    read_document_text,
    read_reader_text,
)
from kbtui.retrieval.rerank import build_reranker, reranker_warmer
from kbtui.retrieval.search import (
    RERANKER_TARGET,
    SearchRequest,
    SearchResponse,
    SearchService,
)
from kbtui.sources.repositories import import_repository, register_repository
from kbtui.sources.scan import ScanLimits
from kbtui.sources.sync import OUTCOMES, SyncReport, inspect_path, preview_path, register_source, sync_source
from kbtui.sources.watch import SourceWatcher
from kbtui.storage import open_storage, schema_version
from store.doctor import PROBLEM, Examination, Progress, examination_json, examine_store
from store.errors import SourceAlreadyRegistered
from store.records import AddOutcome, ChunkRecord, NodeRecord, RegisteredSource, Status

log = logging.getLogger(__name__)

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _connected(method: Callable[Concatenate[Node, _P], _R]) -> Callable[Concatenate[Node, _P], _R]:
    """Run a use case in the calling thread's own store session."""

    @functools.wraps(method)
    def wrapper(node: Node, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with node.store.session():
            return method(node, *args, **kwargs)

    return wrapper


@dataclass(frozen=True)
class ReindexReport:
    """Documents queued again, those left alone because their encrypted
    source is damaged (id and a content-free reason), and ids of no document."""

    queued: tuple[str, ...]
    damaged: tuple[tuple[str, str], ...]
    not_found: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeStatus:
    """Whether a node runs for the data directory, what it last published, and
    documents by status."""

    running: bool
    published: dict[str, object] | None
    counts: dict[str, int]

    @property
    def interrupted(self) -> dict[str, int]:
        """Documents left mid-stage by a node that stopped, by status (they resume at the next start)."""
        return {s: n for s, n in self.counts.items() if n and is_interrupted(s, self.running)}


MIN_ID_PREFIX = 4
# An operator's add or sync of a source another process is scanning (a second
# `kbtui add`, the node's watcher) waits for that scan, then scans itself.
OPERATOR_SYNC_WAIT_S = 600.0
# How often an add that follows a node of another data directory (a shared
# PostgreSQL database) asks whether it may run the pipeline itself.
HELD_ELSEWHERE_RETRY_S = 5.0
# The reader shows up to this much of a document (the rest is said to be cut).
READER_MAX_CHARS = 4_000_000
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class DocumentMatch:
    """The document a reference named, and how: ``id``, ``id prefix`` or ``name``."""

    document_id: str
    matched_by: str


@dataclass(frozen=True)
class SourceRow:
    """A registered source, its documents by status, and how it is kept in sync."""

    source: RegisteredSource
    counts: dict[str, int]
    node_running: bool  # whether some node runs for the data directory (and so watches)
    # Documents kept although the last scan could not see their files, by reason.
    unreachable: dict[str, int] = field(default_factory=dict)

    @property
    def document_count(self) -> int:
        return sum(self.counts.values())

    @property
    def watch(self) -> str:
        """``off`` (by the operator), ``events`` or ``polling`` (how the running node
        watches it), or ``idle`` (watching on, but no node is running or it was never scanned)."""
        if not self.source.watching:
            return "off"
        if self.node_running and self.source.watch_state:
            return self.source.watch_state
        return "idle"


@dataclass(frozen=True)
class SourceSync:
    """A source as it stands after :meth:`Node.add_source`, and what its scan did."""

    row: SourceRow
    report: SyncReport


@dataclass(frozen=True)
class ChangedFile:
    path: str  # printable
    outcome: str  # added | updated | renamed | removed | skipped
    reason: str | None
    bytes: int
    previous_path: str | None


@dataclass(frozen=True)
class SourceChanges:
    """The last scan of a source, as kept with it: counts and the files that changed or were skipped."""

    status: str
    finished_at: float
    counts: dict[str, int]
    skipped: dict[str, int]
    files: tuple[ChangedFile, ...]

    @classmethod
    def from_json(cls, text: str) -> SourceChanges:
        data = json.loads(text)
        return cls(
            status=data["status"],
            finished_at=data.get("finished_at", 0.0),
            counts={name: data.get(name, {"count": 0})["count"] for name in OUTCOMES},
            skipped={reason: tally["count"] for reason, tally in data["skipped"].items()},
            files=tuple(
                ChangedFile(f["path"], f["outcome"], f["reason"], f["bytes"], f.get("previous_path"))
                for f in data["files"]
            ),
        )


@dataclass
class Node:
    config: Config
    store: Storage
    embedder: EmbeddingProvider
    searcher: SearchService
    reuse: ChunkEmbeddingReuse
    _runtime: Runtime | None = field(default=None, repr=False)
    names: NameCache = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.searcher.request_warm = self._request_warm
        self.names = NameCache(self.store)

    @classmethod
    def open(cls, config: Config, *, read_only: bool = False) -> Node:
        """Open the node's knowledge base; ``read_only`` for commands that only
        read (they never write the catalog, nor wait for the write lock)."""
        store = open_storage(config, read_only=read_only)
        if not read_only:
            # Only now: opening has refused any catalog not known to be whole.
            with store.session(), _single_runner(store, "blob-sweep") as mine:
                swept = store.catalog.sweep_orphan_blobs() if mine else 0
            if swept:
                log.info("removed %d orphan blob(s)", swept)
        embedder = build_embedder(config)
        reuse = ChunkEmbeddingReuse(
            VectorCache(
                CacheBounds(
                    ttl_s=config.embedding_cache_ttl_s,
                    max_entries=config.embedding_cache_max_entries,
                    max_bytes=config.embedding_cache_max_bytes,
                )
            ),
            store.vectors.committed_vectors,
        )
        searcher = SearchService(config, embedder, store, reranker=build_reranker(config))
        return cls(config, store, embedder, searcher, reuse)

    def close(self) -> None:
        try:
            self.searcher.close()
        finally:
            self.store.close()

    # ------------------------------------------------------------ the pipeline

    def pipeline(self, *, listeners: Sequence[ActorRef] = (), watch: bool = False) -> Runtime:
        """A (not yet started) actor pipeline for this node; with ``watch`` (a
        long-running node: ``kbtui serve``, the TUI) it also keeps the
        sources in sync (``source_watch`` in the config can turn that off)."""
        context = PipelineContext(store=self.store, config=self.config, embedder=self.embedder, reuse=self.reuse)
        warmers = {}
        if self.searcher.reranker is not None:
            warmers[RERANKER_TARGET] = reranker_warmer(self.searcher.reranker)
        companions = []
        if watch and self.config.source_watch != "off":
            companions.append(SourceWatcher(
                self.store, limits=self.source_scan_limits(), purge=self.purge, mode=self.config.source_watch,
                poll_interval_s=self.config.source_poll_interval_s, quiet_ms=self.config.source_watch_quiet_ms,
            ))
        self._runtime = Runtime(context, listeners=listeners, warmers=warmers, companions=companions)
        return self._runtime

    def _request_warm(self, target: str) -> None:
        """A search found the reranker cold: warm it in the background if this
        process runs the pipeline (search itself never starts it)."""
        if self._runtime is not None and self._runtime.running:
            self._runtime.request_warm(target)

    def pipeline_running(self) -> bool:
        """Whether some process (this one included) holds the node lock for the data directory."""
        return self.store.node_running()

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
            follow_documents(
                ids, show_progress=show_progress, stall_timeout_s=stall_timeout_s, count=counting_in(self.store.catalog)
            )
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
        held_elsewhere_until = 0.0

        def ensure_pipeline() -> None:
            nonlocal runtime, held_elsewhere_until
            if runtime is not None or self.pipeline_running() or time.monotonic() < held_elsewhere_until:
                return
            try:
                runtime = self.pipeline().start()
            except NodeAlreadyRunning:
                return  # another process won the race; follow it
            except PipelineHeldElsewhere:
                # A node of another data directory indexes this shared database: it
                # takes these Pending documents; follow it, and ask again now and then.
                held_elsewhere_until = time.monotonic() + HELD_ELSEWHERE_RETRY_S
                return
            for document_id in ids:
                runtime.admit(document_id)  # Busy is fine: the drain sweep admits it later

        try:
            ensure_pipeline()
            return follow_documents(
                ids, show_progress=show_progress, on_poll=ensure_pipeline, count=counting_in(self.store.catalog)
            )
        finally:
            if runtime is not None:
                runtime.stop()

    # ------------------------------------------------------------ adding

    @_connected
    def add_upload(self, data: bytes, collection_id: str, *, display_name: str) -> AddOutcome:
        """Store bytes that came without a path (stdin, a one-off upload) as a
        Pending document of ``collection_id``; the same bytes already there are
        that document (content de-duplication, as before sources). Content
        decides the format: bytes that are not text (and no PDF or DOCX by
        name) are refused with a content-free reason."""
        if len(data) > self.config.max_document_bytes:
            raise KbtuiError("the upload is larger than max_document_bytes")
        if not data:
            raise KbtuiError("the upload is empty")
        detected = detect_format(display_name, data[:SNIFF_BYTES])
        if detected.format is None:
            raise KbtuiError(f"the upload is not added: {detected.reason}")
        return self.store.catalog.add_upload(collection_id, data, display_name=display_name, fmt=detected.format)

    @_connected
    def add_at_path(
        self, data: bytes, collection_id: str, *, source_path: str, display_name: str, fmt: str
    ) -> AddOutcome | None:
        """Store ``data`` as the document at ``source_path`` (identified by the path,
        never de-duplicated by content). The same bytes already there are that
        document (a Failed one is queued again); None when the path holds other bytes."""
        content_hash = hashlib.sha256(data).hexdigest()
        existing = self.store.catalog.document_at(collection_id, source_path)
        if existing is None:
            document_id = self.store.catalog.create_document(
                collection_id, io.BytesIO(data), content_hash=content_hash,
                display_name=display_name, fmt=fmt, source_path=source_path,
            )
            return AddOutcome(document_id, True, Status.PENDING.value)
        if existing.content_hash != content_hash:
            return None
        if existing.status == Status.FAILED.value:
            self.store.catalog.mark_pending([existing.id])
            return AddOutcome(existing.id, False, Status.PENDING.value)
        return AddOutcome(existing.id, False, existing.status)

    # ------------------------------------------------------------ removing and re-indexing

    @_connected
    def remove(self, document_ids: Sequence[str]) -> int:
        """Delete documents (rows, index entries, ANN labels, encrypted source); how many existed."""
        return sum(self.purge(document_id) for document_id in dict.fromkeys(document_ids))

    @_connected
    def purge(self, document_id: str) -> bool:
        """The one way a document is deleted: the catalog first, then its ANN labels.
        False when it did not exist."""
        removed = self.store.catalog.purge_document(document_id)
        if removed:
            self.store.vectors.note_removed(removed)
        return removed is not None

    @_connected
    def reindex(self, document_ids: Sequence[str] | None = None, *, collection_id: str | None = None) -> ReindexReport:
        """Queue documents for ingestion again (None: every document, of
        ``collection_id`` when given). They keep serving until the new index commits.

        A document whose encrypted source fails authentication is left alone
        (it could only fail again, and its current index would be lost) and
        reported; an id of no document is reported as not found.
        """
        if document_ids is None:
            wanted = [record.id for record in self.store.catalog.documents(collection_id)]
            existing = set(wanted)
        else:
            wanted = list(dict.fromkeys(document_ids))
            existing = set(self.store.catalog.statuses(wanted))
        queued: list[str] = []
        damaged: list[tuple[str, str]] = []
        for document_id in wanted:
            if document_id not in existing:
                continue
            try:
                self.store.blobs.verify(document_id)
            except OPERATOR_ERRORS as problem:
                damaged.append((document_id, problem.message))
                continue
            queued.append(document_id)
        self.store.catalog.mark_pending(queued)
        not_found = tuple(d for d in wanted if d not in existing)
        return ReindexReport(tuple(queued), tuple(damaged), not_found)

    # ------------------------------------------------------------ reading

    @_connected
    def resolve(self, reference: str, collection_id: str | None = None) -> str:
        """The id of the document ``reference`` names (full id or unique prefix)."""
        return self.store.catalog.resolve_document(reference, collection_id).id

    @_connected
    def find_document(self, reference: str, collection_id: str | None = None) -> DocumentMatch:
        """The one document ``reference`` names: a full id, an id prefix of at
        least four characters, or a whole display name (exact, else ignoring case).

        Raises :class:`NotFound` (naming no file) when nothing or more than one
        document matches; an ambiguous answer lists the candidates' ids.
        """
        typed = reference.strip()
        if not typed:
            raise NotFound("no such document: give its name, its id or an id prefix of 4+ characters")
        lowered = typed.lower()
        by_id: list[str] = []
        if set(lowered) <= _HEX:
            if len(lowered) == 32:
                by_id = self.store.catalog.document_ids_with_prefix(lowered, collection_id, 1)
                if by_id and by_id[0] == lowered:
                    return DocumentMatch(lowered, "id")
            elif len(lowered) >= MIN_ID_PREFIX:
                by_id = self.store.catalog.document_ids_with_prefix(lowered, collection_id, 6)
        rows = load_document_rows(self.store, self.names, collection_id)
        by_name = [r.document_id for r in rows if r.name == typed] or [
            r.document_id for r in rows if r.name.casefold() == typed.casefold()
        ]
        candidates = list(dict.fromkeys(by_id + by_name))
        if len(candidates) == 1:
            return DocumentMatch(candidates[0], "id prefix" if by_id else "name")
        if candidates:
            listed = ", ".join(c[:12] for c in candidates[:5]) + (", ..." if len(candidates) > 5 else "")
            raise NotFound(f"{len(candidates)} documents match; give more of the id: {listed}")
        if set(lowered) <= _HEX and len(lowered) < MIN_ID_PREFIX:
            raise NotFound(f"no such document: an id prefix needs at least {MIN_ID_PREFIX} characters")
        raise NotFound("no such document: give its whole name, its id or an id prefix of 4+ characters")

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
            self.store, self.names, collection_id, status, updated_since=updated_since, document_ids=document_ids
        )

    @_connected
    def document(self, document_id: str) -> DocumentRow:
        found = load_document_rows(self.store, self.names, None, document_ids=[document_id])
        if not found:
            raise NotFound("no such document")
        return found[0]

    @_connected
    def detail(self, document_id: str) -> DocumentDetail | None:
        """Row, versions, history, sections and chunks of one document (None if
        gone), and whether its encrypted source still authenticates."""
        detail = load_document_detail(self.store, self.names, document_id)
        if detail is None:
            return None
        return dataclasses.replace(detail, source_problem=self._source_problem(document_id))

    def _source_problem(self, document_id: str) -> str | None:
        try:
            self.store.blobs.verify(document_id)  # streamed: one segment in memory
        except BlobCorrupt:
            return "source_damaged"
        except OSError:
            return "source_unreadable"
        return None

    @_connected
    def ocr_low_document_ids(self, collection_id: str | None = None) -> list[str]:
        """Documents with a page OCR read under [ocr] low_confidence (``kbtui ls --ocr-low``)."""
        return self.store.catalog.low_confidence_document_ids(self.config.ocr.low_confidence, collection_id)

    @_connected
    def document_text(self, document_id: str, collection_id: str, max_chars: int) -> DocumentText | None:
        """Up to ``max_chars`` of a served document's text, stitched from its chunks."""
        return read_document_text(
            self.store, document_id, collection_id, max_chars, overlap_limit=self.config.chunking.overlap_chars
        )

    @_connected
    def reader_text(self, document_id: str, collection_id: str, max_chars: int = READER_MAX_CHARS) -> ReaderText | None:
        """A served document's whole text (up to ``max_chars``) with where each
        chunk and heading starts: what the terminal UI's reader shows."""
        return read_reader_text(
            self.store, document_id, collection_id, max_chars, overlap_limit=self.config.chunking.overlap_chars
        )

    @_connected
    def neighbours(self, chunk_id: str, collection_id: str, window: int) -> list[ChunkRecord]:
        """A served chunk and up to ``window`` chunks each side, in document order."""
        return self.store.chunks.neighbours(chunk_id, collection_id, window)

    @_connected
    def display_names(self, document_ids: Sequence[str]) -> dict[str, str]:
        """The operator's own file names for these documents (never for hits or tools)."""
        return self.names.names_of(document_ids)

    @_connected
    def collections(self) -> list[str]:
        return self.store.catalog.list_collections()

    @_connected
    def collection_exists(self, collection_id: str) -> bool:
        return self.store.catalog.collection_exists(collection_id)

    @_connected
    def status(self) -> NodeStatus:
        running = self.pipeline_running()
        return NodeStatus(
            running, read_node_status(self.config.home) if running else None, self.store.catalog.status_counts()
        )

    def node_id(self) -> str:
        """This node's id: on a shared store the one it is known by there (its data
        directory's ``node.id``); on SQLite a stable id of the data directory."""
        coordination = self.store.coordination
        if coordination is not None:
            return coordination.node_id
        with contextlib.suppress(OSError, UnicodeDecodeError):
            text = (self.config.home / "node.id").read_text(encoding="ascii").strip()
            if len(text) == 32 and set(text) <= _HEX:
                return text
        return hashlib.sha256(str(self.config.home.absolute()).encode()).hexdigest()[:32]

    @_connected
    def nodes(self) -> list[NodeRecord]:
        """Every node of the knowledge base, most recently started first: on a
        shared store each that has joined it (times on the server's clock); on
        SQLite the one node of this data directory, running or not."""
        coordination = self.store.coordination
        if coordination is not None:
            return coordination.nodes()
        home = self.config.home
        running = self.pipeline_running()
        published = read_node_status(home) or {}

        def number(key: str) -> float | None:
            value = published.get(key)
            return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

        def modified(name: str) -> float | None:
            try:
                return os.stat(home / name).st_mtime
            except OSError:
                return None

        # The node lock's file is rewritten (its pid) when a node takes it: its start.
        started = modified("node.lock") or 0.0
        # The status file is rewritten at each drain tick and once more at stop.
        last_seen = number("written_at") or modified("node-status.json") or started
        pid = number("pid") if running else None
        embedder = self.embedder
        identity = embedder.identity.canonical() if getattr(embedder, "identity_confident", True) else None
        window = 60.0
        since = time.time() - window
        recent = self.store.catalog.documents(status=Status.INDEXED.value, updated_since=since)
        chunks = sum(d.chunk_count for d in recent if d.indexed_at is not None and d.indexed_at >= since)
        return [NodeRecord(
            id=self.node_id(), host=socket.gethostname(), pid=int(pid or 0), role="pipeline",
            model_identity=identity, started_at=started, heartbeat_at=max(last_seen, started),
            stopped_at=None if running else max(last_seen, started), in_flight=int(number("in_flight") or 0)
            if running else 0, alive=running, chunks_per_s=chunks / window if running else 0.0,
        )]

    @_connected
    def snapshot(self, collection_id: str, *, with_queue: bool) -> CatalogSnapshot:
        """The cheap look the terminal UI takes once a second (and the running
        node's published queue, when asked for)."""
        running = self.pipeline_running()
        queue = published_admission(self.config.home) if with_queue and running else None
        return CatalogSnapshot(
            collection_id=collection_id,
            stamp=self.store.catalog.catalog_stamp(collection_id),
            status_counts=tuple(sorted(self.store.catalog.status_counts(collection_id).items())),
            queue=queue,
            collections=tuple(self.store.catalog.list_collections()),
            node_running=running,
            indexed_chunks=self.store.catalog.indexed_chunk_total(collection_id),
            ocr_pages_last_minute=self.store.catalog.ocr_pages_read_recently(collection_id),
        )

    @_connected
    def statuses(self, document_ids: Sequence[str]) -> dict[str, str]:
        return self._statuses(document_ids)

    def _statuses(self, document_ids: Sequence[str]) -> dict[str, str]:
        return self.store.catalog.statuses(document_ids)

    # ------------------------------------------------------------ search

    @_connected
    def search(
        self, query: str, collection_id: str, *, limit: int | None = None, document_id: str | None = None,
        expand_neighbors: bool = False, per_document: bool = False, min_relevance: float | None = None,
    ) -> SearchResponse:
        """Search one collection, or every one (``ALL_COLLECTIONS``): chunk hits,
        or with ``per_document`` each document's best chunk (and how many more
        of its chunks ranked); hits below ``min_relevance`` (0..1) are dropped,
        and with none given, those below the similarity floor (counted in ``hidden``).
        An empty ``document_id`` is refused: it must never mean "every document"."""
        if document_id is not None and not document_id.strip():
            raise KbtuiError("document_id: an empty document id (give one, or none to search every document)")
        return self.searcher.search(
            SearchRequest(
                query=query, collection_id=collection_id, limit=limit or self.config.search_limit,
                document_id=document_id, expand_neighbors=expand_neighbors, per_document=per_document,
                min_relevance=min_relevance,
            )
        )

    # ------------------------------------------------------------ sources

    def source_scan_limits(self) -> ScanLimits:
        """The configured per-file and aggregate byte limits of a source scan."""
        return scan_limits(self.config)

    @_connected
    def add_source(
        self,
        path: Path,
        collection_id: str,
        *,
        name: str | None = None,
        include_sensitive: bool = False,
        on_progress: Callable[[int, int], object] | None = None,
    ) -> SourceSync:
        """Register ``path`` (a folder, a file, or a Git working tree's top level)
        as a source of ``collection_id`` - or find it registered there - and scan
        it. Writes Pending rows only; :meth:`index_and_follow` or a running
        node indexes them. ``include_sensitive`` is the only way sensitive
        files (keys, ``.env``, ...) get in, and it stays with the source."""
        spec = inspect_path(path, home=self.config.home)
        source = self.store.sources.find_source(str(spec.root), collection_id)
        if source is None:
            try:
                source = register_source(
                    self.store, spec, collection_id, name=name, include_sensitive=include_sensitive
                )
            except SourceAlreadyRegistered:
                # Another process registered it meanwhile (two adds at once): use theirs.
                source = self.store.sources.find_source(str(spec.root), collection_id)
                if source is None:
                    raise
        if include_sensitive and not source.include_sensitive:
            self.store.sources.set_include_sensitive(source.id, True)
        report = self.sync_source(source.id, on_progress=on_progress)
        return SourceSync(self._source_row(self.store.sources.get_source(source.id)), report)

    def preview_source(
        self, path: Path, collection_id: str, *, include_sensitive: bool = False,
        on_progress: Callable[[int, int], object] | None = None,
    ) -> SyncReport:
        """What :meth:`add_source` would do, without writing anything (``--dry-run``)."""
        spec = inspect_path(path, home=self.config.home)
        with self.store.session():
            source = self.store.sources.find_source(str(spec.root), collection_id)
            if source is not None:
                return self.sync_source(source.id, dry_run=True, on_progress=on_progress)
        return preview_path(
            spec, collection_id, self.source_scan_limits(), home=self.config.home,
            include_sensitive=include_sensitive, on_progress=on_progress,
        )

    @_connected
    def sources(self, collection_id: str | None = None) -> list[SourceRow]:
        """Registered sources with their documents by status (oldest first)."""
        running = self.pipeline_running()
        counts = self.store.sources.document_counts()
        unreachable = self.store.sources.unreachable_documents()
        return [
            SourceRow(s, counts.get(s.id, {}), running, _by_reason(unreachable.get(s.id, {})))
            for s in self.store.sources.list_sources(collection_id)
        ]

    @_connected
    def resolve_source(self, reference: str, collection_id: str | None = None) -> SourceRow:
        """A source by id, unique id prefix or name (``collection_id`` narrows a name)."""
        return self._source_row(self.store.sources.resolve_source(reference, collection_id))

    def _source_row(self, source: RegisteredSource) -> SourceRow:
        return SourceRow(
            source, self.store.sources.document_counts(source.id).get(source.id, {}), self.pipeline_running(),
            _by_reason(self.store.sources.unreachable_documents(source.id).get(source.id, {})),
        )

    @_connected
    def sync_source(
        self, source_id: str, *, dry_run: bool = False, prune: bool = False,
        on_progress: Callable[[int, int], object] | None = None,
    ) -> SyncReport:
        """Rescan a source: add, update in place, rename, leave, and purge what
        is proven gone (what cannot be seen is kept and flagged unreachable).
        ``prune`` also removes what cannot be seen, on the operator's word.
        Writes Pending rows only (nothing with ``dry_run``)."""
        return sync_source(
            self.store, source_id, self.source_scan_limits(), purge=self.purge, dry_run=dry_run, prune=prune,
            on_progress=on_progress, wait_s=OPERATOR_SYNC_WAIT_S,
        )

    @_connected
    def remove_source(self, source_id: str, *, purge: bool = True) -> int:
        """Forget a source; with ``purge`` (the default) also delete its documents
        (else they stay as documents of no source). Returns how many were purged."""
        return self.store.sources.unregister_source(source_id, purge=self.purge if purge else None)

    @_connected
    def set_source_watching(self, source_id: str, watching: bool) -> SourceRow:
        """Turn watching a source on or off (a running node follows within seconds)."""
        self.store.sources.set_watching(source_id, watching)
        return self._source_row(self.store.sources.get_source(source_id))

    @_connected
    def source_changes(self, source_id: str) -> SourceChanges | None:
        """What the source's last scan added, updated, renamed, removed and skipped (with reasons)."""
        text = self.store.sources.last_scan_report(source_id)
        return None if text is None else SourceChanges.from_json(text)

    # ------------------------------------------------------------ Git repositories (the older words for Git sources)

    @_connected
    def register_repository(self, path: Path, name: str | None = None) -> RegisteredSource:
        """Register ``path``, the top level of a Git working tree, for imports (not scanned yet)."""
        return register_repository(self.store, path, name)

    @_connected
    def repositories(self) -> list[SourceRow]:
        return [row for row in self.sources() if row.source.kind == "git"]

    @_connected
    def resolve_repository(self, reference: str) -> SourceRow:
        """A Git source by id, unique id prefix or name."""
        try:
            row = self.resolve_source(reference)
        except NotFound:
            raise NotFound("no such repository") from None
        if row.source.kind != "git":
            raise NotFound("no such repository")
        return row

    @_connected
    def unregister_repository(self, repository_id: str, *, purge: bool) -> int:
        """Forget a registration; with ``purge`` also delete what it imported
        (else its documents stay, as ordinary documents). Returns how many were purged."""
        return self.remove_source(repository_id, purge=purge)

    def repository_scan_limits(self) -> ScanLimits:
        return self.source_scan_limits()

    @_connected
    def import_repository(
        self, repository_id: str, collection_id: str, *, on_progress: Callable[[int, int], object] | None = None
    ) -> SyncReport:
        """Bring ``collection_id`` in line with a registered repository (its Git
        source in that collection). Writes Pending rows only."""
        return import_repository(
            self.store, repository_id, collection_id, self.source_scan_limits(),
            purge=self.purge, on_progress=on_progress, wait_s=OPERATOR_SYNC_WAIT_S,
        )


def _by_reason(documents: dict[str, str]) -> dict[str, int]:
    return dict(Counter(documents.values()))


def scan_limits(config: Config) -> ScanLimits:
    """The configured per-file and aggregate byte limits of a source scan."""
    return ScanLimits(
        max_file_bytes=min(config.repository_max_file_bytes, config.max_document_bytes),
        max_total_bytes=config.repository_max_total_bytes,
    )


def preview_unregistered(
    config: Config, path: Path, collection_id: str, *, include_sensitive: bool = False
) -> SyncReport:
    """A dry run of adding ``path`` where there is no knowledge base yet: nothing is opened or created."""
    spec = inspect_path(path, home=config.home)
    return preview_path(spec, collection_id, scan_limits(config), home=config.home, include_sensitive=include_sensitive)


def examine_data_directory(config: Config, *, quick: bool = False, progress: Progress | None = None) -> Examination:
    """What ``kbtui doctor`` reports: the data directory checked (catalog, key,
    modes, sources, vector indexes), or on PostgreSQL the server, schema, key,
    sources and counts, without opening a node or changing anything. Every
    encrypted source is authenticated unless ``quick``."""
    return examine_store(config.home, config.database_url, quick=quick, progress=progress)


# ------------------------------------------------------------ backups (kbtui.backups)

# What the backup use cases report, for the faces.
BackupReport, VerifyReport, RestoreReport = backups.BackupReport, backups.VerifyReport, backups.RestoreReport
verify_backup, upgrade_blobs = backups.verify, backups.upgrade_blobs


def back_up(
    config: Config, destination: Path, *, incremental: bool = False, with_key: bool = False,
    on_progress: backups.Progress | None = None,
) -> backups.BackupReport:
    """``kbtui backup``: an online backup of the data directory (a node may run)."""
    return backups.back_up(
        config, destination, incremental=incremental, with_key=with_key,
        on_progress=_pause_halfway("backup", "sources", on_progress),
    )


def restore_backup(
    config: Config, backup: Path, *, key_file: Path | None = None, on_progress: backups.Progress | None = None
) -> backups.RestoreReport:
    """``kbtui restore``: a verified backup into the empty data directory."""
    return backups.restore(config, backup, key_file=key_file, on_progress=_pause_halfway("restore", "sources", on_progress))


@dataclass(frozen=True)
class Recovery:
    """What ``kbtui recover`` did: the catalog rebuilt from the sources, and
    each recovered document's status once indexing was followed."""

    report: backups.RecoverReport
    statuses: dict[str, str]
    complete: bool  # every recovered document Indexed or Failed (recover.partial removed)


def recover_data_directory(
    config: Config, source: Path, *, key_file: Path | None = None,
    on_progress: backups.Progress | None = None, show_progress: bool | None = None,
) -> Recovery:
    """``kbtui recover``: rebuild a catalog in the (new) data directory from the
    sources in ``source`` and the key, then extract and embed them again. A
    re-run after an interruption goes on where it stopped."""
    report = backups.rebuild_catalog(
        config, source, key_file=key_file, on_progress=_pause_halfway("recover", "catalog", on_progress)
    )
    node = Node.open(config)
    try:
        waiting = [i for i, status in node.statuses(report.documents).items() if not Status(status).terminal]
        if waiting:
            node.index_and_follow(waiting, show_progress=show_progress)
        statuses = node.statuses(report.documents)
    finally:
        node.close()
    complete = all(Status(status).terminal for status in statuses.values())
    if complete:
        backups.finish_recovery(config.home)
    return Recovery(report, statuses, complete)


def migrate_store(
    config: Config, target: str, *, on_progress: backups.Progress | None = None
) -> backups.MigrationReport:
    """``kbtui migrate``: copy the knowledge base to the other store, embedding nothing again."""
    return backups.migrate(config, target, on_progress=_pause_halfway("migrate", "chunks", on_progress))


def _pause_halfway(point: str, stage_name: str, on_progress: backups.Progress | None) -> backups.Progress:
    """Report progress, and halfway through ``stage_name`` stop at the crash tests' pause point
    (at the first report past half: a copy in batches reports every few hundred rows)."""

    def progress(stage: str, done: int, total: int) -> None:
        if on_progress is not None:
            on_progress(stage, done, total)
        if stage == stage_name and done >= max(1, total // 2):
            pause_point(point)

    return progress


__all__ = [
    "PROBLEM", "AddOutcome", "BackupReport", "Node", "Recovery", "RestoreReport", "VerifyReport", "back_up",
    "examination_json", "examine_data_directory", "migrate_store", "preview_unregistered", "recover_data_directory",
    "restore_backup", "scan_limits", "upgrade_blobs", "verify_backup",
]


@dataclass(frozen=True)
class VersionFacts:
    """What ``kbtui --version`` says."""

    version: str
    schema_version: int  # the catalog schema this kbtui reads and writes (an older one is upgraded)
    model_identity: str  # the configured embedding model's canonical vector identity


def version_facts(config: Config) -> VersionFacts:
    """This kbtui's version, its catalog schema, and the vector identity of the configured
    embedding model (its weights' digest; ``unresolved`` when a server does not answer).
    Opens nothing in the data directory."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("kbtui")
    except PackageNotFoundError:
        installed = "unknown"
    return VersionFacts(installed, schema_version(config), build_embedder(config).identity.canonical())


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
        local_only=not config.allow_cloud_model_access,
    )


def _single_runner(store: Storage, job: str) -> AbstractContextManager[bool]:
    """Whether this process runs ``job`` now: always alone on SQLite; one node at a time on a shared store."""
    coordination = store.coordination
    return contextlib.nullcontext(True) if coordination is None else coordination.single_runner(job)
