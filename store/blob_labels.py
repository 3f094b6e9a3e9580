"""The labels sealed inside the blobs, kept in step with the catalog.

Every blob written since format 2 carries what its catalog row needs (see
:mod:`store.blobs`). A rename changes the path and display name, so the label
is sealed again; a blob of format 1 gets its label when its document is
re-indexed or by ``kbtui doctor --upgrade-blobs`` (:func:`upgrade_legacy_blobs`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from store import Store
from store.blobs import LEGACY_VERSION, DocumentLabel, open_name
from store.errors import BlobCorrupt
from store.models import Document

log = logging.getLogger(__name__)


def label_of(store: Store, document: Document) -> DocumentLabel:
    """What the catalog row ``document`` says, as a blob label."""
    return DocumentLabel(
        collection_id=document.collection_id,
        display_name=open_name(store.node_key, document.id, bytes(document.display_name)),
        source_path=document.source_path,
        format=document.format,
    )


def refresh_label(store: Store, document_id: str) -> bool:
    """Seal the document's current catalog facts into its blob (upgrading a
    format-1 blob); False when the document or its blob is gone, or the blob
    now holds other bytes than the row names (an update won the race)."""
    document = Document.get_or_none(Document.id == document_id)
    if document is None:
        return False
    return store.blobs.reseal(document_id, label_of(store, document), expected_sha256=document.content_hash)


def upgrade_if_legacy(store: Store, document_id: str) -> bool:
    """Give a format-1 blob its label now (its document is being re-indexed).
    Never fails the caller: an upgrade that cannot be made is logged and left
    for ``kbtui doctor --upgrade-blobs``. True when it was upgraded."""
    if store.blobs.format_version(document_id) != LEGACY_VERSION:
        return False
    try:
        return refresh_label(store, document_id)
    except (BlobCorrupt, OSError) as exc:
        log.warning("could not upgrade the stored source of document %s (%s)", document_id, type(exc).__name__)
        return False


@dataclass(frozen=True)
class UpgradeReport:
    """What :func:`upgrade_legacy_blobs` did: blobs given a label (format 1) or a
    current one (a rename whose relabelling failed), blobs already current,
    blobs changed meanwhile (left for the next run), and damaged ones (document ids)."""

    upgraded: int
    current: int
    skipped: int
    damaged: tuple[str, ...]


def upgrade_legacy_blobs(store: Store, *, on_progress: Callable[[int, int], object] | None = None) -> UpgradeReport:
    """Give every catalog document's blob the label its row calls for: a
    format-1 blob is sealed again in format 2, a format-2 blob whose label
    disagrees with its row is relabelled. One at a time, each replaced
    atomically and only if it still holds the bytes its row names; a damaged
    blob is listed and left as it is."""
    ids = [row.id for row in Document.select(Document.id).order_by(Document.id)]
    upgraded = current = skipped = 0
    damaged: list[str] = []
    for done, document_id in enumerate(ids, 1):
        try:
            if _label_is_current(store, document_id):
                current += 1
            elif refresh_label(store, document_id):
                upgraded += 1
            else:
                skipped += 1
        except BlobCorrupt:
            damaged.append(document_id)
        if on_progress is not None:
            on_progress(done, len(ids))
    return UpgradeReport(upgraded, current, skipped, tuple(damaged))


def _label_is_current(store: Store, document_id: str) -> bool:
    document = Document.get_or_none(Document.id == document_id)
    if document is None:
        return True  # deleted meanwhile: nothing to do
    with store.blobs.open(document_id) as blob:
        stored = blob.label()
    return stored is not None and stored.label == label_of(store, document) and stored.content_hash == document.content_hash
