"""Catalog operations: add, status transitions, the atomic index commit, purge, sweeps.

Every write here is one ``BEGIN IMMEDIATE`` transaction (the database default).
"""

from __future__ import annotations

import hashlib
import io
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

import numpy as np
from peewee import IntegrityError

from store import Store
from store.blobs import DocumentLabel, FileChanged, SealedBlob, seal_name
from store.db import database
from store.errors import NotFound, Superseded
from store.extractions import no_text_document_ids
from store.files import open_source
from store.id_batches import id_batches
from store.models import (
    NON_TERMINAL,
    Chunk,
    Collection,
    Document,
    Section,
    Status,
    StatusHistory,
    Vector,
)
from store.records import AddOutcome, DocumentRecord, HistoryRecord
from store.vectors import to_blob

log = logging.getLogger(__name__)

ORPHAN_GRACE_S = 300.0


def ensure_collection(collection_id: str) -> None:
    Collection.insert(id=collection_id, created_at=time.time()).on_conflict_ignore().execute()


def collection_exists(collection_id: str) -> bool:
    return Collection.get_or_none(Collection.id == collection_id) is not None


def list_collections() -> list[str]:
    return [c.id for c in Collection.select().order_by(Collection.id)]


def add_document(
    store: Store,
    collection_id: str,
    source: Path,
    *,
    display_name: str,
    fmt: str,
    max_bytes: int | None = None,
) -> AddOutcome:
    """Store the file at ``source`` encrypted and record it as a Pending document.

    The file is opened once (:func:`store.files.open_source`: no symlink, no
    FIFO, a regular file only) and read once, under ``max_bytes`` counted on
    the bytes actually read; they are hashed as they are encrypted, so the
    stored bytes and the content hash cannot disagree, and a file that changed
    while being read stores nothing. Raises :class:`store.files.SourceRefused` for a file
    that is not read.

    The same bytes added twice to one collection are one document; re-adding
    a Failed document's bytes queues it again. The blob is written before the
    row, so a crash in between leaves only an orphan blob (swept at start-up).
    """
    document_id = uuid.uuid4().hex
    with open_source(source, max_bytes=max_bytes) as opened:
        label = DocumentLabel(collection_id, display_name, None, fmt)
        sealed = store.blobs.seal(document_id, opened, label=label, check=lambda _sha256: opened.finish())
    existing = _upload_with_hash(collection_id, sealed.sha256)
    if existing is None:
        try:
            _insert_pending(
                store, document_id, collection_id, sealed,
                display_name=display_name, fmt=fmt, source_path=None, also=None,
            )
            return AddOutcome(document_id, True, Status.PENDING.value)
        except IntegrityError:
            # Another process added the same bytes between our check and insert.
            existing = _upload_with_hash(collection_id, sealed.sha256)
            if existing is None:
                raise
    store.blobs.delete(document_id)
    return _readd_existing(existing)


def add_upload(
    store: Store, collection_id: str, data: bytes, *, display_name: str, fmt: str
) -> AddOutcome:
    """Store bytes that came without a path (stdin, a one-off upload) as a Pending document.

    Content decides identity here: the same bytes already uploaded to the
    collection are that document (a Failed one is queued again).
    """
    content_hash = hashlib.sha256(data).hexdigest()
    existing = _upload_with_hash(collection_id, content_hash)
    if existing is None:
        try:
            document_id = create_document(
                store, collection_id, io.BytesIO(data), content_hash=content_hash, display_name=display_name, fmt=fmt,
            )
            return AddOutcome(document_id, True, Status.PENDING.value)
        except IntegrityError:
            # Another process uploaded the same bytes between our check and insert.
            existing = _upload_with_hash(collection_id, content_hash)
            if existing is None:
                raise
    return _readd_existing(existing)


