"""Catalog operations for registered Git repositories and the documents they own.

A repository document is an ordinary document whose ``source_path`` is set; its
identity is (collection, source_path). The ``repository_document`` link says
which registered repository put it there, so an import only ever updates or
purges its own documents.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from peewee import (
    JOIN,
    BlobField,
    FloatField,
    ForeignKeyField,
    IntegrityError,
    TextField,
)

from store import Store
from store.blobs import open_name, seal_name
from store.catalog import create_document
from store.db import database
from store.errors import NotFound, StoreError
from store.models import BaseModel, Document, Status, StatusHistory

_ROOT_DIGEST_LABEL = b"kbtui repository root v1|"


class Repository(BaseModel):
    id = TextField(primary_key=True)
    name = BlobField()
    root_path = BlobField()
    root_digest = TextField(unique=True)
    created_at = FloatField()
    last_import_at = FloatField(null=True)
    last_import_status = TextField(null=True)


class RepositoryDocument(BaseModel):
    document = ForeignKeyField(Document, column_name="document_id", primary_key=True, on_delete="CASCADE")
    repository = ForeignKeyField(Repository, column_name="repository_id", on_delete="CASCADE")


class RepositoryAlreadyRegistered(StoreError):
    pass


@dataclass(frozen=True)
class RegisteredRepository:
    id: str
    name: str
    root: str
    created_at: float
    last_import_at: float | None
    last_import_status: str | None


@dataclass(frozen=True)
class PathDocument:
    """The document currently holding a (collection, source_path) identity."""

    document_id: str
    content_hash: str
    status: str
    size_bytes: int
    repository_id: str | None  # None: no registered repository owns it


def root_digest(node_key: bytes, root: str) -> str:
    """A keyed hash of a root path: equal roots compare equal, the path stays secret."""
    return hmac.new(node_key, _ROOT_DIGEST_LABEL + root.encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()


def _name_context(repository_id: str) -> str:
    return f"repository-name:{repository_id}"


def _root_context(repository_id: str) -> str:
    return f"repository-root:{repository_id}"


def _registered(store: Store, row: Repository) -> RegisteredRepository:
    return RegisteredRepository(
        id=row.id,
        name=open_name(store.node_key, _name_context(row.id), bytes(row.name)),
        root=open_name(store.node_key, _root_context(row.id), bytes(row.root_path)),
        created_at=row.created_at,
        last_import_at=row.last_import_at,
        last_import_status=row.last_import_status,
    )


def register_repository(store: Store, root: str, name: str) -> RegisteredRepository:
    """Record an already verified repository root under ``name``.

    Raises :class:`RepositoryAlreadyRegistered` when the root or the name is taken.
    """
    if any(existing.name == name for existing in list_repositories(store)):
        raise RepositoryAlreadyRegistered("a repository with that name is already registered")
    repository_id = uuid.uuid4().hex
    try:
        with database.atomic():
            Repository.create(
                id=repository_id,
                name=seal_name(store.node_key, _name_context(repository_id), name),
                root_path=seal_name(store.node_key, _root_context(repository_id), root),
                root_digest=root_digest(store.node_key, root),
                created_at=time.time(),
            )
    except IntegrityError:
        raise RepositoryAlreadyRegistered("that folder is already registered") from None
    return get_repository(store, repository_id)


def get_repository(store: Store, repository_id: str) -> RegisteredRepository:
    row = Repository.get_or_none(Repository.id == repository_id)
    if row is None:
        raise NotFound("no such repository")
    return _registered(store, row)


def list_repositories(store: Store) -> list[RegisteredRepository]:
    return [_registered(store, row) for row in Repository.select().order_by(Repository.created_at, Repository.id)]


def resolve_repository(store: Store, reference: str) -> RegisteredRepository:
    """Find a registered repository by id, exact name, or unique id prefix (6+ hex)."""
    wanted = reference.strip()
    repositories = list_repositories(store)
    for candidate in repositories:
        if candidate.id == wanted.lower():
            return candidate
    for candidate in repositories:
        if candidate.name == wanted:
            return candidate
    lowered = wanted.lower()
    if len(lowered) >= 6 and all(c in "0123456789abcdef" for c in lowered):
        matches = [r for r in repositories if r.id.startswith(lowered)]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise NotFound("repository id prefix is ambiguous; give more characters")
    raise NotFound("no such repository")


def document_count(repository_id: str) -> int:
    return RepositoryDocument.select().where(RepositoryDocument.repository == repository_id).count()


def unregister_repository(
    store: Store, repository_id: str, *, purge: Callable[[str], bool] | None = None
) -> int:
    """Forget a registration; with ``purge`` also delete what it imported, one
    document at a time through that callable (the node's single purge path,
    which also drops the documents' ANN labels).

    Returns the number of documents purged. Kept documents stay searchable as
    ordinary documents (their repository link is dropped).
    """
    owned = [
        link.document_id
        for link in RepositoryDocument.select(RepositoryDocument.document).where(
            RepositoryDocument.repository == repository_id
        )
    ]
    purged = sum(purge(document_id) for document_id in owned) if purge is not None else 0
    with database.atomic():
        deleted = Repository.delete().where(Repository.id == repository_id).execute()
    if not deleted:
        raise NotFound("no such repository")
    return purged


def documents_by_path(collection_id: str) -> dict[str, PathDocument]:
    """Every path-identified document of a collection, with its owning repository."""
    rows = (
        Document.select(Document.id, Document.source_path, Document.content_hash, Document.status,
                        Document.size_bytes, RepositoryDocument.repository)
        .join(RepositoryDocument, join_type=JOIN.LEFT_OUTER, on=(RepositoryDocument.document == Document.id))
        .where((Document.collection == collection_id) & Document.source_path.is_null(False))
        .tuples()
    )
    return {
        source_path: PathDocument(document_id, content_hash, status, size, repository_id)
        for document_id, source_path, content_hash, status, size, repository_id in rows
    }


def add_repository_document(
    store: Store,
    repository_id: str,
    collection_id: str,
    *,
    source_path: str,
    display_name: str,
    fmt: str,
    data: bytes,
    content_hash: str,
) -> str:
    """Store a new repository file: encrypted blob first, then the Pending row and
    its repository link in one transaction. Returns the new document id.

    A crash between the two leaves only an orphan blob (swept at start-up).
    """
    return create_document(
        store, collection_id, io.BytesIO(data),
        content_hash=content_hash, display_name=display_name, fmt=fmt, source_path=source_path,
        also=lambda document_id: RepositoryDocument.create(document=document_id, repository=repository_id),
    )


def update_repository_document(
    store: Store,
    repository_id: str,
    document_id: str,
    *,
    fmt: str,
    data: bytes,
    content_hash: str,
) -> bool:
    """Replace a document's source in place and queue it again (Pending).

    The blob is replaced atomically; the document keeps serving its committed
    index until the new one commits. Returns False when the document was
    deleted meanwhile (its fresh blob is then removed again).
    """
    size = store.blobs.write(document_id, io.BytesIO(data), expected_sha256=content_hash)
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
            claim_document(repository_id, document_id)
    if not updated:
        store.blobs.delete(document_id)
    return bool(updated)


def claim_document(repository_id: str, document_id: str) -> None:
    """Link an unowned path document to this repository (idempotent)."""
    RepositoryDocument.insert(document=document_id, repository=repository_id).on_conflict_ignore().execute()


def record_import(repository_id: str, status: str) -> None:
    """Remember when the last import ran and how it ended."""
    with database.atomic():
        Repository.update(
            {Repository.last_import_at: time.time(), Repository.last_import_status: status}
        ).where(Repository.id == repository_id).execute()
