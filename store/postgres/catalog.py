"""The catalog writes that decide what search sees, on PostgreSQL: the Pending
row with its blob, status transitions, the atomic index commit and the purge
(:mod:`store.catalog`'s ``create_document``, ``set_status``, ``commit_index``
and ``purge_document``, the connection first).

Every write is one transaction. The index commit locks the document row
first (``FOR UPDATE``), so a purge and a commit of one document, from any
node, happen one after the other: a delete always wins, and a commit never
leaves a document half visible. The blob lives in the same database, so a
document's row and its blob are written, and removed, in one transaction: no
orphan blob is left by a crash.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO

import numpy as np
import psycopg

from store.blobs import FileChanged, seal_name
from store.catalog import Superseded
from store.models import Status
from store.postgres.blobs import PostgresBlobStore
from store.postgres.lexical import indexed_columns
from store.postgres.vectors import ensure_vector_index


def ensure_collection(conn: psycopg.Connection, collection_id: str) -> None:
    conn.execute(
        "INSERT INTO collection(id, created_at) VALUES (%s, %s) ON CONFLICT (id) DO NOTHING",
        (collection_id, time.time()),
    )


def create_document(
    conn: psycopg.Connection,
    blobs: PostgresBlobStore,
    node_key: bytes,
    collection_id: str,
    source: BinaryIO,
    *,
    content_hash: str,
    display_name: str,
    fmt: str,
    source_path: str | None = None,
    source_id: str | None = None,
    also: Callable[[psycopg.Connection, str], None] | None = None,
) -> str:
    """Write the encrypted blob and the Pending row (and ``also(conn,
    document_id)``) in one transaction; return the new document id.

    As ``store.catalog.create_document``: no de-duplication here, and nothing
    is stored when the bytes read do not hash to ``content_hash``
    (:class:`store.blobs.FileChanged`); the database refuses a second upload of
    the same bytes to a collection (``psycopg.errors.UniqueViolation``).
    """
    document_id = uuid.uuid4().hex

    def unchanged(sha256: str) -> None:
        if sha256 != content_hash:
            raise FileChanged("the file changed while it was being added; try again")

    now = time.time()
    with conn.transaction():
        sealed = blobs.seal(document_id, source, check=unchanged, conn=conn)
        ensure_collection(conn, collection_id)
        conn.execute(
            "INSERT INTO document(id, collection_id, content_hash, display_name, format, source_path, source_id,"
            " size_bytes, status, created_at, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                document_id, collection_id, sealed.sha256, seal_name(node_key, document_id, display_name), fmt,
                source_path, source_id, sealed.size, Status.PENDING.value, now, now,
            ),
        )
        conn.execute(
            "INSERT INTO status_history(document_id, status, at) VALUES (%s, %s, %s)",
            (document_id, Status.PENDING.value, now),
        )
        if also is not None:
            also(conn, document_id)
    return document_id


def set_status(
    conn: psycopg.Connection,
    document_id: str,
    status: Status,
    *,
    reason: str | None = None,
    progress: float | None = None,
    content_hash: str | None = None,
) -> bool:
    """Record a status transition; False when the document no longer exists (or,
    with ``content_hash``, no longer holds those bytes)."""
    now = time.time()
    condition = "id = %s" + (" AND content_hash = %s" if content_hash is not None else "")
    params: list[object] = [status.value, reason, now, progress, document_id]
    if content_hash is not None:
        params.append(content_hash)
    with conn.transaction():
        updated = conn.execute(
            "UPDATE document SET status = %s, failure_reason = %s, updated_at = %s, "
            f"progress = coalesce(%s, progress) WHERE {condition}",
            params,
        ).rowcount
        if updated:
            conn.execute(
                "INSERT INTO status_history(document_id, status, reason, at) VALUES (%s, %s, %s, %s)",
                (document_id, status.value, reason, now),
            )
    return bool(updated)


def commit_index(
    conn: psycopg.Connection,
    document_id: str,
    *,
    sections: Sequence[Any],
    chunks: Sequence[Any],
    vectors: np.ndarray,
    identity: str,
    parser_version: int,
    chunker_version: int,
    content_hash: str | None = None,
) -> list[int] | None:
    """Replace the document's sections, chunks (with their lexical index) and
    vectors and mark it Indexed, in one transaction: it is never half visible.

    As ``store.catalog.commit_index``: ``sections`` and ``chunks`` are
    ``kbtui.chunking`` specs, ``vectors`` one row per chunk; returns the new
    chunk ids, or None when the document was deleted meanwhile; raises
    ``store.catalog.Superseded`` (writing nothing) when it holds other bytes
    than ``content_hash``.
    """
    if len(vectors) != len(chunks):
        raise ValueError("one vector per chunk is required")
    dim = int(vectors.shape[1]) if len(chunks) else None
    now = time.time()
    with conn.transaction():
        row = conn.execute(
            "SELECT collection_id, content_hash, source_path FROM document WHERE id = %s FOR UPDATE", (document_id,)
        ).fetchone()
        if row is None:
            return None
        collection_id, held_hash, source_path = row
        if content_hash is not None and held_hash != content_hash:
            raise Superseded(document_id)
        _delete_index_rows(conn, document_id)
        section_ids: dict[int, int] = {}
        for section in sections:
            inserted = conn.execute(
                "INSERT INTO section(document_id, ordinal, heading_path, level, start_offset, end_offset, page)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
                (document_id, section.ordinal, section.heading_path, section.level, section.start_offset,
                 section.end_offset, section.page),
            ).fetchone()
            section_ids[section.ordinal] = int(inserted[0]) if inserted else 0
        chunk_ids: list[int] = []
        if chunks:
            assert dim is not None
            ensure_vector_index(conn, identity, dim)
            path = source_path or ""
            columns: dict[str, list[object]] = {name: [] for name, _ in _CHUNK_COLUMNS}
            for spec in chunks:
                vector_text, counts, has_cjk = indexed_columns(path, spec.heading_path, spec.symbol or "", spec.content)
                values = (
                    spec.chunk_uid, document_id, section_ids.get(spec.section_ordinal), collection_id, spec.ordinal,
                    spec.content, spec.content_hash, spec.heading_path, path, spec.symbol or "", spec.kind,
                    spec.language, spec.page, spec.start_offset, spec.end_offset, spec.token_estimate, vector_text,
                    *counts, has_cjk,
                )
                for (name, _), value in zip(_CHUNK_COLUMNS, values, strict=True):
                    columns[name].append(value)
            # One statement for all the rows: the statistics trigger runs once per commit.
            written = conn.execute(_INSERT_CHUNKS, list(columns.values())).fetchall()
            by_uid = {uid: int(chunk_id) for chunk_id, uid in written}
            chunk_ids = [by_uid[spec.chunk_uid] for spec in chunks]
            with conn.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO chunk_vector(chunk_id, collection_id, document_id, identity, dim, embedding)"
                    " VALUES (%s, %s, %s, %s, %s, %s)",
                    [(chunk_id, collection_id, document_id, identity, dim, np.asarray(vector, dtype=np.float32))
                     for chunk_id, vector in zip(chunk_ids, vectors, strict=True)],
                )
        conn.execute(
            "UPDATE document SET status = %s, failure_reason = NULL, progress = 1.0, chunk_count = %s,"
            " parser_version = %s, chunker_version = %s, vector_identity = %s, vector_dim = %s, indexed_at = %s,"
            " updated_at = %s WHERE id = %s",
            (Status.INDEXED.value, len(chunk_ids), parser_version, chunker_version, identity, dim, now, now,
             document_id),
        )
        conn.execute(
            "INSERT INTO status_history(document_id, status, at) VALUES (%s, %s, %s)",
            (document_id, Status.INDEXED.value, now),
        )
    return chunk_ids


# The chunk columns written by commit_index, with the array type each is sent as.
_CHUNK_COLUMNS = (
    ("chunk_uid", "text"), ("document_id", "text"), ("section_id", "bigint"), ("collection_id", "text"),
    ("ordinal", "integer"), ("content", "text"), ("content_hash", "text"), ("heading_path", "text"),
    ("source_path", "text"), ("symbol", "text"), ("kind", "text"), ("language", "text"), ("page", "integer"),
    ("start_offset", "integer"), ("end_offset", "integer"), ("token_estimate", "integer"), ("search_vector", "text"),
    ("path_tokens", "integer"), ("heading_tokens", "integer"), ("symbol_tokens", "integer"), ("body_tokens", "integer"),
    ("has_cjk", "boolean"),
)
_INSERT_CHUNKS = (
    "INSERT INTO chunk(chunk_uid, document_id, section_id, collection_id, ordinal, content, content_hash,"
    " heading_path, source_path, symbol, kind, language, page, start_offset, end_offset, token_estimate,"
    " search_vector, column_tokens, has_cjk) "
    "SELECT chunk_uid, document_id, section_id, collection_id, ordinal, content, content_hash, heading_path,"
    " source_path, symbol, kind, language, page, start_offset, end_offset, token_estimate,"
    " search_vector::tsvector, ARRAY[path_tokens, heading_tokens, symbol_tokens, body_tokens], has_cjk "
    "FROM unnest(" + ", ".join(f"%s::{kind}[]" for _, kind in _CHUNK_COLUMNS) + ") AS rows("
    + ", ".join(name for name, _ in _CHUNK_COLUMNS) + ") RETURNING id, chunk_uid"
)


def _delete_index_rows(conn: psycopg.Connection, document_id: str) -> list[int]:
    """Delete the document's chunks (their vectors and statistics follow) and sections."""
    rows = conn.execute("DELETE FROM chunk WHERE document_id = %s RETURNING id", (document_id,)).fetchall()
    conn.execute("DELETE FROM section WHERE document_id = %s", (document_id,))
    return sorted(int(row[0]) for row in rows)


def purge_document(conn: psycopg.Connection, document_id: str) -> list[int] | None:
    """Delete every row of the document and its blob in one transaction.
    Returns the removed chunk ids, or None if it did not exist."""
    with conn.transaction():
        if conn.execute("SELECT 1 FROM document WHERE id = %s FOR UPDATE", (document_id,)).fetchone() is None:
            return None
        chunk_ids = _delete_index_rows(conn, document_id)
        conn.execute("DELETE FROM document WHERE id = %s", (document_id,))
        conn.execute("DELETE FROM blob WHERE id = %s", (document_id,))
    return chunk_ids
