"""Read models: what every face shows, read from the store as frozen values.

The CLI, the terminal UI, the agent tools and the local API all show the same
documents, details and texts; they get them from here (through
:class:`kbtui.node.Node`), never from the peewee models. Every function
touches the database, so the caller holds a connection for its thread (the
node's use cases do that for them).

Display names are decrypted for the operator's eyes only; they are never
logged and never reach a search hit or an agent tool result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from actors.events import AdmissionChanged
from kbtui.chunking import HEADING_SEPARATOR
from kbtui.printable import printable
from store import Store
from store.blobs import open_name
from store.chunks import CHUNK_COLUMNS, SCOPED_SQL, ChunkRecord, chunk_record
from store.db import database
from store.models import SERVED_DOCUMENT_SQL, Chunk, Document, Section, StatusHistory
from store.models import Status as Status  # re-exported: the statuses, for faces that name them

# ---------------------------------------------------------------- documents


@dataclass(frozen=True)
class DocumentRow:
    """One document as every list shows it (the JSON shape is in README.md)."""

    document_id: str
    collection_id: str
    name: str  # decrypted: the operator's own view (make it printable before showing it)
    status: str
    reason: str | None
    progress: float
    format: str
    source_path: str | None
    size_bytes: int
    chunk_count: int
    vector_identity: str | None
    created_at: float
    updated_at: float
    indexed_at: float | None


# Statuses a document holds only while a node works on it.
IN_STAGES = (Status.EXTRACTING.value, Status.CHUNKING.value, Status.EMBEDDING.value)


def is_interrupted(status: str, node_running: bool) -> bool:
    """A document left mid-stage by a node that stopped: it resumes at the next start."""
    return not node_running and status in IN_STAGES


class NameCache:
    """Decrypted display names by document id (a document's name never changes)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._names: dict[str, str] = {}

    def name(self, document_id: str, sealed: bytes) -> str:
        cached = self._names.get(document_id)
        if cached is None:
            try:
                cached = open_name(self._store.node_key, document_id, bytes(sealed))
            except Exception:  # noqa: BLE001 - a damaged name must not hide the document
                cached = f"(unreadable name) {document_id[:12]}"
            self._names[document_id] = cached
        return cached

    def names_of(self, document_ids: Sequence[str]) -> dict[str, str]:
        """Names for ``document_ids`` (those that still exist)."""
        wanted = sorted(set(document_ids) - self._names.keys())
        for start in range(0, len(wanted), 500):
            rows = Document.select(Document.id, Document.display_name).where(
                Document.id.in_(wanted[start : start + 500])
            ).tuples()
            for document_id, sealed in rows:
                self.name(document_id, sealed)
        return {d: self._names[d] for d in document_ids if d in self._names}


_ROW_FIELDS = (
    Document.id, Document.collection, Document.display_name, Document.status, Document.failure_reason,
    Document.progress, Document.format, Document.source_path, Document.size_bytes, Document.chunk_count,
    Document.vector_identity, Document.created_at, Document.updated_at, Document.indexed_at,
)


def _row(names: NameCache, values: tuple) -> DocumentRow:
    (doc_id, collection_id, sealed, status, reason, progress, fmt, source_path, size, chunks,
     identity, created, updated, indexed) = values
    return DocumentRow(
        document_id=doc_id, collection_id=collection_id, name=names.name(doc_id, sealed), status=status,
        reason=reason, progress=progress or 0.0, format=fmt, source_path=source_path, size_bytes=size,
        chunk_count=chunks, vector_identity=identity, created_at=created, updated_at=updated, indexed_at=indexed,
    )


def load_document_rows(
    names: NameCache,
    collection_id: str | None,
    status: str | None = None,
    *,
    updated_since: float | None = None,
    document_ids: Sequence[str] | None = None,
) -> list[DocumentRow]:
    """Documents oldest first: of one collection (None: all), optionally of one
    status, updated at or after ``updated_since``, or among ``document_ids``."""
    query = Document.select(*_ROW_FIELDS).order_by(Document.created_at, Document.id)
    if collection_id is not None:
        query = query.where(Document.collection == collection_id)
    if status is not None:
        query = query.where(Document.status == status)
    if updated_since is not None:
        query = query.where(Document.updated_at >= updated_since)
    if document_ids is None:
        return [_row(names, values) for values in query.tuples()]
    rows: dict[str, DocumentRow] = {}
    ids = list(dict.fromkeys(document_ids))
    for start in range(0, len(ids), 500):
        for values in query.where(Document.id.in_(ids[start : start + 500])).tuples():
            rows[values[0]] = _row(names, values)
    return [rows[d] for d in ids if d in rows]


def document_ids_with_prefix(prefix: str, collection_id: str | None, limit: int) -> list[str]:
    """Up to ``limit`` ids starting with ``prefix`` (lower-case hex), of one collection or all."""
    query = Document.select(Document.id).where(Document.id.startswith(prefix)).order_by(Document.id).limit(limit)
    if collection_id is not None:
        query = query.where(Document.collection == collection_id)
    return [row.id for row in query]


def status_counts(collection_id: str | None = None) -> dict[str, int]:
    """How many documents are in each status (of one collection, or all)."""
    sql = "SELECT status, count(*) FROM document"
    params: list[object] = []
    if collection_id is not None:
        sql += " WHERE collection_id = ?"
        params.append(collection_id)
    return dict(database.execute_sql(sql + " GROUP BY status", params).fetchall())


def catalog_stamp(collection_id: str) -> tuple[int, float]:
    """A cheap change stamp: (row count, newest updated_at) of the collection."""
    count, newest = database.execute_sql(
        "SELECT count(*), COALESCE(max(updated_at), 0) FROM document WHERE collection_id = ?", [collection_id]
    ).fetchone()
    return int(count), float(newest)


def indexed_chunk_total(collection_id: str) -> int:
    """How many chunks the collection's Indexed documents have (chunks/s is its rate)."""
    (total,) = database.execute_sql(
        "SELECT COALESCE(sum(chunk_count), 0) FROM document WHERE collection_id = ? AND status = ?",
        [collection_id, Status.INDEXED.value],
    ).fetchone()
    return int(total)


@dataclass(frozen=True)
class CatalogSnapshot:
    """What a cheap look at the catalog saw: a change stamp for one collection,
    its status counts, the running node's queue (when asked for), the
    collections, and whether some process runs the node."""

    collection_id: str
    stamp: tuple[int, float]
    status_counts: tuple[tuple[str, int], ...]
    queue: AdmissionChanged | None
    collections: tuple[str, ...]
    node_running: bool
    indexed_chunks: int = 0


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
    """Everything about one document: its row, versions, history, sections, chunks."""

    row: DocumentRow
    vector_dim: int | None
    parser_version: int | None
    chunker_version: int | None
    history: tuple[HistoryEntry, ...]
    sections: tuple[SectionEntry, ...]
    chunks: tuple[ChunkEntry, ...]
    # Why its encrypted source cannot serve a re-index (a reason code), or None: it authenticates.
    source_problem: str | None = None

    @property
    def document_id(self) -> str:
        return self.row.document_id

    @property
    def name(self) -> str:
        return self.row.name


MAX_DETAIL_CHUNKS = 2000
PREVIEW_CHARS = 120


def load_document_detail(names: NameCache, document_id: str) -> DocumentDetail | None:
    """Everything the detail views show about one document (None if it is gone)."""
    found = load_document_rows(names, None, document_ids=[document_id])
    if not found:
        return None
    vector_dim, parser_version, chunker_version = (
        Document.select(Document.vector_dim, Document.parser_version, Document.chunker_version)
        .where(Document.id == document_id).tuples().first()
    ) or (None, None, None)
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
        found[0], vector_dim, parser_version, chunker_version, history=history, sections=sections, chunks=chunks
    )


