"""Rebuilding a catalog from the encrypted sources and the key alone.

Each format-2 blob carries, sealed inside, what its catalog row needs
(:class:`store.blobs.StoredLabel`). :func:`recover_catalog` reads them from
a data directory whose catalog is lost (or from a bare ``blobs/``), and makes
a new data directory with the same key, in which every source that
authenticates is a Pending document again: same id, collection, display name,
source path and format. Indexing them (extract, chunk, embed) is the
pipeline's work, done above the store.

The sources are only read, never changed or deleted; the ones that cannot be
brought back (damaged, sealed with another key, format 1, or an older source
of the same document path) are listed with a reason. ``recover.partial`` in
the new directory marks a recovery under way: a re-run after a kill goes on
where it stopped, and :func:`finish_recovery` removes it.
"""

from __future__ import annotations

import hmac
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from peewee import IntegrityError

from store import Store
from store.backup import read_key_file
from store.blobs import BlobFile, StoredLabel, seal_name
from store.catalog import ensure_collection
from store.datadir import BLOB_DIR_NAME, FINGERPRINT_FILE_NAME, observe, prepare_home, read_fingerprint_file
from store.db import database
from store.errors import BlobCorrupt, DataDirectoryProblem, KeyProblem, StoreError
from store.files import copy_durably, create_once, fsync_dir
from store.keys import KEY_FILE_NAME, key_fingerprint
from store.models import Document, Status, StatusHistory
from store.opening import create_store, open_store

RECOVER_MARKER_NAME = "recover.partial"

# Why a source was not brought back (fixed, content-free).
UNAUTHENTIC = "fails authentication with this key (damaged, or sealed with another key)"
LEGACY = "format 1: it carries no catalog facts (kbtui doctor --upgrade-blobs adds them while a catalog exists)"
SUPERSEDED = "an older source of the same document (a newer one was recovered)"
CONFLICT = "conflicts with another recovered document"


@dataclass(frozen=True)
class Unrecovered:
    blob_id: str
    reason: str


@dataclass(frozen=True)
class RecoverReport:
    documents: tuple[str, ...]  # every recovered document id, this run's and an interrupted run's
    unrecovered: tuple[Unrecovered, ...]
    resumed: bool


def source_blob_dir(source: Path) -> Path:
    """The blobs of ``source``: a data directory's ``blobs/``, or a blob directory itself."""
    return source / BLOB_DIR_NAME if (source / BLOB_DIR_NAME).is_dir() else source


def read_source_key(source: Path, key_file: Path | None) -> bytes:
    """The key to recover with: ``key_file``, else the source data directory's
    ``node.key``; checked against the source's ``node.fingerprint`` when there is one."""
    if key_file is None and not (source / KEY_FILE_NAME).exists():
        raise KeyProblem(f"no node key: {source} holds no {KEY_FILE_NAME}; give it with --key FILE")
    key = read_key_file(key_file if key_file is not None else source / KEY_FILE_NAME)
    recorded, _ = read_fingerprint_file(source)
    if recorded is not None and not hmac.compare_digest(recorded.key_fingerprint, key_fingerprint(key)):
        raise KeyProblem(f"the key is not the one {source} was written with ({FINGERPRINT_FILE_NAME} says so)")
    return key


def recover_catalog(
    home: Path, source: Path, key: bytes, *, on_progress: Callable[[str, int, int], object] | None = None
) -> RecoverReport:
    """Make ``home`` (a new data directory, or one this recovery left
    unfinished) hold every source in ``source`` that can be brought back, as a
    Pending document."""
    progress = on_progress or (lambda *_: None)
    blob_dir = source_blob_dir(source)
    _refuse_overlap(home, source)
    names = _blob_files(blob_dir)
    labels, unrecovered = _read_labels(blob_dir, names, key, progress)
    if names and not labels and all(u.reason == UNAUTHENTIC for u in unrecovered):
        raise KeyProblem("the key opens none of the sources; is it the right key? nothing was changed")
    chosen, superseded = _newest_per_document(labels)
    unrecovered.extend(Unrecovered(blob_id, SUPERSEDED) for blob_id in superseded)
    store, resumed = _open_target(home, key)
    try:
        present = {row.id for row in Document.select(Document.id)}
        for done, stored in enumerate(chosen, 1):
            if stored.document_id not in present:
                problem = _bring_back(store, blob_dir, stored)
                if problem is None:
                    present.add(stored.document_id)
                else:
                    unrecovered.append(Unrecovered(stored.document_id, problem))
            progress("catalog", done, len(chosen))
        fsync_dir(store.blobs.root)
    finally:
        store.close()
    return RecoverReport(tuple(sorted(present)), tuple(sorted(unrecovered, key=lambda u: u.blob_id)), resumed)


