"""Served chunks with their provenance: the one row shape search hydration,
the agent tools' reads and the TUI preview share.

Every query is scoped twice, like the search arms: the chunk's collection and
its document's collection must both be the requested one, and the document
must be served (``SERVED_DOCUMENT_SQL``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from store.db import database
from store.id_batches import id_batches, placeholders
from store.models import SERVED_DOCUMENT_SQL
from store.records import ChunkRecord, ChunkSummary, SectionRecord

# The columns of a ChunkRecord, in order, over ``chunk AS c``.
CHUNK_COLUMNS = (
    "c.collection_id, c.document_id, c.chunk_uid, c.ordinal, c.section_id, c.heading_path, "
    "c.source_path, c.page, c.start_offset, c.end_offset, c.kind, c.language, c.symbol, c.content"
)
# The scope condition over ``chunk AS c JOIN document AS d``; two collection parameters.
SCOPED_SQL = f"c.collection_id = ? AND d.collection_id = ? AND {SERVED_DOCUMENT_SQL}"


def chunk_record(row: Sequence) -> ChunkRecord:
    """A ChunkRecord from a row selected with CHUNK_COLUMNS."""
    (collection_id, document_id, chunk_id, ordinal, section_key, heading_path, source_path, page,
     start_offset, end_offset, kind, language, symbol, text) = row
    return ChunkRecord(
        collection_id, document_id, chunk_id, ordinal, section_key, heading_path, source_path, page,
        start_offset, end_offset, kind, language, symbol or None, text,
    )


def served_chunks(
    chunk_ids: Sequence[int], collection_id: str, *, document_id: str | None = None
) -> dict[int, ChunkRecord]:
    """The chunks (by row id) that are still served in the scope; others are absent."""
    found: dict[int, ChunkRecord] = {}
    for where, params in scoped_id_batches(chunk_ids, collection_id, document_id):
        sql = f"SELECT c.id, {CHUNK_COLUMNS} FROM chunk AS c JOIN document AS d ON d.id = c.document_id WHERE {where}"
        for row in database.execute_sql(sql, params).fetchall():
            found[row[0]] = chunk_record(row[1:])
    return found


def scoped_id_batches(
    chunk_ids: Sequence[int], collection_id: str, document_id: str | None
) -> Iterator[tuple[str, list[object]]]:
    """Per batch of ``chunk_ids`` (:func:`store.id_batches.id_batches`): the WHERE
    clause over ``chunk AS c JOIN document AS d`` that keeps the served chunks
    of the scope, and its parameters."""
    for ids in id_batches(chunk_ids):
        where = f"c.id IN ({placeholders(ids)}) AND {SCOPED_SQL}"
        params: list[object] = [*ids, collection_id, collection_id]
        if document_id is not None:
            where += " AND c.document_id = ?"
            params.append(document_id)
        yield where, params


def section_openers(chunk_ids: Sequence[int]) -> dict[int, int]:
    """For each chunk id, the id of the first chunk of its section (itself
    when it opens the section). Chunks of one section have consecutive
    ordinals in one document; unknown ids are absent."""
    found: dict[int, int] = {}
    for ids in id_batches(chunk_ids):
        rows = database.execute_sql(
            "SELECT c.id, (SELECT o.id FROM chunk AS o WHERE o.document_id = c.document_id "
            "AND o.section_id IS c.section_id ORDER BY o.ordinal LIMIT 1) "
            f"FROM chunk AS c WHERE c.id IN ({placeholders(ids)})",
            ids,
        ).fetchall()
        found.update((row[0], row[1]) for row in rows if row[1] is not None)
    return found


def neighbours(chunk_id: str, collection_id: str, window: int) -> list[ChunkRecord]:
    """The chunk ``chunk_id`` (a uid) and up to ``window`` chunks each side, in document order.

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


def served_document(document_id: str, collection_id: str) -> tuple[str, str, str] | None:
    """(id, collection, source path or "") of a document served in the collection, else None."""
    row = database.execute_sql(
        "SELECT d.id, d.collection_id, COALESCE(d.source_path, '') FROM document AS d "
        f"WHERE d.id = ? AND d.collection_id = ? AND {SERVED_DOCUMENT_SQL}",
        [document_id, collection_id],
    ).fetchone()
    return None if row is None else (row[0], row[1], row[2])


def document_chunks(document_id: str, collection_id: str) -> Iterator[ChunkRecord]:
    """A served document's chunks in order, read as they are consumed (one
    statement: one snapshot even while the document is being re-indexed)."""
    cursor = database.execute_sql(
        f"SELECT {CHUNK_COLUMNS} FROM chunk AS c JOIN document AS d ON d.id = c.document_id "
        f"WHERE c.document_id = ? AND {SCOPED_SQL} ORDER BY c.ordinal",
        [document_id, collection_id, collection_id],
    )
    try:
        while rows := cursor.fetchmany(16):
            yield from (chunk_record(row) for row in rows)
    finally:
        cursor.close()


def sections(document_id: str) -> list[SectionRecord]:
    rows = database.execute_sql(
        "SELECT ordinal, heading_path, level, page, start_offset, end_offset FROM section "
        "WHERE document_id = ? ORDER BY ordinal",
        [document_id],
    ).fetchall()
    return [SectionRecord(*row) for row in rows]


def chunk_summaries(document_id: str, limit: int) -> list[ChunkSummary]:
    """The document's first ``limit`` chunks in order (whether or not it is served)."""
    rows = database.execute_sql(
        "SELECT ordinal, chunk_uid, heading_path, kind, page, start_offset, end_offset, token_estimate, content "
        "FROM chunk WHERE document_id = ? ORDER BY ordinal LIMIT ?",
        [document_id, limit],
    ).fetchall()
    return [ChunkSummary(*row) for row in rows]
