"""Served chunks with their provenance, on PostgreSQL: :mod:`store.chunks` with
the connection first. Every read is scoped twice, like the search arms: the
chunk's collection and its document's must both be the requested one, and the
document must be served (``SERVED_DOCUMENT_SQL``).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Sequence

import psycopg

from store.chunks import CHUNK_COLUMNS, chunk_record
from store.models import SERVED_DOCUMENT_SQL
from store.records import ChunkRecord, ChunkSummary, SectionRecord

# The scope condition over ``chunk AS c JOIN document AS d``; two collection parameters.
SCOPED_SQL = f"c.collection_id = %s AND d.collection_id = %s AND {SERVED_DOCUMENT_SQL}"
# Rows fetched per round trip while a document's chunks are read as they are consumed.
_READ_BATCH = 64


def served_chunks(
    conn: psycopg.Connection, chunk_ids: Sequence[int], collection_id: str, *, document_id: str | None = None
) -> dict[int, ChunkRecord]:
    """The chunks (by row id) that are still served in the scope; others are absent."""
    if not chunk_ids:
        return {}
    where = f"c.id = ANY(%s) AND {SCOPED_SQL}"
    params: list[object] = [list(chunk_ids), collection_id, collection_id]
    if document_id is not None:
        where += " AND c.document_id = %s"
        params.append(document_id)
    rows = conn.execute(
        f"SELECT c.id, {CHUNK_COLUMNS} FROM chunk AS c JOIN document AS d ON d.id = c.document_id WHERE {where}",
        params,
    ).fetchall()
    return {int(row[0]): chunk_record(row[1:]) for row in rows}


def section_openers(conn: psycopg.Connection, chunk_ids: Sequence[int]) -> dict[int, int]:
    """For each chunk id, the id of the first chunk of its section (itself when
    it opens the section); unknown ids are absent."""
    if not chunk_ids:
        return {}
    rows = conn.execute(
        "SELECT c.id, (SELECT o.id FROM chunk AS o WHERE o.document_id = c.document_id "
        "AND o.section_id IS NOT DISTINCT FROM c.section_id ORDER BY o.ordinal LIMIT 1) "
        "FROM chunk AS c WHERE c.id = ANY(%s)",
        (list(chunk_ids),),
    ).fetchall()
    return {int(row[0]): int(row[1]) for row in rows if row[1] is not None}


def neighbours(conn: psycopg.Connection, chunk_id: str, collection_id: str, window: int) -> list[ChunkRecord]:
    """The chunk ``chunk_id`` (a uid) and up to ``window`` chunks each side, in
    document order; empty when it does not exist, belongs to another
    collection, or its document is not served."""
    rows = conn.execute(
        "WITH target AS ("
        "  SELECT c.document_id, c.ordinal FROM chunk AS c JOIN document AS d ON d.id = c.document_id"
        f"  WHERE c.chunk_uid = %s AND {SCOPED_SQL}"
        f") SELECT {CHUNK_COLUMNS} FROM chunk AS c JOIN document AS d ON d.id = c.document_id "
        "JOIN target AS t ON c.document_id = t.document_id "
        f"WHERE {SCOPED_SQL} AND c.ordinal BETWEEN t.ordinal - %s AND t.ordinal + %s ORDER BY c.ordinal",
        [chunk_id, collection_id, collection_id, collection_id, collection_id, window, window],
    ).fetchall()
    return [chunk_record(row) for row in rows]


def served_document(conn: psycopg.Connection, document_id: str, collection_id: str) -> tuple[str, str, str] | None:
    """(id, collection, source path or "") of a document served in the collection, else None."""
    row = conn.execute(
        "SELECT d.id, d.collection_id, coalesce(d.source_path, '') FROM document AS d "
        f"WHERE d.id = %s AND d.collection_id = %s AND {SERVED_DOCUMENT_SQL}",
        (document_id, collection_id),
    ).fetchone()
    return None if row is None else (row[0], row[1], row[2])


def document_chunks(conn: psycopg.Connection, document_id: str, collection_id: str) -> Iterator[ChunkRecord]:
    """A served document's chunks in order, read as they are consumed through a
    server-side cursor (one statement in one transaction: one snapshot even
    while the document is being re-indexed). ``conn`` is held until the
    iterator ends or is closed."""
    with conn.transaction(), conn.cursor(name=f"chunks_{secrets.token_hex(6)}") as cursor:
        cursor.itersize = _READ_BATCH
        cursor.execute(
            f"SELECT {CHUNK_COLUMNS} FROM chunk AS c JOIN document AS d ON d.id = c.document_id "
            f"WHERE c.document_id = %s AND {SCOPED_SQL} ORDER BY c.ordinal",
            (document_id, collection_id, collection_id),
        )
        for row in cursor:
            yield chunk_record(row)


def sections(conn: psycopg.Connection, document_id: str) -> list[SectionRecord]:
    rows = conn.execute(
        "SELECT ordinal, heading_path, level, page, start_offset, end_offset FROM section "
        "WHERE document_id = %s ORDER BY ordinal",
        (document_id,),
    ).fetchall()
    return [SectionRecord(*row) for row in rows]


def chunk_summaries(conn: psycopg.Connection, document_id: str, limit: int) -> list[ChunkSummary]:
    """The document's first ``limit`` chunks in order (whether or not it is served)."""
    rows = conn.execute(
        "SELECT ordinal, chunk_uid, heading_path, kind, page, start_offset, end_offset, token_estimate, content "
        "FROM chunk WHERE document_id = %s ORDER BY ordinal LIMIT %s",
        (document_id, limit),
    ).fetchall()
    return [ChunkSummary(*row) for row in rows]
