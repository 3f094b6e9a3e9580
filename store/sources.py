"""Catalog operations for sources (folders, single files, Git repositories) and
the documents they own.

A source belongs to one collection. Its documents are ordinary documents with
``source_id`` and ``source_path`` set: within a source a document is
identified by its relative path, so an edit updates it in place, a rename
moves it, and the same bytes at two paths are two documents. The root path
and the name are private to the operator and stored sealed; ``root_digest``
(a keyed hash) lets one root be found again without storing it in the clear.

``source_file`` remembers the look of each file when it was last read (size,
modification and change times, inode, device), so a rescan reads and hashes
only files whose look changed. A look taken too close to the file's own last
change is not trusted (a write in the same clock tick would leave it equal).
"""

from __future__ import annotations

import io
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace

from peewee import BlobField, FloatField, IntegerField, IntegrityError, TextField

from store import Store
from store.blob_labels import label_of, refresh_label
from store.blobs import open_name, seal_name
from store.catalog import create_document, ensure_collection
from store.db import database
from store.errors import BlobCorrupt, NotFound, SourceAlreadyRegistered, StoreError
from store.models import BaseModel, Document, Status, StatusHistory
from store.records import FileState, PathDocument, RegisteredSource
from store.source_keys import SOURCE_KINDS, name_context, report_context, root_context, root_digest

log = logging.getLogger(__name__)


class Source(BaseModel):
    id = TextField(primary_key=True)
    kind = TextField()
    collection_id = TextField()
    name = BlobField()
    root_path = BlobField()
    root_digest = TextField()
    include_sensitive = IntegerField(default=0)
    watching = IntegerField(default=1)
    watch_state = TextField(null=True)
    created_at = FloatField()
    last_scan_at = FloatField(null=True)
    last_scan_status = TextField(null=True)
    last_scan_report = BlobField(null=True)
    last_commit = TextField(null=True)
    root_device = IntegerField(null=True)
    root_inode = IntegerField(null=True)
    unreachable_reason = TextField(null=True)
    unreachable_since = FloatField(null=True)


class SourceFileRow(BaseModel):
    document_id = TextField(primary_key=True)
    size = IntegerField()
    mtime_ns = IntegerField()
    ctime_ns = IntegerField()
    inode = IntegerField()
    device = IntegerField()
    checked_ns = IntegerField()

    class Meta:
        table_name = "source_file"


class UnreachableDocument(BaseModel):
    document_id = TextField(primary_key=True)
    source_id = TextField()
    reason = TextField()
    since = FloatField()

    class Meta:
        table_name = "unreachable_document"


def _registered(store: Store, row: Source) -> RegisteredSource:
    return RegisteredSource(
        id=row.id,
        kind=row.kind,
        collection_id=row.collection_id,
        name=open_name(store.node_key, name_context(row.id), bytes(row.name)),
        root=open_name(store.node_key, root_context(row.id), bytes(row.root_path)),
        include_sensitive=bool(row.include_sensitive),
        watching=bool(row.watching),
        watch_state=row.watch_state,
        created_at=row.created_at,
        last_scan_at=row.last_scan_at,
        last_scan_status=row.last_scan_status,
        last_commit=row.last_commit,
        root_identity=(row.root_device, row.root_inode) if row.root_device is not None else None,
        unreachable_reason=row.unreachable_reason,
        unreachable_since=row.unreachable_since,
    )


# ---------------------------------------------------------------- registrations


