"""The reads behind read_document and read_surrounding_chunks.

Every query is scoped twice, like the search arms: the chunk's collection and
its document's collection must both be the requested one, and the document
must be served (``SERVED_DOCUMENT_SQL``). Each read is a single statement, so
it sees one consistent snapshot even while a document is being re-indexed.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbtui.chunking import HEADING_SEPARATOR
from store.chunks import CHUNK_COLUMNS, SCOPED_SQL, ChunkRecord, chunk_record
from store.db import database
from store.models import SERVED_DOCUMENT_SQL


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
    document is not served.
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
    document costs no more than a small one.
    """
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
    text = stitcher.text()
    return DocumentText(
        collection_id=document[1], document_id=document[0], source_path=document[2],
        first_heading_path=first_heading, text=text[:max_chars], truncated=len(text) > max_chars,
    )


class _Stitcher:
    """Joins chunks back into text: a heading line per section, overlaps removed."""

    def __init__(self, overlap_limit: int) -> None:
        self.overlap_limit = overlap_limit
        self.pieces: list[str] = []
        self.length = 0
        self.previous: ChunkRecord | None = None

    def __len__(self) -> int:
        return self.length

    @property
    def empty(self) -> bool:
        return self.previous is None

    def add(self, record: ChunkRecord) -> None:
        previous = self.previous
        if previous is not None and previous.section_key == record.section_key and previous.heading_path == record.heading_path:
            overlap = chunk_overlap(previous.text, record.text, self.overlap_limit)
            self._append(record.text[overlap:] if overlap else "\n\n" + record.text)
        else:
            if previous is not None:
                self._append("\n\n")
            if record.heading_path:
                self._append(f"# {record.heading_path}\n\n")
            self._append(record.text)
        self.previous = record

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
