"""Git repositories as they were before sources: ``kbtui repo add`` registers
one without scanning it, ``kbtui import NAME -c C`` scans it into C.

A repository is a Git source. Importing it into another collection than the
one it is registered in uses (or registers) the source for the same working
tree in that collection; a registration never scanned simply moves there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kbtui.collections import DEFAULT_COLLECTION
from kbtui.errors import NotFound
from kbtui.ports import Storage
from kbtui.sources.git import verify_top_level
from kbtui.sources.scan import BeforeOpen, ScanLimits
from kbtui.sources.sync import ProgressCallback, SourceSpec, SyncReport, register_source, sync_source
from store.errors import SourceAlreadyRegistered
from store.records import RegisteredSource


def register_repository(
    store: Storage, folder: Path, name: str | None = None, collection_id: str = DEFAULT_COLLECTION
) -> RegisteredSource:
    """Register ``folder`` if git itself says it is a working tree's top level (not scanned yet)."""
    root = verify_top_level(folder)
    if store.sources.sources_at(str(root)):
        raise SourceAlreadyRegistered("that folder is already registered")
    return register_source(store, SourceSpec("git", root), collection_id, name=name)


def import_repository(
    store: Storage,
    repository_id: str,
    collection_id: str,
    limits: ScanLimits,
    *,
    purge: Callable[[str], bool],
    before_open: BeforeOpen | None = None,
    on_progress: ProgressCallback | None = None,
    wait_s: float = 0.0,
) -> SyncReport:
    """Scan the registered repository ``repository_id`` into ``collection_id``."""
    source = store.sources.get_source(repository_id)
    if source.kind != "git":
        raise NotFound("no such repository")
    return sync_source(
        store, repository_source_in(store, source, collection_id).id, limits,
        purge=purge, before_open=before_open, on_progress=on_progress, wait_s=wait_s,
    )


def repository_source_in(store: Storage, source: RegisteredSource, collection_id: str) -> RegisteredSource:
    """The source of ``collection_id`` for the working tree of ``source``."""
    if source.collection_id == collection_id:
        return source
    sibling = store.sources.find_source(source.root, collection_id)
    if sibling is not None:
        return sibling
    if source.last_scan_at is None and not store.sources.document_counts(source.id):
        store.sources.move_to_collection(source.id, collection_id)
        return store.sources.get_source(source.id)
    return register_source(store, SourceSpec("git", Path(source.root)), collection_id, name=source.name)