def register_source(
    store: Store, *, kind: str, root: str, collection_id: str, name: str, include_sensitive: bool = False,
    root_identity: tuple[int, int] | None = None,
) -> RegisteredSource:
    """Record an already verified root as a source of ``collection_id``.

    Raises :class:`SourceAlreadyRegistered` when the root is already a source
    of that collection, or the name is taken there.
    """
    if kind not in SOURCE_KINDS:
        raise ValueError(f"unknown source kind {kind!r}")
    if any(s.name == name for s in list_sources(store, collection_id)):
        raise SourceAlreadyRegistered("a source with that name is already registered in the collection")
    source_id = uuid.uuid4().hex
    try:
        with database.atomic():
            ensure_collection(collection_id)
            Source.create(
                id=source_id,
                kind=kind,
                collection_id=collection_id,
                name=seal_name(store.node_key, name_context(source_id), name),
                root_path=seal_name(store.node_key, root_context(source_id), root),
                root_digest=root_digest(store.node_key, root),
                include_sensitive=int(include_sensitive),
                created_at=time.time(),
                root_device=root_identity[0] if root_identity else None,
                root_inode=root_identity[1] if root_identity else None,
            )
    except IntegrityError:
        raise SourceAlreadyRegistered("that path is already a source of the collection") from None
    return get_source(store, source_id)


def get_source(store: Store, source_id: str) -> RegisteredSource:
    row = Source.get_or_none(Source.id == source_id)
    if row is None:
        raise NotFound("no such source")
    return _registered(store, row)


def find_source(store: Store, root: str, collection_id: str) -> RegisteredSource | None:
    """The source of ``collection_id`` at ``root`` (a real path), if registered."""
    row = Source.get_or_none(
        (Source.root_digest == root_digest(store.node_key, root)) & (Source.collection_id == collection_id)
    )
    return None if row is None else _registered(store, row)


def sources_at(store: Store, root: str) -> list[RegisteredSource]:
    """Every source (of any collection) at ``root``."""
    rows = Source.select().where(Source.root_digest == root_digest(store.node_key, root)).order_by(Source.created_at)
    return [_registered(store, row) for row in rows]


def list_sources(store: Store, collection_id: str | None = None) -> list[RegisteredSource]:
    query = Source.select().order_by(Source.created_at, Source.id)
    if collection_id is not None:
        query = query.where(Source.collection_id == collection_id)
    return [_registered(store, row) for row in query]


def resolve_source(store: Store, reference: str, collection_id: str | None = None) -> RegisteredSource:
    """Find a source by id, exact name, or unique id prefix (6+ hex); ``collection_id`` narrows it."""
    wanted = reference.strip()
    candidates = list_sources(store, collection_id)
    for candidate in candidates:
        if candidate.id == wanted.lower():
            return candidate
    named = [c for c in candidates if c.name == wanted]
    if len(named) == 1:
        return named[0]
    if len(named) > 1:
        raise NotFound("that name is a source in several collections; give the collection or the id")
    lowered = wanted.lower()
    if len(lowered) >= 6 and all(c in "0123456789abcdef" for c in lowered):
        matches = [s for s in candidates if s.id.startswith(lowered)]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise NotFound("source id prefix is ambiguous; give more characters")
    raise NotFound("no such source")


def watched_sources(store: Store) -> list[RegisteredSource]:
    """The sources a running node keeps in sync: watching on, scanned at least once."""
    rows = Source.select().where((Source.watching == 1) & Source.last_scan_at.is_null(False))
    return [_registered(store, row) for row in rows.order_by(Source.created_at)]


def registration_stamp() -> tuple[tuple[str, bool, bool], ...]:
    """A cheap fingerprint of what a watcher cares about: (id, watching, scanned once) per source."""
    rows = Source.select(Source.id, Source.watching, Source.last_scan_at).order_by(Source.id).tuples()
    return tuple((source_id, bool(watching), scanned is not None) for source_id, watching, scanned in rows)


def set_watching(source_id: str, watching: bool) -> None:
    with database.atomic():
        updated = Source.update({Source.watching: int(watching)}).where(Source.id == source_id).execute()
    if not updated:
        raise NotFound("no such source")


def set_include_sensitive(source_id: str, include: bool) -> None:
    with database.atomic():
        Source.update({Source.include_sensitive: int(include)}).where(Source.id == source_id).execute()