# ---------------------------------------------------------------- served text


@dataclass(frozen=True)
class DocumentText:
    collection_id: str
    document_id: str
    source_path: str
    first_heading_path: str
    text: str
    truncated: bool


def read_neighbours(chunk_id: str, collection_id: str, window: int) -> list[ChunkRecord]:
    """The chunk ``chunk_id`` and up to ``window`` chunks each side, in document order.

    Empty when the chunk does not exist, belongs to another collection, or its
    document is not served. Scoped twice, like the search arms: the chunk's
    collection and its document's collection must both be the requested one.
    """
    rows = database.execute_sql(
        "WITH target AS ("
        "  SELECT c.document_id, c.ordinal FROM chunk AS c JOIN document AS d ON d.id = c.document_id"
        f"  WHERE c.chunk_uid = ? AND {SCOPED_SQL}"
        f") SELECT {CHUNK_COLUMNS} FROM chunk AS c JOIN document AS d ON d.id = c.document_id "
        "JOIN target AS t ON c.document_id = t.document_id "
        f"WHERE {SCOPED_SQL} AND c.ordinal BETWEEN t.ordinal - ? AND t.ordinal + ? ORDER BY c.ordinal",
        [chunk_id, collection_id, collection_id, collection_id, collection_id, window, window],
    ).fetchall()
    return [chunk_record(row) for row in rows]


def read_document_text(document_id: str, collection_id: str, max_chars: int, *, overlap_limit: int) -> DocumentText | None:
    """Up to ``max_chars`` of a document's text, stitched from its chunks in order.

    None when the document does not exist, belongs to another collection, or
    is not served. Reading stops as soon as the bound is passed, so a huge
    document costs no more than a small one. Each read is a single statement,
    so it sees one snapshot even while the document is being re-indexed.
    """
    stitched = _stitch(document_id, collection_id, max_chars, overlap_limit)
    if stitched is None:
        return None
    document, stitcher, first_heading = stitched
    text = stitcher.text()
    return DocumentText(
        collection_id=document[1], document_id=document[0], source_path=document[2],
        first_heading_path=first_heading, text=text[:max_chars], truncated=len(text) > max_chars,
    )


@dataclass(frozen=True)
class ReaderMark:
    """A place in a :class:`ReaderText`: where a chunk's text or a heading line starts."""

    offset: int
    chunk_id: str
    heading_path: str
    symbol: str | None
    page: int | None