def finish_recovery(home: Path) -> None:
    """Remove ``recover.partial``: the recovery is complete."""
    (home / RECOVER_MARKER_NAME).unlink(missing_ok=True)


def _blob_files(directory: Path) -> list[str]:
    """The names of the regular files in ``directory`` (temp files and locks start with a dot)."""
    try:
        with os.scandir(directory) as entries:
            return sorted(e.name for e in entries if not e.name.startswith(".") and e.is_file(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError):
        raise StoreError(f"{directory} is not a directory; give a data directory or its blobs/") from None


def _refuse_overlap(home: Path, source: Path) -> None:
    target, origin = home.resolve(), source.resolve()
    if target == origin or origin in target.parents or target in origin.parents:
        raise StoreError("recover into a new data directory, apart from the one recovered from")


def _open_target(home: Path, key: bytes) -> tuple[Store, bool]:
    """The new data directory, made around ``key``, or one this recovery left unfinished."""
    prepare_home(home, create=True)
    marker = home / RECOVER_MARKER_NAME
    fingerprint = key_fingerprint(key).hex().encode("ascii")
    if marker.exists():
        if marker.read_bytes() != fingerprint:
            raise DataDirectoryProblem(
                f"the data directory holds an unfinished recovery with another key ({RECOVER_MARKER_NAME})"
            )
        if observe(home).fresh:  # killed before the directory was initialised
            return create_store(home, key), True
        return open_store(home), True
    if not observe(home).fresh:
        raise DataDirectoryProblem(
            f"the data directory {home} is not empty; recover only into a new one (point KBTUI_HOME at it)"
        )
    create_once(marker, fingerprint)
    return create_store(home, key), False


def _read_labels(
    blob_dir: Path, names: list[str], key: bytes, progress: Callable[[str, int, int], object]
) -> tuple[list[StoredLabel], list[Unrecovered]]:
    labels: list[StoredLabel] = []
    unrecovered: list[Unrecovered] = []
    for done, name in enumerate(names, 1):
        try:
            with BlobFile(blob_dir / name, key, name) as blob:
                label = blob.label()
        except BlobCorrupt:
            unrecovered.append(Unrecovered(name, UNAUTHENTIC))
        else:
            if label is None:
                unrecovered.append(Unrecovered(name, LEGACY))
            else:
                labels.append(label)
        progress("labels", done, len(names))
    return labels, unrecovered


def _newest_per_document(labels: list[StoredLabel]) -> tuple[list[StoredLabel], list[str]]:
    """One source per document identity (a path in a collection; for content
    without a path, its bytes in a collection): the newest. A crash between a
    blob and its row can leave an older one behind."""
    newest: dict[tuple[str, str], StoredLabel] = {}
    superseded: list[str] = []
    for stored in sorted(labels, key=lambda s: (s.sealed_at, s.document_id), reverse=True):
        label = stored.label
        identity = (label.collection_id, label.source_path if label.source_path is not None else "#" + stored.content_hash)
        if identity in newest:
            superseded.append(stored.document_id)
        else:
            newest[identity] = stored
    return sorted(newest.values(), key=lambda s: (s.sealed_at, s.document_id)), superseded


def _bring_back(store: Store, blob_dir: Path, stored: StoredLabel) -> str | None:
    """Copy one source into the new directory, check the copy whole, and write
    its Pending row; a reason when it cannot be brought back."""
    source_path = blob_dir / stored.document_id
    with open(source_path, "rb") as handle:
        copied = copy_durably(handle, store.blobs.root, stored.document_id, mtime_ns=os.fstat(handle.fileno()).st_mtime_ns)
    try:
        with BlobFile(copied.path, store.node_key, stored.document_id) as blob:
            blob.authenticate()
    except BlobCorrupt:
        copied.path.unlink()
        return UNAUTHENTIC
    label = stored.label
    now = time.time()
    try:
        with database.atomic():
            ensure_collection(label.collection_id)
            Document.create(
                id=stored.document_id, collection=label.collection_id, content_hash=stored.content_hash,
                display_name=seal_name(store.node_key, stored.document_id, label.display_name), format=label.format,
                source_path=label.source_path, size_bytes=stored.size, status=Status.PENDING.value,
                created_at=stored.sealed_at, updated_at=now,
            )
            StatusHistory.create(document=stored.document_id, status=Status.PENDING.value, at=now)
    except IntegrityError:
        copied.path.unlink()
        return CONFLICT
    return None
