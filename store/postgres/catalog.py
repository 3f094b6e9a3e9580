"""The catalog on PostgreSQL: :mod:`store.catalog` with the connection first.
Adding (the Pending row with its blob, uploads de-duplicated by content),
reading, status transitions, the atomic index commit, the purge, the sweep
and the queue of record.

Every write is one transaction. The index commit locks the document row
first (``FOR UPDATE``), so a purge and a commit of one document, from any
node, happen one after the other: a delete always wins, and a commit never
leaves a document half visible. The blob lives in the same database, so a
document's row and its blob are written, and removed, in one transaction: no
orphan blob is left by a crash.
"""

from __future__ import annotations

import hashlib
import io
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import psycopg

from store.blobs import FileChanged, seal_name
from store.errors import NotFound, Superseded
from store.files import open_source
from store.postgres.blobs import PostgresBlobStore
from store.postgres.lexical import indexed_columns
from store.postgres.vectors import ensure_vector_index
from store.records import AddOutcome, DocumentRecord, HistoryRecord, OcrPage, Status

# The columns of a DocumentRecord, in order.
DOCUMENT_COLUMNS = (
    "id, collection_id, content_hash, display_name, format, source_path, source_id, size_bytes, status,"
    " failure_reason, coalesce(progress, 0), parser_version, chunker_version, vector_identity, vector_dim,"
    " chunk_count, created_at, updated_at, indexed_at"
)


def ensure_collection(conn: psycopg.Connection, collection_id: str) -> None:
    conn.execute(
        "INSERT INTO collection(id, created_at) VALUES (%s, %s) ON CONFLICT (id) DO NOTHING",
        (collection_id, time.time()),
    )


def collection_exists(conn: psycopg.Connection, collection_id: str) -> bool:
    return conn.execute("SELECT 1 FROM collection WHERE id = %s", (collection_id,)).fetchone() is not None


def list_collections(conn: psycopg.Connection) -> list[str]:
    return [row[0] for row in conn.execute("SELECT id FROM collection ORDER BY id").fetchall()]


def changed_while_read(content_hash: str) -> Callable[[str], None]:
    def unchanged(sha256: str) -> None:
        if sha256 != content_hash:
            raise FileChanged("the file changed while it was being added; try again")

    return unchanged


