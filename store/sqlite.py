"""The embedded default store: SQLite (FTS5) plus hnswlib files in one data directory.

The catalog, source, chunk and lexical operations are the functions of
:mod:`store.catalog`, :mod:`store.sources`, :mod:`store.chunks` and
:mod:`store.fts`, all on the process's one peewee database (one connection
per thread); this module presents them as the interfaces of
:mod:`kbtui.ports`. The vector index is :class:`store.ann.VectorIndexes`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from store import blob_labels, catalog, chunks, extractions, fts, sources
from store.blobs import open_display_names

if TYPE_CHECKING:
    from store.opening import Store
    from store.records import AddOutcome, FileState, RegisteredSource


class SqliteCatalog:
    def __init__(self, store: Store) -> None:
        self._store = store

    collection_exists = staticmethod(catalog.collection_exists)
    list_collections = staticmethod(catalog.list_collections)
    document = staticmethod(catalog.document)
    document_at = staticmethod(catalog.document_at)
    resolve_document = staticmethod(catalog.resolve_document)
    documents = staticmethod(catalog.documents)
    document_ids_with_prefix = staticmethod(catalog.document_ids_with_prefix)
    statuses = staticmethod(catalog.statuses)
    status_counts = staticmethod(catalog.status_counts)
    catalog_stamp = staticmethod(catalog.catalog_stamp)
    indexed_chunk_total = staticmethod(catalog.indexed_chunk_total)
    history = staticmethod(catalog.history)
    set_status = staticmethod(catalog.set_status)
    commit_index = staticmethod(catalog.commit_index)
    reset_non_terminal = staticmethod(catalog.reset_non_terminal)
    pending_document_ids = staticmethod(catalog.pending_document_ids)
    stale_document_ids = staticmethod(catalog.stale_document_ids)
    mark_pending = staticmethod(catalog.mark_pending)
    record_extraction = staticmethod(extractions.record_extraction)
    ocr_pages = staticmethod(extractions.ocr_pages)
    low_confidence_document_ids = staticmethod(extractions.low_confidence_document_ids)
    ocr_pages_read_recently = staticmethod(extractions.ocr_pages_read_recently)

    def add_document(
        self, collection_id: str, source: Path, *, display_name: str, fmt: str, max_bytes: int | None = None
    ) -> AddOutcome:
        return catalog.add_document(
            self._store, collection_id, source, display_name=display_name, fmt=fmt, max_bytes=max_bytes
        )

    def add_upload(self, collection_id: str, data: bytes, *, display_name: str, fmt: str) -> AddOutcome:
        return catalog.add_upload(self._store, collection_id, data, display_name=display_name, fmt=fmt)

    def create_document(
        self, collection_id: str, source: BinaryIO, *, content_hash: str, display_name: str, fmt: str,
        source_path: str | None = None,
    ) -> str:
        return catalog.create_document(
            self._store, collection_id, source, content_hash=content_hash, display_name=display_name, fmt=fmt,
            source_path=source_path,
        )

    def display_names(self, document_ids: Sequence[str]) -> dict[str, str]:
        return open_display_names(self._store.node_key, catalog.sealed_names(document_ids))

    def upgrade_legacy_blob(self, document_id: str) -> bool:
        return blob_labels.upgrade_if_legacy(self._store, document_id)

    def purge_document(self, document_id: str) -> list[int] | None:
        return catalog.purge_document(self._store, document_id)

    def sweep_orphan_blobs(self) -> int:
        return catalog.sweep_orphan_blobs(self._store)


class SqliteSources:
    def __init__(self, store: Store) -> None:
        self._store = store

    registration_stamp = staticmethod(sources.registration_stamp)
    set_watching = staticmethod(sources.set_watching)
    set_include_sensitive = staticmethod(sources.set_include_sensitive)
    set_watch_state = staticmethod(sources.set_watch_state)
    clear_watch_states = staticmethod(sources.clear_watch_states)
    move_to_collection = staticmethod(sources.move_to_collection)
    record_reachability = staticmethod(sources.record_reachability)
    unreachable_documents = staticmethod(sources.unreachable_documents)
    document_counts = staticmethod(sources.document_counts)
    documents_of = staticmethod(sources.documents_of)
    loose_document_at = staticmethod(sources.loose_document_at)
    adopt_document = staticmethod(sources.adopt_document)
    record_file_state = staticmethod(sources.record_file_state)

    def register_source(
        self, *, kind: str, root: str, collection_id: str, name: str, include_sensitive: bool = False,
        root_identity: tuple[int, int] | None = None,
    ) -> RegisteredSource:
        return sources.register_source(
            self._store, kind=kind, root=root, collection_id=collection_id, name=name,
            include_sensitive=include_sensitive, root_identity=root_identity,
        )

    def get_source(self, source_id: str) -> RegisteredSource:
        return sources.get_source(self._store, source_id)

    def find_source(self, root: str, collection_id: str) -> RegisteredSource | None:
        return sources.find_source(self._store, root, collection_id)

    def sources_at(self, root: str) -> list[RegisteredSource]:
        return sources.sources_at(self._store, root)

    def list_sources(self, collection_id: str | None = None) -> list[RegisteredSource]:
        return sources.list_sources(self._store, collection_id)

    def resolve_source(self, reference: str, collection_id: str | None = None) -> RegisteredSource:
        return sources.resolve_source(self._store, reference, collection_id)

    def watched_sources(self) -> list[RegisteredSource]:
        return sources.watched_sources(self._store)

    def record_scan(
        self, source_id: str, status: str, *, report_json: str | None = None, last_commit: str | None = None
    ) -> None:
        sources.record_scan(self._store, source_id, status, report_json=report_json, last_commit=last_commit)

    def last_scan_report(self, source_id: str) -> str | None:
        return sources.last_scan_report(self._store, source_id)

    def unregister_source(self, source_id: str, *, purge: Callable[[str], bool] | None = None) -> int:
        return sources.unregister_source(self._store, source_id, purge=purge)

    def add_source_document(
        self, source_id: str, collection_id: str, *, source_path: str, display_name: str, fmt: str, data: bytes,
        content_hash: str, state: FileState,
    ) -> str:
        return sources.add_source_document(
            self._store, source_id, collection_id, source_path=source_path, display_name=display_name, fmt=fmt,
            data=data, content_hash=content_hash, state=state,
        )

    def update_source_document(
        self, document_id: str, *, fmt: str, data: bytes, content_hash: str, state: FileState
    ) -> bool:
        return sources.update_source_document(
            self._store, document_id, fmt=fmt, data=data, content_hash=content_hash, state=state
        )

    def move_source_document(self, document_id: str, *, source_path: str, state: FileState) -> bool:
        return sources.move_source_document(self._store, document_id, source_path=source_path, state=state)


class SqliteChunks:
    served_chunks = staticmethod(chunks.served_chunks)
    section_openers = staticmethod(chunks.section_openers)
    neighbours = staticmethod(chunks.neighbours)
    served_document = staticmethod(chunks.served_document)
    document_chunks = staticmethod(chunks.document_chunks)
    sections = staticmethod(chunks.sections)
    chunk_summaries = staticmethod(chunks.chunk_summaries)


class SqliteLexical:
    COLUMN_WEIGHTS: tuple[float, ...] = fts.COLUMN_WEIGHTS
    ROW_COST = 1.0
    indexed_chunk_count = staticmethod(fts.indexed_chunk_count)
    term_row_counts = staticmethod(fts.term_row_counts)
    ranked_matches = staticmethod(fts.ranked_matches)
    newest_matches = staticmethod(fts.newest_matches)
    cjk_ranked_matches = staticmethod(fts.cjk_ranked_matches)
    cjk_substring_matches = staticmethod(fts.cjk_substring_matches)
    bm25_statistics = staticmethod(fts.bm25_statistics)
    row_token_counts = staticmethod(fts.row_token_counts)
    column_texts = staticmethod(fts.column_texts)
