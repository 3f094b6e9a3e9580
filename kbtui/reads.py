"""Read models: what every face shows, read from the store as frozen values.

The CLI, the terminal UI, the agent tools and the local API all show the same
documents, details and texts; they get them from here (through
:class:`kbtui.node.Node`), never from the store's tables. Every function
reads through the store's interfaces (:mod:`kbtui.ports`), so the caller
holds a session for its thread (the node's use cases do that for them).

Display names are decrypted for the operator's eyes only; they are never
logged and never reach a search hit or an agent tool result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from actors.events import AdmissionChanged
from kbtui.chunking import HEADING_SEPARATOR
from kbtui.ports import Storage
from kbtui.printable import printable
from kbtui.reasons import explain_reason
from store.records import ChunkRecord, DocumentRecord
from store.records import Status as Status  # re-exported: the statuses, for faces that name them

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


def serves_previous_index(row: DocumentRow) -> bool:
    """Waiting to be (re-)indexed while search still serves the index it had:
    re-indexed, or its source edited. Chunks exist only for a committed index,
    and only a Failed document serves nothing."""
    waiting = row.status == Status.PENDING.value or row.status in IN_STAGES
    return waiting and row.indexed_at is not None and row.chunk_count > 0


class NameCache:
    """Decrypted display names by document id (a document's name never changes)."""

    def __init__(self, store: Storage) -> None:
        self._store = store
        self._names: dict[str, str] = {}

    def names_of(self, document_ids: Sequence[str]) -> dict[str, str]:
        """Names for ``document_ids`` (those that still exist)."""
        wanted = sorted(set(document_ids) - self._names.keys())
        if wanted:
            self._names.update(self._store.catalog.display_names(wanted))
        return {d: self._names[d] for d in document_ids if d in self._names}

    def rows(self, records: Sequence[DocumentRecord]) -> list[DocumentRow]:
        """The rows of ``records``, their names opened (once per document)."""
        self.names_of([r.id for r in records if r.id not in self._names])
        return [_row(self._names.get(r.id, f"(unreadable name) {r.id[:12]}"), r) for r in records]


def _row(name: str, record: DocumentRecord) -> DocumentRow:
    return DocumentRow(
        document_id=record.id, collection_id=record.collection_id, name=name, status=record.status,
        reason=record.failure_reason, progress=record.progress or 0.0, format=record.format,
        source_path=record.source_path, size_bytes=record.size_bytes, chunk_count=record.chunk_count,
        vector_identity=record.vector_identity, created_at=record.created_at, updated_at=record.updated_at,
        indexed_at=record.indexed_at,
    )


def load_document_rows(
    store: Storage,
    names: NameCache,
    collection_id: str | None,
    status: str | None = None,
    *,
    updated_since: float | None = None,
    document_ids: Sequence[str] | None = None,
) -> list[DocumentRow]:
    """Documents oldest first: of one collection (None: all), optionally of one
    status, updated at or after ``updated_since``, or among ``document_ids``."""
    return names.rows(
        store.catalog.documents(collection_id, status, updated_since=updated_since, document_ids=document_ids)
    )


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
    ocr_pages_last_minute: int = 0  # pages OCR read text from, in the last minute's extractions


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
class OcrPageEntry:
    """A page OCR ran on at the last extraction: its mean word confidence (0..1),
    or the reason it gave no text."""

    page: int
    confidence: float | None
    words: int
    reason: str | None

    def low(self, threshold: float) -> bool:
        """Whether the page is flagged: read, but with a mean confidence under ``threshold``."""
        return self.confidence is not None and self.confidence < threshold

    def describe(self, threshold: float) -> str:
        """``page 3: confidence 0.93, 412 words`` (``, low`` when flagged), or why it gave no text."""
        if self.confidence is None:
            return f"page {self.page}: no text, {self.reason or '-'} ({explain_reason(self.reason)})"
        flag = ", low" if self.low(threshold) else ""
        return f"page {self.page}: confidence {self.confidence:.2f}, {self.words} words{flag}"


def ocr_summary(pages: Sequence[OcrPageEntry], threshold: float) -> str:
    """One line on what OCR made of a document's pages, e.g. ``3 of 4 pages read,
    mean confidence 0.93; low: p.2; no text: p.4 ocr_no_text``."""
    read = [p for p in pages if p.confidence is not None]
    parts = [f"{len(read)} of {len(pages)} pages read"]
    if read:
        parts[0] += f", mean confidence {sum(p.confidence or 0.0 for p in read) / len(read):.2f}"
    low = [f"p.{p.page}" for p in read if p.low(threshold)]
    if low:
        parts.append("low: " + ", ".join(low))
    skipped = [f"p.{p.page} {p.reason}" for p in pages if p.confidence is None]
    if skipped:
        parts.append("no text: " + ", ".join(skipped))
    return "; ".join(parts)


@dataclass(frozen=True)
class DocumentDetail:
    """Everything about one document: its row, versions, history, sections, chunks, OCR'd pages."""

    row: DocumentRow
    vector_dim: int | None
    parser_version: int | None
    chunker_version: int | None
    history: tuple[HistoryEntry, ...]
    sections: tuple[SectionEntry, ...]
    chunks: tuple[ChunkEntry, ...]
    ocr_pages: tuple[OcrPageEntry, ...] = ()
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


def load_document_detail(store: Storage, names: NameCache, document_id: str) -> DocumentDetail | None:
    """Everything the detail views show about one document (None if it is gone)."""
    record = store.catalog.document(document_id)
    if record is None:
        return None
    history = tuple(HistoryEntry(h.status, h.reason, h.at) for h in store.catalog.history(document_id))
    sections = tuple(
        SectionEntry(s.ordinal, printable(s.heading_path), s.level, s.page, s.start_offset, s.end_offset)
        for s in store.chunks.sections(document_id)
    )
    chunks = tuple(
        ChunkEntry(c.ordinal, c.chunk_id, printable(c.heading_path), c.kind, c.page, c.start_offset, c.end_offset,
                   c.token_estimate, printable(" ".join(c.text[: PREVIEW_CHARS * 2].split())[:PREVIEW_CHARS]))
        for c in store.chunks.chunk_summaries(document_id, MAX_DETAIL_CHUNKS)
    )
    ocr = tuple(OcrPageEntry(p.page, p.confidence, p.words, p.reason) for p in store.catalog.ocr_pages(document_id))
    return DocumentDetail(
        names.rows([record])[0], record.vector_dim, record.parser_version, record.chunker_version,
        history=history, sections=sections, chunks=chunks, ocr_pages=ocr,
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


def read_document_text(
    store: Storage, document_id: str, collection_id: str, max_chars: int, *, overlap_limit: int
) -> DocumentText | None:
    """Up to ``max_chars`` of a document's text, stitched from its chunks in order.

    None when the document does not exist, belongs to another collection, or
    is not served. Reading stops as soon as the bound is passed, so a huge
    document costs no more than a small one. Each read is a single statement,
    so it sees one snapshot even while the document is being re-indexed.
    """
    stitched = _stitch(store, document_id, collection_id, max_chars, overlap_limit)
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


def read_reader_text(
    store: Storage, document_id: str, collection_id: str, max_chars: int, *, overlap_limit: int
) -> ReaderText | None:
    """The reader's view of a served document (see :func:`read_document_text`)."""
    stitched = _stitch(store, document_id, collection_id, max_chars, overlap_limit)
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


def _stitch(
    store: Storage, document_id: str, collection_id: str, max_chars: int, overlap_limit: int
) -> tuple[tuple[str, str, str], _Stitcher, str] | None:
    document = store.chunks.served_document(document_id, collection_id)
    if document is None:
        return None
    stitcher = _Stitcher(overlap_limit)
    first_heading = ""
    records = store.chunks.document_chunks(document_id, collection_id)
    try:
        for record in records:
            if len(stitcher) > max_chars:
                break
            if stitcher.empty:
                first_heading = record.heading_path
            stitcher.add(record)
    finally:
        close = getattr(records, "close", None)
        if close is not None:
            close()  # stop reading: a huge document costs no more than a small one
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