def _insert_pending(
    conn: psycopg.Connection, node_key: bytes, document_id: str, collection_id: str, *, content_hash: str,
    size: int, display_name: str, fmt: str, source_path: str | None, source_id: str | None,
) -> None:
    """The Pending row of a blob written in the same transaction, and its first history line."""
    now = time.time()
    ensure_collection(conn, collection_id)
    conn.execute(
        "INSERT INTO document(id, collection_id, content_hash, display_name, format, source_path, source_id,"
        " size_bytes, status, created_at, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (
            document_id, collection_id, content_hash, seal_name(node_key, document_id, display_name), fmt,
            source_path, source_id, size, Status.PENDING.value, now, now,
        ),
    )
    conn.execute(
        "INSERT INTO status_history(document_id, status, at) VALUES (%s, %s, %s)",
        (document_id, Status.PENDING.value, now),
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
    with conn.transaction():
        sealed = blobs.seal(document_id, source, check=changed_while_read(content_hash), conn=conn)
        _insert_pending(
            conn, node_key, document_id, collection_id, content_hash=sealed.sha256, size=sealed.size,
            display_name=display_name, fmt=fmt, source_path=source_path, source_id=source_id,
        )
        if also is not None:
            also(conn, document_id)
    return document_id


def add_document(
    conn: psycopg.Connection, blobs: PostgresBlobStore, node_key: bytes, collection_id: str, source: Path, *,
    display_name: str, fmt: str, max_bytes: int | None = None,
) -> AddOutcome:
    """Store the file at ``source`` encrypted and record it as a Pending document
    (``store.catalog.add_document``: opened once, read once under ``max_bytes``,
    hashed as it is encrypted). The same bytes added twice to one collection
    are one document; re-adding a Failed document's bytes queues it again.

    The blob and the row commit together; bytes already in the collection
    roll both back, so nothing is left to sweep.
    """
    document_id = uuid.uuid4().hex
    existing: DocumentRecord | None = None
    try:
        with open_source(source, max_bytes=max_bytes) as opened, conn.transaction():
            sealed = blobs.seal(document_id, opened, check=lambda _sha256: opened.finish(), conn=conn)
            existing = _upload_with_hash(conn, collection_id, sealed.sha256)
            if existing is not None:
                raise psycopg.Rollback()  # the blob written above goes with the transaction
            _insert_pending(
                conn, node_key, document_id, collection_id, content_hash=sealed.sha256, size=sealed.size,
                display_name=display_name, fmt=fmt, source_path=None, source_id=None,
            )
    except psycopg.errors.UniqueViolation:
        # Another node added the same bytes between our check and insert.
        existing = _upload_with_hash(conn, collection_id, sealed.sha256)
        if existing is None:
            raise
    if existing is None:
        return AddOutcome(document_id, True, Status.PENDING.value)
    return _readd_existing(conn, existing)


def add_upload(
    conn: psycopg.Connection, blobs: PostgresBlobStore, node_key: bytes, collection_id: str, data: bytes, *,
    display_name: str, fmt: str,
) -> AddOutcome:
    """Store bytes that came without a path as a Pending document; the same
    bytes already uploaded to the collection are that document."""
    content_hash = hashlib.sha256(data).hexdigest()
    existing = _upload_with_hash(conn, collection_id, content_hash)
    if existing is None:
        try:
            document_id = create_document(
                conn, blobs, node_key, collection_id, io.BytesIO(data), content_hash=content_hash,
                display_name=display_name, fmt=fmt,
            )
            return AddOutcome(document_id, True, Status.PENDING.value)
        except psycopg.errors.UniqueViolation:
            existing = _upload_with_hash(conn, collection_id, content_hash)
            if existing is None:
                raise
    return _readd_existing(conn, existing)


def _upload_with_hash(conn: psycopg.Connection, collection_id: str, content_hash: str) -> DocumentRecord | None:
    row = conn.execute(
        f"SELECT {DOCUMENT_COLUMNS} FROM document WHERE collection_id = %s AND content_hash = %s"
        " AND source_path IS NULL",
        (collection_id, content_hash),
    ).fetchone()
    return None if row is None else document_record(row)


def _readd_existing(conn: psycopg.Connection, document: DocumentRecord) -> AddOutcome:
    if document.status == Status.FAILED.value:
        set_status(conn, document.id, Status.PENDING)
        return AddOutcome(document.id, False, Status.PENDING.value)
    return AddOutcome(document.id, False, document.status)


# ---------------------------------------------------------------- reads


def document_record(row: Sequence[Any]) -> DocumentRecord:
    """A DocumentRecord from a row selected with DOCUMENT_COLUMNS."""
    values = list(row)
    values[3] = bytes(values[3])
    return DocumentRecord(*values)


def document(conn: psycopg.Connection, document_id: str) -> DocumentRecord | None:
    row = conn.execute(f"SELECT {DOCUMENT_COLUMNS} FROM document WHERE id = %s", (document_id,)).fetchone()
    return None if row is None else document_record(row)


def document_at(conn: psycopg.Connection, collection_id: str, source_path: str) -> DocumentRecord | None:
    """The document a collection holds at ``source_path``, if any."""
    row = conn.execute(
        f"SELECT {DOCUMENT_COLUMNS} FROM document WHERE collection_id = %s AND source_path = %s"
        " ORDER BY created_at, id LIMIT 1",
        (collection_id, source_path),
    ).fetchone()
    return None if row is None else document_record(row)


def resolve_document(conn: psycopg.Connection, reference: str, collection_id: str | None = None) -> DocumentRecord:
    """Find a document by full id or a unique id prefix (at least 6 characters)."""
    reference = reference.strip().lower()
    scope, params = ("", []) if collection_id is None else (" AND collection_id = %s", [collection_id])
    exact = conn.execute(
        f"SELECT {DOCUMENT_COLUMNS} FROM document WHERE id = %s{scope}", [reference, *params]
    ).fetchone()
    if exact is not None:
        return document_record(exact)
    if len(reference) >= 6 and all(c in "0123456789abcdef" for c in reference):
        matches = conn.execute(
            f"SELECT {DOCUMENT_COLUMNS} FROM document WHERE starts_with(id, %s){scope} ORDER BY id LIMIT 2",
            [reference, *params],
        ).fetchall()
        if len(matches) == 1:
            return document_record(matches[0])
        if len(matches) > 1:
            raise NotFound("document id prefix is ambiguous; give more characters")
    raise NotFound("no such document")


def documents(
    conn: psycopg.Connection, collection_id: str | None = None, status: str | None = None, *,
    updated_since: float | None = None, document_ids: Sequence[str] | None = None,
) -> list[DocumentRecord]:
    """Documents oldest first: of one collection (None: all), optionally of one
    status, updated at or after ``updated_since``, or among ``document_ids`` (in that order)."""
    conditions: list[str] = []
    params: list[object] = []
    for condition, value in (
        ("collection_id = %s", collection_id), ("status = %s", status), ("updated_at >= %s", updated_since),
    ):
        if value is not None:
            conditions.append(condition)
            params.append(value)
    ids = None if document_ids is None else list(dict.fromkeys(document_ids))
    if ids is not None:
        conditions.append("id = ANY(%s)")
        params.append(ids)
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    rows = conn.execute(
        f"SELECT {DOCUMENT_COLUMNS} FROM document{where} ORDER BY created_at, id", params
    ).fetchall()
    found = [document_record(row) for row in rows]
    if ids is None:
        return found
    by_id = {record.id: record for record in found}
    return [by_id[d] for d in ids if d in by_id]


def document_ids_with_prefix(
    conn: psycopg.Connection, prefix: str, collection_id: str | None, limit: int
) -> list[str]:
    """Up to ``limit`` ids starting with ``prefix`` (lower-case hex), of one collection or all."""
    scope, params = ("", []) if collection_id is None else (" AND collection_id = %s", [collection_id])
    rows = conn.execute(
        f"SELECT id FROM document WHERE starts_with(id, %s){scope} ORDER BY id LIMIT %s", [prefix, *params, limit]
    ).fetchall()
    return [row[0] for row in rows]


def statuses(conn: psycopg.Connection, document_ids: Sequence[str]) -> dict[str, str]:
    """The status of each of ``document_ids`` that still exists."""
    rows = conn.execute(
        "SELECT id, status FROM document WHERE id = ANY(%s)", (list(dict.fromkeys(document_ids)),)
    ).fetchall()
    return {document_id: status for document_id, status in rows}


def sealed_names(conn: psycopg.Connection, document_ids: Sequence[str]) -> dict[str, bytes]:
    """The sealed display name of each of ``document_ids`` that still exists."""
    rows = conn.execute(
        "SELECT id, display_name FROM document WHERE id = ANY(%s)", (list(dict.fromkeys(document_ids)),)
    ).fetchall()
    return {document_id: bytes(sealed) for document_id, sealed in rows}


def status_counts(conn: psycopg.Connection, collection_id: str | None = None) -> dict[str, int]:
    """How many documents are in each status."""
    if collection_id is None:
        rows = conn.execute("SELECT status, count(*) FROM document GROUP BY status").fetchall()
    else:
        rows = conn.execute(
            "SELECT status, count(*) FROM document WHERE collection_id = %s GROUP BY status", (collection_id,)
        ).fetchall()
    return {status: int(count) for status, count in rows}


def catalog_stamp(conn: psycopg.Connection, collection_id: str) -> tuple[int, float]:
    """A cheap change stamp: (row count, newest updated_at) of the collection."""
    row = conn.execute(
        "SELECT count(*), coalesce(max(updated_at), 0) FROM document WHERE collection_id = %s", (collection_id,)
    ).fetchone()
    return (int(row[0]), float(row[1])) if row else (0, 0.0)


def indexed_chunk_total(conn: psycopg.Connection, collection_id: str) -> int:
    """How many chunks the collection's Indexed documents have (chunks/s is its rate)."""
    row = conn.execute(
        "SELECT coalesce(sum(chunk_count), 0) FROM document WHERE collection_id = %s AND status = %s",
        (collection_id, Status.INDEXED.value),
    ).fetchone()
    return int(row[0]) if row else 0


def history(conn: psycopg.Connection, document_id: str) -> list[HistoryRecord]:
    """A document's status transitions, oldest first."""
    rows = conn.execute(
        "SELECT status, reason, at FROM status_history WHERE document_id = %s ORDER BY id", (document_id,)
    ).fetchall()
    return [HistoryRecord(*row) for row in rows]


# ---------------------------------------------------------------- writes


def set_status(
    conn: psycopg.Connection,
    document_id: str,
    status: Status,
    *,
    reason: str | None = None,
    progress: float | None = None,
    content_hash: str | None = None,
    lease_holder: str | None = None,
) -> bool:
    """Record a status transition; False when the document no longer exists (or,
    with ``content_hash``, no longer holds those bytes).

    ``lease_holder`` is the node whose pipeline writes (many nodes on one
    store, :mod:`store.postgres.coordination`): a stage's move into a working
    status or Failed is refused (False) unless that node holds the lease, so a
    node that lost a document to a takeover cannot touch it. Pending and
    Failed end the lease: Pending puts the document back for any node (a
    re-index asked for meanwhile drops the holder's work in progress).
    """
    now = time.time()
    condition = "id = %s" + (" AND content_hash = %s" if content_hash is not None else "")
    params: list[object] = [status.value, reason, now, progress, document_id]
    if content_hash is not None:
        params.append(content_hash)
    if lease_holder is not None and status != Status.PENDING:
        condition += " AND lease_node = %s"
        params.append(lease_holder)
    release = ", lease_node = NULL, lease_until = NULL" if status in (Status.PENDING, Status.FAILED) else ""
    with conn.transaction():
        updated = conn.execute(
            "UPDATE document SET status = %s, failure_reason = %s, updated_at = %s, "
            f"progress = coalesce(%s, progress){release} WHERE {condition}",
            params,
        ).rowcount
        if updated:
            conn.execute(
                "INSERT INTO status_history(document_id, status, reason, at, node) VALUES (%s, %s, %s, %s, %s)",
                (document_id, status.value, reason, now, lease_holder),
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
    lease_holder: str | None = None,
) -> list[int] | None:
    """Replace the document's sections, chunks (with their lexical index) and
    vectors and mark it Indexed, in one transaction: it is never half visible.

    As ``store.catalog.commit_index``: ``sections`` and ``chunks`` are
    ``kbtui.chunking`` specs, ``vectors`` one row per chunk; returns the new
    chunk ids, or None when the document was deleted meanwhile; raises
    ``store.catalog.Superseded`` (writing nothing) when it holds other bytes
    than ``content_hash``, or when its lease is no longer ``lease_holder``'s
    (another node took it over: that node commits it).
    """
    if len(vectors) != len(chunks):
        raise ValueError("one vector per chunk is required")
    dim = int(vectors.shape[1]) if len(chunks) else None
    now = time.time()
    with conn.transaction():
        row = conn.execute(
            "SELECT collection_id, content_hash, source_path, lease_node FROM document WHERE id = %s FOR UPDATE",
            (document_id,),
        ).fetchone()
        if row is None:
            return None
        collection_id, held_hash, source_path, lease_node = row
        if content_hash is not None and held_hash != content_hash:
            raise Superseded(document_id)
        if lease_holder is not None and lease_node != lease_holder:
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
            " updated_at = %s, indexed_by = %s, lease_node = NULL, lease_until = NULL WHERE id = %s",
            (Status.INDEXED.value, len(chunk_ids), parser_version, chunker_version, identity, dim, now, now,
             lease_holder, document_id),
        )
        conn.execute(
            "INSERT INTO status_history(document_id, status, at, node) VALUES (%s, %s, %s, %s)",
            (document_id, Status.INDEXED.value, now, lease_holder),
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


def sweep_orphan_blobs(conn: psycopg.Connection) -> int:
    """Delete the blobs of documents this catalog removed (``store.catalog.sweep_orphan_blobs``).

    Rows and blobs share the database and are written and purged in one
    transaction, so this finds something only where a blob outlived its row
    some other way; a blob the catalog has never heard of is kept, as in SQLite.
    """
    with conn.transaction():
        removed = conn.execute(
            "DELETE FROM blob WHERE id IN (SELECT r.id FROM removed_document AS r"
            " WHERE NOT EXISTS (SELECT 1 FROM document AS d WHERE d.id = r.id))"
        ).rowcount
        # A record is needed only while its blob exists.
        conn.execute(
            "DELETE FROM removed_document AS r WHERE NOT EXISTS (SELECT 1 FROM blob AS b WHERE b.id = r.id)"
            " AND NOT EXISTS (SELECT 1 FROM document AS d WHERE d.id = r.id)"
        )
    return removed


def pending_document_ids(conn: psycopg.Connection, limit: int | None = None) -> list[str]:
    """The Pending documents, oldest first (a pipeline that works alone on the
    store; nodes that share it claim work through :mod:`store.postgres.coordination`)."""
    rows = conn.execute(
        "SELECT id FROM document WHERE status = %s ORDER BY created_at, id LIMIT %s",
        (Status.PENDING.value, limit),
    ).fetchall()
    return [row[0] for row in rows]


def stale_document_ids(
    conn: psycopg.Connection, *, parser_version: int, chunker_version: int, vector_identity: str | None, limit: int
) -> list[str]:
    """Indexed documents built by another parser, chunker or (when given) vector
    identity; then documents that failed as no_text under an older parser
    (each read once per parser version)."""
    condition = "parser_version <> %s OR chunker_version <> %s"
    params: list[object] = [Status.INDEXED.value, parser_version, chunker_version]
    if vector_identity is not None:
        condition += " OR vector_identity <> %s"
        params.append(vector_identity)
    rows = conn.execute(
        f"SELECT id FROM document WHERE status = %s AND ({condition}) ORDER BY indexed_at LIMIT %s", [*params, limit]
    ).fetchall()
    stale = [row[0] for row in rows]
    if len(stale) < limit:
        rows = conn.execute(
            "SELECT id FROM document WHERE status = 'Failed' AND failure_reason = 'no_text' AND NOT EXISTS ("
            " SELECT 1 FROM document_extraction AS e WHERE e.document_id = document.id AND e.parser_version = %s)"
            " ORDER BY updated_at, id LIMIT %s",
            (parser_version, limit - len(stale)),
        ).fetchall()
        stale += [row[0] for row in rows]
    return stale


def mark_pending(conn: psycopg.Connection, document_ids: Sequence[str]) -> None:
    """Queue documents for (re-)indexing; an indexed one keeps serving meanwhile."""
    for document_id in document_ids:
        set_status(conn, document_id, Status.PENDING, progress=0.0)


# ---------------------------------------------------------------- extraction records


def record_extraction(conn: psycopg.Connection, document_id: str, parser_version: int, pages: Sequence[Any]) -> None:
    """Replace the document's extraction record and OCR pages (nothing when it was deleted)."""
    with conn.transaction():
        if conn.execute("SELECT 1 FROM document WHERE id = %s FOR SHARE", (document_id,)).fetchone() is None:
            return
        conn.execute(
            "INSERT INTO document_extraction(document_id, parser_version, extracted_at) VALUES (%s, %s, %s)"
            " ON CONFLICT (document_id) DO UPDATE SET parser_version = EXCLUDED.parser_version,"
            " extracted_at = EXCLUDED.extracted_at",
            (document_id, parser_version, time.time()),
        )
        conn.execute("DELETE FROM ocr_page WHERE document_id = %s", (document_id,))
        rows = {page.page: (document_id, page.page, page.confidence, page.words, page.seconds, page.reason) for page in pages}
        if rows:
            with conn.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO ocr_page(document_id, page, confidence, words, seconds, reason)"
                    " VALUES (%s, %s, %s, %s, %s, %s)",
                    list(rows.values()),
                )


