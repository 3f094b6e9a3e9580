"""What the screens show, read from the store: frozen rows built in worker threads.

Every function here touches the database, so it runs inside a thread worker
(wrapped in :func:`store.db.thread_connection`), never on the UI loop.
Display names are decrypted for the operator's eyes only; they are never
logged and never leave the UI.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from actors.status_writer import published_admission
from kbtui.messages import CatalogSnapshot
from kbtui.printable import printable
from store import Store, catalog
from store.blobs import open_name
from store.db import database
from store.models import Chunk, Document, Section, StatusHistory
from store.node_lock import node_running


@dataclass(frozen=True)
class DocumentRow:
    """One line of the Documents screen."""

    document_id: str
    name: str
    status: str
    progress: float
    reason: str | None
    size_bytes: int
    chunk_count: int
    updated_at: float
    source_path: str | None


class NameCache:
    """Decrypted display names by document id (a document's name never changes)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._names: dict[str, str] = {}

    def name(self, document_id: str, sealed: bytes) -> str:
        cached = self._names.get(document_id)
        if cached is None:
            try:
                cached = printable(open_name(self._store.node_key, document_id, bytes(sealed)))
            except Exception:  # noqa: BLE001 - a damaged name must not hide the document
                cached = f"(unreadable name) {document_id[:12]}"
            self._names[document_id] = cached
        return cached


def load_document_rows(
    names: NameCache, collection_id: str, status: str | None = None, *, updated_since: float | None = None
) -> list[DocumentRow]:
    """Every document of ``collection_id`` (optionally of one status, or only those
    updated at or after ``updated_since``), oldest first."""
    query = (
        Document.select(
            Document.id, Document.display_name, Document.status, Document.progress, Document.failure_reason,
            Document.size_bytes, Document.chunk_count, Document.updated_at, Document.source_path,
        )
        .where(Document.collection == collection_id)
        .order_by(Document.created_at, Document.id)
    )
    if status is not None:
        query = query.where(Document.status == status)
    if updated_since is not None:
        query = query.where(Document.updated_at >= updated_since)
    return [
        DocumentRow(
            document_id=doc_id, name=names.name(doc_id, sealed), status=doc_status, progress=progress or 0.0,
            reason=reason, size_bytes=size, chunk_count=chunks, updated_at=updated, source_path=source_path,
        )
        for doc_id, sealed, doc_status, progress, reason, size, chunks, updated, source_path in query.tuples()
    ]


def catalog_stamp(collection_id: str) -> tuple[int, float]:
    """A cheap change stamp: (row count, newest updated_at) of the collection."""
    count, newest = database.execute_sql(
        "SELECT count(*), COALESCE(max(updated_at), 0) FROM document WHERE collection_id = ?", [collection_id]
    ).fetchone()
    return int(count), float(newest)


def poll_catalog(collection_id: str, home: Path, *, read_node_status: bool) -> CatalogSnapshot:
    """Look at the database the cheap way (and at the running node's status file)."""
    counts = catalog.status_counts(collection_id)
    running = node_running(home)
    queue = published_admission(home) if read_node_status and running else None
    return CatalogSnapshot(
        collection_id=collection_id,
        stamp=catalog_stamp(collection_id),
        status_counts=tuple(sorted(counts.items())),
        queue=queue,
        collections=tuple(catalog.list_collections()),
        node_running=running,
    )


# ---------------------------------------------------------------- document detail


@dataclass(frozen=True)
class HistoryEntry:
    status: str
    reason: str | None
    at: float


@dataclass(frozen=True)
class SectionEntry:
    ordinal: int
    heading_path: str
    level: int
    page: int | None
    start_offset: int
    end_offset: int


@dataclass(frozen=True)
class ChunkEntry:
    ordinal: int
    chunk_id: str
    heading_path: str
    kind: str
    page: int | None
    start_offset: int
    end_offset: int
    token_estimate: int
    preview: str


@dataclass(frozen=True)
class DocumentDetail:
    document_id: str
    collection_id: str
    name: str
    status: str
    reason: str | None
    progress: float
    format: str
    source_path: str | None
    size_bytes: int
    chunk_count: int
    vector_identity: str | None
    vector_dim: int | None
    parser_version: int | None
    chunker_version: int | None
    created_at: float
    updated_at: float
    indexed_at: float | None
    history: tuple[HistoryEntry, ...]
    sections: tuple[SectionEntry, ...]
    chunks: tuple[ChunkEntry, ...]


MAX_DETAIL_CHUNKS = 2000
PREVIEW_CHARS = 120


def load_document_detail(names: NameCache, document_id: str) -> DocumentDetail | None:
    """Everything the detail screen shows about one document (None if it is gone)."""
    doc = Document.get_or_none(Document.id == document_id)
    if doc is None:
        return None
    history = tuple(
        HistoryEntry(h.status, h.reason, h.at)
        for h in StatusHistory.select().where(StatusHistory.document == document_id).order_by(StatusHistory.id)
    )
    sections = tuple(
        SectionEntry(s.ordinal, printable(s.heading_path), s.level, s.page, s.start_offset, s.end_offset)
        for s in Section.select().where(Section.document == document_id).order_by(Section.ordinal)
    )
    chunk_query = (
        Chunk.select(
            Chunk.ordinal, Chunk.chunk_uid, Chunk.heading_path, Chunk.kind, Chunk.page, Chunk.start_offset,
            Chunk.end_offset, Chunk.token_estimate, Chunk.content,
        )
        .where(Chunk.document == document_id)
        .order_by(Chunk.ordinal)
        .limit(MAX_DETAIL_CHUNKS)
    )
    chunks = tuple(
        ChunkEntry(ordinal, uid, printable(heading), kind, page, start, end, tokens,
                   printable(" ".join(content[: PREVIEW_CHARS * 2].split())[:PREVIEW_CHARS]))
        for ordinal, uid, heading, kind, page, start, end, tokens, content in chunk_query.tuples()
    )
    return DocumentDetail(
        document_id=doc.id,
        collection_id=doc.collection_id,
        name=names.name(doc.id, doc.display_name),
        status=doc.status,
        reason=doc.failure_reason,
        progress=doc.progress or 0.0,
        format=doc.format,
        source_path=None if doc.source_path is None else printable(doc.source_path),
        size_bytes=doc.size_bytes,
        chunk_count=doc.chunk_count,
        vector_identity=doc.vector_identity,
        vector_dim=doc.vector_dim,
        parser_version=doc.parser_version,
        chunker_version=doc.chunker_version,
        created_at=doc.created_at,
        updated_at=doc.updated_at,
        indexed_at=doc.indexed_at,
        history=history,
        sections=sections,
        chunks=chunks,
    )