def create_document(
    store: Store,
    collection_id: str,
    source: BinaryIO,
    *,
    content_hash: str,
    display_name: str,
    fmt: str,
    source_path: str | None = None,
    also: Callable[[str], None] | None = None,
) -> str:
    """Write the encrypted blob, then the Pending row (and ``also(document_id)``,
    e.g. a repository link) in one transaction; return the new document id.

    No content de-duplication happens here: with a ``source_path`` the
    document is identified by its path, so identical bytes at two paths stay
    two documents. Without one the database still refuses a second upload of
    the same bytes to a collection (``IntegrityError``): use
    :func:`add_document` for uploads.

    A crash between the two leaves only an orphan blob (swept at start-up); a
    failed transaction deletes the blob it wrote. Nothing is stored when the
    bytes read do not hash to ``content_hash`` (:class:`FileChanged`).
    """
    document_id = uuid.uuid4().hex

    def unchanged(sha256: str) -> None:
        if sha256 != content_hash:
            raise FileChanged("the file changed while it was being added; try again")

    label = DocumentLabel(collection_id, display_name, source_path, fmt)
    sealed = store.blobs.seal(document_id, source, label=label, check=unchanged)
    _insert_pending(
        store, document_id, collection_id, sealed,
        display_name=display_name, fmt=fmt, source_path=source_path, also=also,
    )
    return document_id


def _insert_pending(
    store: Store,
    document_id: str,
    collection_id: str,
    sealed: SealedBlob,
    *,
    display_name: str,
    fmt: str,
    source_path: str | None,
    also: Callable[[str], None] | None,
) -> None:
    """The Pending row for an already written blob; the blob is deleted if the row is not written."""
    now = time.time()
    try:
        with database.atomic():
            ensure_collection(collection_id)
            Document.create(
                id=document_id,
                collection=collection_id,
                content_hash=sealed.sha256,
                display_name=seal_name(store.node_key, document_id, display_name),
                format=fmt,
                source_path=source_path,
                size_bytes=sealed.size,
                status=Status.PENDING.value,
                created_at=now,
                updated_at=now,
            )
            StatusHistory.create(document=document_id, status=Status.PENDING.value, at=now)
            if also is not None:
                also(document_id)
    except BaseException:
        store.blobs.delete(document_id)
        raise


def document_at(collection_id: str, source_path: str) -> DocumentRecord | None:
    """The document a collection holds at ``source_path``, if any."""
    row = Document.get_or_none((Document.collection == collection_id) & (Document.source_path == source_path))
    return None if row is None else document_record(row)


def document_record(row: Document) -> DocumentRecord:
    return DocumentRecord(
        id=row.id, collection_id=row.collection_id, content_hash=row.content_hash,
        sealed_name=bytes(row.display_name), format=row.format, source_path=row.source_path,
        source_id=row.source_id, size_bytes=row.size_bytes, status=row.status, failure_reason=row.failure_reason,
        progress=row.progress or 0.0, parser_version=row.parser_version, chunker_version=row.chunker_version,
        vector_identity=row.vector_identity, vector_dim=row.vector_dim, chunk_count=row.chunk_count,
        created_at=row.created_at, updated_at=row.updated_at, indexed_at=row.indexed_at,
    )


def document(document_id: str) -> DocumentRecord | None:
    row = Document.get_or_none(Document.id == document_id)
    return None if row is None else document_record(row)


def documents(
    collection_id: str | None = None, status: str | None = None, *,
    updated_since: float | None = None, document_ids: Sequence[str] | None = None,
) -> list[DocumentRecord]:
    """Documents oldest first: of one collection (None: all), optionally of one
    status, updated at or after ``updated_since``, or among ``document_ids`` (in that order)."""
    query = Document.select().order_by(Document.created_at, Document.id)
    if collection_id is not None:
        query = query.where(Document.collection == collection_id)
    if status is not None:
        query = query.where(Document.status == status)
    if updated_since is not None:
        query = query.where(Document.updated_at >= updated_since)
    if document_ids is None:
        return [document_record(row) for row in query]
    found: dict[str, DocumentRecord] = {}
    ids = list(dict.fromkeys(document_ids))
    for batch in id_batches(ids):
        found.update((row.id, document_record(row)) for row in query.where(Document.id.in_(batch)))
    return [found[d] for d in ids if d in found]