def set_watch_state(states: Mapping[str, str | None]) -> None:
    """Record how a running node watches each source (None: not watched)."""
    if not states:
        return
    with database.atomic():
        for source_id, state in states.items():
            Source.update({Source.watch_state: state}).where(Source.id == source_id).execute()


def clear_watch_states() -> None:
    with database.atomic():
        Source.update({Source.watch_state: None}).where(Source.watch_state.is_null(False)).execute()


def move_to_collection(source_id: str, collection_id: str) -> None:
    """Give a source that owns no documents another collection."""
    with database.atomic():
        if Document.select().where(Document.source_id == source_id).exists():
            raise StoreError("a source that holds documents stays in its collection")
        ensure_collection(collection_id)
        Source.update({Source.collection_id: collection_id}).where(Source.id == source_id).execute()


def record_scan(
    store: Store, source_id: str, status: str, *, report_json: str | None = None, last_commit: str | None = None
) -> None:
    """Remember when the last scan ran, how it ended, and (sealed) what it changed."""
    fields: dict[object, object] = {Source.last_scan_at: time.time(), Source.last_scan_status: status}
    if report_json is not None:
        fields[Source.last_scan_report] = seal_name(store.node_key, report_context(source_id), report_json)
    if last_commit is not None:
        fields[Source.last_commit] = last_commit
    with database.atomic():
        Source.update(fields).where(Source.id == source_id).execute()


def record_reachability(
    source_id: str,
    *,
    reason: str | None,
    documents: Mapping[str, str] | None,
    root_identity: tuple[int, int] | None = None,
) -> None:
    """What a scan could not see: the source as a whole (``reason``, None when
    its root was seen) and the documents it kept without proof that they are
    gone (document id -> reason; None leaves them as they are); a flag already
    raised keeps its first time. ``root_identity``, when given, becomes the
    identity the next scan expects."""
    now = time.time()
    with database.atomic():
        row = Source.get_or_none(Source.id == source_id)
        if row is None:
            return
        fields: dict[object, object] = {
            Source.unreachable_reason: reason,
            Source.unreachable_since: (row.unreachable_since or now) if reason is not None else None,
        }
        if root_identity is not None:
            fields[Source.root_device], fields[Source.root_inode] = root_identity
        Source.update(fields).where(Source.id == source_id).execute()
        if documents is None:
            return
        since = dict(
            UnreachableDocument.select(UnreachableDocument.document_id, UnreachableDocument.since)
            .where(UnreachableDocument.source_id == source_id)
            .tuples()
        )
        UnreachableDocument.delete().where(UnreachableDocument.source_id == source_id).execute()
        for document_id, why in documents.items():
            UnreachableDocument.insert(
                document_id=document_id, source_id=source_id, reason=why, since=since.get(document_id, now)
            ).on_conflict_replace().execute()


def unreachable_documents(source_id: str | None = None) -> dict[str, dict[str, str]]:
    """Documents kept although their source could not show them, by source: id -> reason."""
    query = UnreachableDocument.select(
        UnreachableDocument.source_id, UnreachableDocument.document_id, UnreachableDocument.reason
    )
    if source_id is not None:
        query = query.where(UnreachableDocument.source_id == source_id)
    found: dict[str, dict[str, str]] = {}
    for owner, document_id, reason in query.tuples():
        found.setdefault(owner, {})[document_id] = reason
    return found


def last_scan_report(store: Store, source_id: str) -> str | None:
    """The sealed report of the last scan, opened (JSON text), or None."""
    row = Source.select(Source.last_scan_report).where(Source.id == source_id).first()
    if row is None or row.last_scan_report is None:
        return None
    return open_name(store.node_key, report_context(source_id), bytes(row.last_scan_report))


def document_counts(source_id: str | None = None) -> dict[str, dict[str, int]]:
    """Documents by status, per source (of one source when given)."""
    query = Document.select(Document.source_id, Document.status).where(Document.source_id.is_null(False))
    if source_id is not None:
        query = query.where(Document.source_id == source_id)
    counts: dict[str, Counter[str]] = {}
    for owner, status in query.tuples():
        counts.setdefault(owner, Counter())[status] += 1
    return {owner: dict(counter) for owner, counter in counts.items()}