@dataclass(frozen=True)
class ReaderText:
    """A served document's whole text for reading, with where each chunk and
    each heading line starts in it (headings are lines of their own, ``# A > B``)."""

    document_id: str
    collection_id: str
    source_path: str
    text: str
    chunks: tuple[ReaderMark, ...]
    headings: tuple[ReaderMark, ...]
    truncated: bool

    def offset_of(self, chunk_id: str) -> int | None:
        """Where ``chunk_id``'s text starts (None: not in this text)."""
        return next((mark.offset for mark in self.chunks if mark.chunk_id == chunk_id), None)


def read_reader_text(document_id: str, collection_id: str, max_chars: int, *, overlap_limit: int) -> ReaderText | None:
    """The reader's view of a served document (see :func:`read_document_text`)."""
    stitched = _stitch(document_id, collection_id, max_chars, overlap_limit)
    if stitched is None:
        return None
    document, stitcher, _ = stitched
    text = stitcher.text()
    return ReaderText(
        document_id=document[0], collection_id=document[1], source_path=document[2], text=text[:max_chars],
        chunks=tuple(m for m in stitcher.chunk_marks if m.offset <= max_chars),
        headings=tuple(m for m in stitcher.heading_marks if m.offset <= max_chars),
        truncated=len(text) > max_chars,
    )


def _stitch(document_id: str, collection_id: str, max_chars: int, overlap_limit: int):  # noqa: ANN202
    document = database.execute_sql(
        "SELECT d.id, d.collection_id, COALESCE(d.source_path, '') FROM document AS d "
        f"WHERE d.id = ? AND d.collection_id = ? AND {SERVED_DOCUMENT_SQL}",
        [document_id, collection_id],
    ).fetchone()
    if document is None:
        return None
    cursor = database.execute_sql(
        f"SELECT {CHUNK_COLUMNS} FROM chunk AS c JOIN document AS d ON d.id = c.document_id "
        f"WHERE c.document_id = ? AND {SCOPED_SQL} ORDER BY c.ordinal",
        [document_id, collection_id, collection_id],
    )
    stitcher = _Stitcher(overlap_limit)
    first_heading = ""
    try:
        while len(stitcher) <= max_chars:
            rows = cursor.fetchmany(16)
            if not rows:
                break
            for row in rows:
                record = chunk_record(row)
                if stitcher.empty:
                    first_heading = record.heading_path
                stitcher.add(record)
    finally:
        cursor.close()
    return document, stitcher, first_heading


class _Stitcher:
    """Joins chunks back into text: a heading line per section, overlaps removed."""

    def __init__(self, overlap_limit: int) -> None:
        self.overlap_limit = overlap_limit
        self.pieces: list[str] = []
        self.length = 0
        self.previous: ChunkRecord | None = None
        self.chunk_marks: list[ReaderMark] = []
        self.heading_marks: list[ReaderMark] = []

    def __len__(self) -> int:
        return self.length

    @property
    def empty(self) -> bool:
        return self.previous is None

    def add(self, record: ChunkRecord) -> None:
        previous = self.previous
        if previous is not None and previous.section_key == record.section_key and previous.heading_path == record.heading_path:
            overlap = chunk_overlap(previous.text, record.text, self.overlap_limit)
            if overlap:
                self._mark_chunk(record, self.length - overlap)
                self._append(record.text[overlap:])
            else:
                self._append("\n\n")
                self._mark_chunk(record, self.length)
                self._append(record.text)
        else:
            if previous is not None:
                self._append("\n\n")
            if record.heading_path:
                self.heading_marks.append(
                    ReaderMark(self.length, record.chunk_id, record.heading_path, record.symbol, record.page)
                )
                self._append(f"# {record.heading_path}\n\n")
            self._mark_chunk(record, self.length)
            self._append(record.text)
        self.previous = record

    def _mark_chunk(self, record: ChunkRecord, offset: int) -> None:
        self.chunk_marks.append(ReaderMark(offset, record.chunk_id, record.heading_path, record.symbol, record.page))

    def _append(self, piece: str) -> None:
        self.pieces.append(piece)
        self.length += len(piece)

    def text(self) -> str:
        return "".join(self.pieces)


def chunk_overlap(previous: str, following: str, limit: int) -> int:
    """How many leading characters of ``following`` repeat the end of ``previous``.

    The chunker starts an overlap at a word start and ends a chunk at a word
    break, so only whole-word matches of at most ``limit`` characters count.
    """
    longest = min(limit, len(previous) - 1, len(following))
    for size in range(longest, 0, -1):
        if not previous.endswith(following[:size]):
            continue
        starts_a_word = previous[-size - 1].isspace()
        ends_a_word = size == len(following) or following[size].isspace()
        if starts_a_word and ends_a_word:
            return size
    return 0


def title_for(source_path: str, heading_path: str, document_id: str) -> str:
    """A readable title from non-sensitive provenance; never the stored file name."""
    if source_path:
        return source_path
    if heading_path:
        return heading_path.split(HEADING_SEPARATOR, 1)[0]
    return f"document {document_id[:12]}"