def document_ids_with_prefix(prefix: str, collection_id: str | None, limit: int) -> list[str]:
    """Up to ``limit`` ids starting with ``prefix`` (lower-case hex), of one collection or all."""
    query = Document.select(Document.id).where(Document.id.startswith(prefix)).order_by(Document.id).limit(limit)
    if collection_id is not None:
        query = query.where(Document.collection == collection_id)
    return [row.id for row in query]


def statuses(document_ids: Sequence[str]) -> dict[str, str]:
    """The status of each of ``document_ids`` that still exists."""
    found: dict[str, str] = {}
    for batch in id_batches(list(dict.fromkeys(document_ids))):
        found.update(Document.select(Document.id, Document.status).where(Document.id.in_(batch)).tuples())
    return found


def sealed_names(document_ids: Sequence[str]) -> dict[str, bytes]:
    """The sealed display name of each of ``document_ids`` that still exists."""
    found: dict[str, bytes] = {}
    for batch in id_batches(list(dict.fromkeys(document_ids))):
        rows = Document.select(Document.id, Document.display_name).where(Document.id.in_(batch)).tuples()
        found.update((document_id, bytes(sealed)) for document_id, sealed in rows)
    return found


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


def history(document_id: str) -> list[HistoryRecord]:
    """A document's status transitions, oldest first."""
    rows = StatusHistory.select().where(StatusHistory.document == document_id).order_by(StatusHistory.id)
    return [HistoryRecord(row.status, row.reason, row.at) for row in rows]


def _upload_with_hash(collection_id: str, content_hash: str) -> Document | None:
    return Document.get_or_none(
        (Document.collection == collection_id)
        & (Document.content_hash == content_hash)
        & Document.source_path.is_null()
    )


def _readd_existing(document: Document) -> AddOutcome:
    if document.status == Status.FAILED.value:
        set_status(document.id, Status.PENDING)
        return AddOutcome(document.id, False, Status.PENDING.value)
    return AddOutcome(document.id, False, document.status)


def set_status(
    document_id: str,
    status: Status,
    *,
    reason: str | None = None,
    progress: float | None = None,
    content_hash: str | None = None,
) -> bool:
    """Record a status transition; False when the document no longer exists (or,
    with ``content_hash``, no longer holds those bytes: an update in place won)."""
    now = time.time()
    fields: dict[object, object] = {
        Document.status: status.value,
        Document.failure_reason: reason,
        Document.updated_at: now,
    }
    if progress is not None:
        fields[Document.progress] = progress
    condition = Document.id == document_id
    if content_hash is not None:
        condition &= Document.content_hash == content_hash
    with database.atomic():
        updated = Document.update(fields).where(condition).execute()
        if updated:
            _add_history(document_id, status, reason, now)
    return bool(updated)


# A document's history keeps its newest entries: a file appended to without
# end is indexed again and again, and each round adds a handful of rows.
HISTORY_PER_DOCUMENT = 64


def _add_history(document_id: str, status: Status, reason: str | None, at: float) -> None:
    """One status history row, and the oldest beyond HISTORY_PER_DOCUMENT let go
    (the rows any writer added, Pending rows of updates in place included)."""
    StatusHistory.create(document=document_id, status=status.value, reason=reason, at=at)
    oldest_kept = (
        StatusHistory.select(StatusHistory.id).where(StatusHistory.document == document_id)
        .order_by(StatusHistory.id.desc()).limit(1).offset(HISTORY_PER_DOCUMENT - 1).scalar()
    )
    if oldest_kept is not None:
        StatusHistory.delete().where(
            (StatusHistory.document == document_id) & (StatusHistory.id < oldest_kept)
        ).execute()


def resolve_document(reference: str, collection_id: str | None = None) -> DocumentRecord:
    """Find a document by full id or a unique id prefix (at least 6 characters)."""
    reference = reference.strip().lower()
    query = Document.select()
    if collection_id is not None:
        query = query.where(Document.collection == collection_id)
    exact = query.where(Document.id == reference).first()
    if exact is not None:
        return document_record(exact)
    if len(reference) >= 6 and all(c in "0123456789abcdef" for c in reference):
        matches = list(query.where(Document.id.startswith(reference)).limit(2))
        if len(matches) == 1:
            return document_record(matches[0])
        if len(matches) > 1:
            raise NotFound("document id prefix is ambiguous; give more characters")
    raise NotFound("no such document")