def unregister_source(store: Store, source_id: str, *, purge: Callable[[str], bool] | None = None) -> int:
    """Forget a source; with ``purge`` also delete its documents, one at a time
    through that callable (the node's single purge path, which also drops the
    documents' ANN labels). Returns how many documents were purged.

    Without ``purge`` its documents stay, searchable, as documents of no
    source (a later source at the same root adopts them by path instead of
    adding them again).
    """
    owned = [d.id for d in Document.select(Document.id).where(Document.source_id == source_id)]
    purged = sum(purge(document_id) for document_id in owned) if purge is not None else 0
    with database.atomic():
        if Source.get_or_none(Source.id == source_id) is None:
            raise NotFound("no such source")
        if purge is None:
            _release_documents(source_id)
        UnreachableDocument.delete().where(UnreachableDocument.source_id == source_id).execute()
        Source.delete().where(Source.id == source_id).execute()
    return purged


def _release_documents(source_id: str) -> None:
    """Make a source's documents documents of no source (kept, searchable)."""
    source = Source.get(Source.id == source_id)
    taken = {
        path
        for (path,) in Document.select(Document.source_path)
        .where(
            (Document.collection == source.collection_id)
            & Document.source_id.is_null()
            & Document.source_path.is_null(False)
        )
        .tuples()
    }
    for document_id, path in (
        Document.select(Document.id, Document.source_path).where(Document.source_id == source_id).tuples()
    ):
        if path in taken:
            # Another kept document already holds this path in the collection:
            # this one stays with a path no scan will ever claim.
            path = f"{path}#{document_id[:8]}"
        taken.add(path)
        Document.update({Document.source_id: None, Document.source_path: path}).where(
            Document.id == document_id
        ).execute()


# ---------------------------------------------------------------- documents of a source


def documents_of(source_id: str) -> dict[str, PathDocument]:
    """Every document of a source by relative path, with the look of its file when read."""
    rows = database.execute_sql(
        "SELECT d.id, d.source_path, d.content_hash, d.status, d.size_bytes,"
        " f.size, f.mtime_ns, f.ctime_ns, f.inode, f.device, f.checked_ns"
        " FROM document d LEFT JOIN source_file f ON f.document_id = d.id"
        " WHERE d.source_id = ?",
        (source_id,),
    ).fetchall()
    found: dict[str, PathDocument] = {}
    for document_id, path, content_hash, status, size_bytes, *look in rows:
        state = FileState(*look) if look[0] is not None else None
        found[path] = PathDocument(document_id, content_hash, status, size_bytes, state)
    return found


def loose_document_at(collection_id: str, source_path: str) -> PathDocument | None:
    """A document of no source at ``source_path`` in the collection (a source may adopt it)."""
    row = Document.get_or_none(
        (Document.collection == collection_id) & Document.source_id.is_null() & (Document.source_path == source_path)
    )
    if row is None:
        return None
    return PathDocument(row.id, row.content_hash, row.status, row.size_bytes, None)


def adopt_document(source_id: str, document_id: str) -> None:
    """Make a document of no source this source's (it sits at one of its paths)."""
    with database.atomic():
        Document.update({Document.source_id: source_id}).where(
            (Document.id == document_id) & Document.source_id.is_null()
        ).execute()


def add_source_document(
    store: Store,
    source_id: str,
    collection_id: str,
    *,
    source_path: str,
    display_name: str,
    fmt: str,
    data: bytes,
    content_hash: str,
    state: FileState,
) -> str:
    """Store a new file of a source: encrypted blob first, then the Pending row
    and the file's look in one transaction. Returns the new document id.

    A crash between the two leaves only an orphan blob (swept at start-up).
    """

    def owned(document_id: str) -> None:
        Document.update({Document.source_id: source_id}).where(Document.id == document_id).execute()
        _write_state(document_id, state)

    return create_document(
        store, collection_id, io.BytesIO(data),
        content_hash=content_hash, display_name=display_name, fmt=fmt, source_path=source_path, also=owned,
    )