def ocr_pages(conn: psycopg.Connection, document_id: str) -> list[OcrPage]:
    """The pages OCR ran on at the document's last extraction, in page order."""
    rows = conn.execute(
        "SELECT page, confidence, words, seconds, reason FROM ocr_page WHERE document_id = %s ORDER BY page",
        (document_id,),
    ).fetchall()
    return [OcrPage(*row) for row in rows]


def low_confidence_document_ids(
    conn: psycopg.Connection, threshold: float, collection_id: str | None = None
) -> list[str]:
    """Documents with at least one OCR'd page whose mean confidence is under ``threshold``."""
    scope, params = ("", []) if collection_id is None else (" AND d.collection_id = %s", [collection_id])
    rows = conn.execute(
        "SELECT d.id FROM document AS d WHERE EXISTS ("
        f" SELECT 1 FROM ocr_page AS p WHERE p.document_id = d.id AND p.confidence < %s){scope}"
        " ORDER BY d.created_at, d.id",
        [threshold, *params],
    ).fetchall()
    return [row[0] for row in rows]


def ocr_pages_read_recently(conn: psycopg.Connection, collection_id: str, window_s: float = 60.0) -> int:
    """Pages OCR read text from in the collection's extractions of the last ``window_s`` seconds."""
    row = conn.execute(
        "SELECT count(*) FROM document_extraction AS e JOIN document AS d ON d.id = e.document_id"
        " JOIN ocr_page AS p ON p.document_id = e.document_id"
        " WHERE e.extracted_at >= %s AND d.collection_id = %s AND p.confidence IS NOT NULL",
        (time.time() - window_s, collection_id),
    ).fetchone()
    return int(row[0]) if row else 0