def commit_index(
    document_id: str,
    *,
    sections: Sequence,
    chunks: Sequence,
    vectors: np.ndarray,
    identity: str,
    parser_version: int,
    chunker_version: int,
    content_hash: str | None = None,
) -> list[int] | None:
    """Replace the document's sections, chunks, FTS rows and vectors and mark it
    Indexed, all in one transaction: it is never half visible.

    ``sections`` and ``chunks`` are :mod:`kbtui.chunking` specs; ``vectors`` has
    one row per chunk. Returns the new chunk ids, or None when the document was
    deleted meanwhile (a delete always wins; nothing is written). With
    ``content_hash`` (the bytes the chunks came from), raises
    :class:`Superseded` and writes nothing when the document now holds other
    bytes: it was updated in place and is Pending again.
    """
    if len(vectors) != len(chunks):
        raise ValueError("one vector per chunk is required")
    dim = int(vectors.shape[1]) if len(chunks) else None
    now = time.time()
    with database.atomic():
        document = Document.get_or_none(Document.id == document_id)
        if document is None:
            return None
        if content_hash is not None and document.content_hash != content_hash:
            raise Superseded(document_id)
        _delete_index_rows(document_id)
        section_ids: dict[int, int] = {}
        for section in sections:
            section_ids[section.ordinal] = Section.insert(
                document=document_id,
                ordinal=section.ordinal,
                heading_path=section.heading_path,
                level=section.level,
                start_offset=section.start_offset,
                end_offset=section.end_offset,
                page=section.page,
            ).execute()
        chunk_ids: list[int] = []
        for spec, vector in zip(chunks, vectors, strict=True):
            chunk_id = Chunk.insert(
                chunk_uid=spec.chunk_uid,
                document=document_id,
                section=section_ids.get(spec.section_ordinal),
                collection_id=document.collection_id,
                ordinal=spec.ordinal,
                content=spec.content,
                content_hash=spec.content_hash,
                heading_path=spec.heading_path,
                source_path=document.source_path or "",
                symbol=spec.symbol or "",
                kind=spec.kind,
                language=spec.language,
                page=spec.page,
                start_offset=spec.start_offset,
                end_offset=spec.end_offset,
                token_estimate=spec.token_estimate,
            ).execute()
            Vector.insert(chunk=chunk_id, identity=identity, dim=dim, embedding=to_blob(vector)).execute()
            chunk_ids.append(chunk_id)
        Document.update(
            {
                Document.status: Status.INDEXED.value,
                Document.failure_reason: None,
                Document.progress: 1.0,
                Document.chunk_count: len(chunk_ids),
                Document.parser_version: parser_version,
                Document.chunker_version: chunker_version,
                Document.vector_identity: identity,
                Document.vector_dim: dim,
                Document.indexed_at: now,
                Document.updated_at: now,
            }
        ).where(Document.id == document_id).execute()
        _add_history(document_id, Status.INDEXED, None, now)
    return chunk_ids


def _delete_index_rows(document_id: str) -> list[int]:
    chunk_ids = [c.id for c in Chunk.select(Chunk.id).where(Chunk.document == document_id)]
    for batch in id_batches(chunk_ids):
        Vector.delete().where(Vector.chunk.in_(batch)).execute()
    if chunk_ids:
        # Deleting chunk rows fires the FTS delete trigger for each.
        Chunk.delete().where(Chunk.document == document_id).execute()
    Section.delete().where(Section.document == document_id).execute()
    return chunk_ids