def update_source_document(
    store: Store, document_id: str, *, fmt: str, data: bytes, content_hash: str, state: FileState
) -> bool:
    """Replace a document's source in place and queue it again (Pending).

    The blob is replaced atomically; the document keeps serving its committed
    index until the new one commits (a pipeline still working on the old
    bytes notices the new content hash and lets go). Returns False when the
    document was deleted meanwhile (its fresh blob is then removed again).
    """
    document = Document.get_or_none(Document.id == document_id)
    if document is None:
        return False
    label = replace(label_of(store, document), format=fmt)
    size = store.blobs.write(document_id, io.BytesIO(data), label=label, expected_sha256=content_hash)
    now = time.time()
    with database.atomic():
        updated = (
            Document.update(
                {
                    Document.content_hash: content_hash,
                    Document.size_bytes: size,
                    Document.format: fmt,
                    Document.status: Status.PENDING.value,
                    Document.failure_reason: None,
                    Document.progress: 0.0,
                    Document.updated_at: now,
                }
            )
            .where(Document.id == document_id)
            .execute()
        )
        if updated:
            StatusHistory.create(document=document_id, status=Status.PENDING.value, at=now)
            _write_state(document_id, state)
    if not updated:
        store.blobs.delete(document_id)
    return bool(updated)


def move_source_document(store: Store, document_id: str, *, source_path: str, state: FileState) -> bool:
    """A rename: the same bytes now live at ``source_path``. The document, its
    chunks, vectors and status stay; its path (row, chunks, full-text index)
    and display name follow. Nothing is extracted or embedded again.
    Returns False when the document no longer exists."""
    now = time.time()
    with database.atomic():
        if Document.get_or_none(Document.id == document_id) is None:
            return False
        # chunk_fts has external content and no update trigger: out with the
        # old rows, change the chunks, in with the new.
        database.execute_sql(
            "INSERT INTO chunk_fts(chunk_fts, rowid, source_path, heading_path, symbol, content,"
            " collection_id, document_id)"
            " SELECT 'delete', id, source_path, heading_path, symbol, content, collection_id, document_id"
            " FROM chunk WHERE document_id = ?",
            (document_id,),
        )
        database.execute_sql("UPDATE chunk SET source_path = ? WHERE document_id = ?", (source_path, document_id))
        database.execute_sql(
            "INSERT INTO chunk_fts(rowid, source_path, heading_path, symbol, content, collection_id, document_id)"
            " SELECT id, source_path, heading_path, symbol, content, collection_id, document_id"
            " FROM chunk WHERE document_id = ?",
            (document_id,),
        )
        Document.update(
            {
                Document.source_path: source_path,
                Document.display_name: seal_name(store.node_key, document_id, source_path),
                Document.updated_at: now,
            }
        ).where(Document.id == document_id).execute()
        _write_state(document_id, state)
    # The blob's sealed label names the path too (for kbtui recover). The
    # rename stands if this fails: kbtui doctor --upgrade-blobs relabels it.
    try:
        refresh_label(store, document_id)
    except (BlobCorrupt, OSError) as exc:
        log.warning("could not relabel the stored source of document %s (%s)", document_id, type(exc).__name__)
    return True


def record_file_state(document_id: str, state: FileState) -> None:
    """Remember the look of a file whose bytes were found unchanged."""
    with database.atomic():
        _write_state(document_id, state)


def _write_state(document_id: str, state: FileState) -> None:
    SourceFileRow.insert(
        document_id=document_id, size=state.size, mtime_ns=state.mtime_ns, ctime_ns=state.ctime_ns,
        inode=state.inode, device=state.device, checked_ns=state.checked_ns,
    ).on_conflict_replace().execute()