def purge_document(store: Store, document_id: str) -> list[int] | None:
    """Delete every row of the document child-to-parent in one transaction,
    then its blob. Returns the removed chunk ids, or None if it did not exist.

    A failed blob unlink still counts as a successful delete: the rows are
    gone, and the orphan sweep reclaims the file at the next start.
    """
    with database.atomic():
        if Document.get_or_none(Document.id == document_id) is None:
            return None
        chunk_ids = _delete_index_rows(document_id)
        StatusHistory.delete().where(StatusHistory.document == document_id).execute()
        Document.delete().where(Document.id == document_id).execute()
    try:
        store.blobs.delete(document_id)
    except OSError as exc:
        log.warning("blob unlink failed after purge (%s); the start-up sweep will retry", type(exc).__name__)
    return chunk_ids


def sweep_orphan_blobs(store: Store, *, grace_s: float = ORPHAN_GRACE_S) -> int:
    """Delete the blobs of documents this catalog removed, and crash leftovers.

    A blob is deleted only when the catalog records its document as removed
    (``removed_document``, filled by a trigger on every delete): a crash
    between the delete commit and the unlink leaves exactly those. A blob the
    catalog has never heard of is kept whatever its age, because silence is no
    proof: the catalog may be older than the blobs (restored from a backup),
    or an add may have crashed between the blob and its row (kbtui doctor
    counts those). Temp files of interrupted writes go once older than
    ``grace_s``. Call it only on a catalog known to be whole (``open_store``
    refuses any other) and open for writing.
    """
    removed_ids = {
        row[0]
        for row in database.execute_sql(
            "SELECT id FROM removed_document WHERE id NOT IN (SELECT id FROM document)"
        ).fetchall()
    }
    removed = sum(1 for blob_id in store.blobs.blob_ids() & removed_ids if store.blobs.delete(blob_id))
    # A record is needed only while its blob exists.
    settled = removed_ids - store.blobs.blob_ids()
    if settled:
        with database.atomic():
            for batch in _batches(sorted(settled), 500):
                database.execute_sql(
                    f"DELETE FROM removed_document WHERE id IN ({', '.join('?' for _ in batch)})", batch
                )
    return removed + store.blobs.remove_temp_files(older_than=time.time() - grace_s)


def _batches(items: list[str], size: int) -> list[list[str]]:
    return [items[start : start + size] for start in range(0, len(items), size)]


def reset_non_terminal() -> int:
    """At start-up, put every document left mid-pipeline back to Pending."""
    stuck = [s for s in NON_TERMINAL if s != Status.PENDING.value]
    ids = [d.id for d in Document.select(Document.id).where(Document.status.in_(stuck))]
    for document_id in ids:
        set_status(document_id, Status.PENDING, progress=0.0)
    return len(ids)


def pending_document_ids(limit: int | None = None) -> list[str]:
    query = (
        Document.select(Document.id)
        .where(Document.status == Status.PENDING.value)
        .order_by(Document.created_at, Document.id)
    )
    if limit is not None:
        query = query.limit(limit)
    return [d.id for d in query]


def stale_document_ids(
    *, parser_version: int, chunker_version: int, vector_identity: str | None, limit: int
) -> list[str]:
    """Indexed documents built by another parser, chunker or (when given) vector
    identity; then documents that failed as no_text under an older parser."""
    condition = (Document.parser_version != parser_version) | (Document.chunker_version != chunker_version)
    if vector_identity is not None:
        condition = condition | (Document.vector_identity != vector_identity)
    query = (
        Document.select(Document.id)
        .where((Document.status == Status.INDEXED.value) & condition)
        .order_by(Document.indexed_at)
        .limit(limit)
    )
    stale = [d.id for d in query]
    if len(stale) < limit:
        stale += no_text_document_ids(parser_version, limit - len(stale))
    return stale


def mark_pending(document_ids: Sequence[str]) -> None:
    """Queue documents for (re-)indexing; an indexed one keeps serving meanwhile."""
    for document_id in document_ids:
        set_status(document_id, Status.PENDING, progress=0.0)


def status_counts(collection_id: str | None = None) -> dict[str, int]:
    """How many documents are in each status."""
    sql = "SELECT status, count(*) FROM document"
    params: list[object] = []
    if collection_id is not None:
        sql += " WHERE collection_id = ?"
        params.append(collection_id)
    return dict(database.execute_sql(sql + " GROUP BY status", params).fetchall())
