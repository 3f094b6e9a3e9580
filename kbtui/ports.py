"""The store as the domain sees it: a few interfaces, whichever backend holds the data.

A knowledge base lives in one of two stores (:mod:`store`): SQLite with FTS5
and hnswlib files in one data directory (the embedded default), or
PostgreSQL with pgvector for a team (``KBTUI_DATABASE_URL``). Both implement
these protocols; the node builds one :class:`Storage` where it opens and
hands it to the actors, the use cases and the read models. Nothing above
``store/`` imports peewee or a backend's modules, and no SQL lives outside
``store/`` (an import-linter contract in ``pyproject.toml``).

The surfaces are the work the domain asks for, each small:

- :class:`Catalog`: documents, their history, status transitions, the atomic
  index commit and the purge;
- :class:`SourceCatalog`: sources (folders, files, Git repositories) and the
  documents each holds by path;
- :class:`ChunkReads`: served chunks for hydration, neighbours, the text of a
  document, its sections;
- :class:`LexicalIndex`: BM25 over path, heading, symbol and body, with the
  statistics the lexical plan needs;
- :class:`VectorIndex`: nearest chunks of one model identity, stored vectors;
- :class:`BlobStore`: the encrypted sources;
- :class:`Coordination`: on a store many nodes share (PostgreSQL), the
  registry of nodes, work claimed under leases, events between nodes and
  jobs that run on one node at a time;
- :class:`Storage`: all of the above, the node key, a connection for the
  calling thread (:meth:`Storage.session`) and the node's lock.

Every method is safe from any thread that holds a session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import BinaryIO, Protocol

import numpy as np

from store.records import (
    AddOutcome,
    ChunkRecord,
    ChunkSummary,
    DocumentRecord,
    FileState,
    HistoryRecord,
    NodeRecord,
    OcrPage,
    PageReport,
    PathDocument,
    RegisteredSource,
    SectionRecord,
    Status,
)


class Catalog(Protocol):
    """Documents: adding, reading, status transitions, the index commit, purging."""

    def collection_exists(self, collection_id: str) -> bool: ...

    def list_collections(self) -> list[str]: ...

    def add_document(
        self, collection_id: str, source: Path, *, display_name: str, fmt: str, max_bytes: int | None = None
    ) -> AddOutcome: ...

    def add_upload(self, collection_id: str, data: bytes, *, display_name: str, fmt: str) -> AddOutcome: ...

    def create_document(
        self, collection_id: str, source: BinaryIO, *, content_hash: str, display_name: str, fmt: str,
        source_path: str | None = None,
    ) -> str: ...

    def document(self, document_id: str) -> DocumentRecord | None: ...

    def document_at(self, collection_id: str, source_path: str) -> DocumentRecord | None: ...

    def resolve_document(self, reference: str, collection_id: str | None = None) -> DocumentRecord: ...

    def documents(
        self, collection_id: str | None = None, status: str | None = None, *,
        updated_since: float | None = None, document_ids: Sequence[str] | None = None,
    ) -> list[DocumentRecord]: ...

    def document_ids_with_prefix(self, prefix: str, collection_id: str | None, limit: int) -> list[str]: ...

    def statuses(self, document_ids: Sequence[str]) -> dict[str, str]: ...

    def display_names(self, document_ids: Sequence[str]) -> dict[str, str]: ...

    def status_counts(self, collection_id: str | None = None) -> dict[str, int]: ...

    def catalog_stamp(self, collection_id: str) -> tuple[int, float]: ...

    def indexed_chunk_total(self, collection_id: str) -> int: ...

    def history(self, document_id: str) -> list[HistoryRecord]: ...

    def set_status(
        self, document_id: str, status: Status, *, reason: str | None = None, progress: float | None = None,
        content_hash: str | None = None,
    ) -> bool: ...

    def commit_index(
        self, document_id: str, *, sections: Sequence, chunks: Sequence, vectors: np.ndarray, identity: str,
        parser_version: int, chunker_version: int, content_hash: str | None = None,
    ) -> list[int] | None: ...

    def purge_document(self, document_id: str) -> list[int] | None: ...

    def sweep_orphan_blobs(self) -> int: ...

    def reset_non_terminal(self) -> int: ...

    def pending_document_ids(self, limit: int | None = None) -> list[str]: ...

    def stale_document_ids(
        self, *, parser_version: int, chunker_version: int, vector_identity: str | None, limit: int
    ) -> list[str]: ...

    def mark_pending(self, document_ids: Sequence[str]) -> None: ...

    def upgrade_legacy_blob(self, document_id: str) -> bool:
        """Give a document's source in the old blob format its sealed label (never fails the caller)."""
        ...

    def record_extraction(self, document_id: str, parser_version: int, pages: Sequence[PageReport]) -> None:
        """Which parser read the document last, and what OCR made of each page it ran on."""
        ...

    def ocr_pages(self, document_id: str) -> list[OcrPage]: ...

    def low_confidence_document_ids(self, threshold: float, collection_id: str | None = None) -> list[str]: ...

    def ocr_pages_read_recently(self, collection_id: str, window_s: float = 60.0) -> int: ...


class SourceCatalog(Protocol):
    """Sources and the documents each holds by relative path."""

    def register_source(
        self, *, kind: str, root: str, collection_id: str, name: str, include_sensitive: bool = False,
        root_identity: tuple[int, int] | None = None,
    ) -> RegisteredSource: ...

    def get_source(self, source_id: str) -> RegisteredSource: ...

    def find_source(self, root: str, collection_id: str) -> RegisteredSource | None: ...

    def sources_at(self, root: str) -> list[RegisteredSource]: ...

    def list_sources(self, collection_id: str | None = None) -> list[RegisteredSource]: ...

    def resolve_source(self, reference: str, collection_id: str | None = None) -> RegisteredSource: ...

    def watched_sources(self) -> list[RegisteredSource]: ...

    def registration_stamp(self) -> tuple[tuple[str, bool, bool], ...]: ...

    def set_watching(self, source_id: str, watching: bool) -> None: ...

    def set_include_sensitive(self, source_id: str, include: bool) -> None: ...

    def set_watch_state(self, states: Mapping[str, str | None]) -> None: ...

    def clear_watch_states(self) -> None: ...

    def move_to_collection(self, source_id: str, collection_id: str) -> None: ...

    def record_scan(
        self, source_id: str, status: str, *, report_json: str | None = None, last_commit: str | None = None
    ) -> None: ...

    def record_reachability(
        self, source_id: str, *, reason: str | None, documents: Mapping[str, str] | None,
        root_identity: tuple[int, int] | None = None,
    ) -> None: ...

    def unreachable_documents(self, source_id: str | None = None) -> dict[str, dict[str, str]]: ...

    def last_scan_report(self, source_id: str) -> str | None: ...

    def document_counts(self, source_id: str | None = None) -> dict[str, dict[str, int]]: ...

    def unregister_source(self, source_id: str, *, purge: Callable[[str], bool] | None = None) -> int: ...

    def documents_of(self, source_id: str) -> dict[str, PathDocument]: ...

    def loose_document_at(self, collection_id: str, source_path: str) -> PathDocument | None: ...

    def adopt_document(self, source_id: str, document_id: str) -> None: ...

    def add_source_document(
        self, source_id: str, collection_id: str, *, source_path: str, display_name: str, fmt: str, data: bytes,
        content_hash: str, state: FileState,
    ) -> str: ...

    def update_source_document(
        self, document_id: str, *, fmt: str, data: bytes, content_hash: str, state: FileState
    ) -> bool: ...

    def move_source_document(self, document_id: str, *, source_path: str, state: FileState) -> bool: ...

    def record_file_state(self, document_id: str, state: FileState) -> None: ...


class ChunkReads(Protocol):
    """Served chunks: each read is scoped to one collection and to served documents."""

    def served_chunks(
        self, chunk_ids: Sequence[int], collection_id: str, *, document_id: str | None = None
    ) -> dict[int, ChunkRecord]: ...

    def section_openers(self, chunk_ids: Sequence[int]) -> dict[int, int]: ...

    def neighbours(self, chunk_id: str, collection_id: str, window: int) -> list[ChunkRecord]: ...

    def served_document(self, document_id: str, collection_id: str) -> tuple[str, str, str] | None: ...

    def document_chunks(self, document_id: str, collection_id: str) -> Iterator[ChunkRecord]: ...

    def sections(self, document_id: str) -> list[SectionRecord]: ...

    def chunk_summaries(self, document_id: str, limit: int) -> list[ChunkSummary]: ...


class LexicalIndex(Protocol):
    """BM25 over the indexed chunks (columns: source path, heading path, symbol, body)."""

    COLUMN_WEIGHTS: tuple[float, ...]
    # What scoring one matching row costs, against FTS5's bm25() (about 1 us here):
    # the lexical arm's row budget is divided by it, so its latency bound holds on either store.
    ROW_COST: float

    def indexed_chunk_count(self) -> int: ...

    def term_row_counts(self, words: Sequence[str], cap: int, *, generation: int) -> dict[str, int]: ...

    def ranked_matches(
        self, words: Sequence[str], collection_id: str, *, document_id: str | None = None, limit: int,
        repeats: Sequence[int] = (),
    ) -> list[tuple[int, float]]: ...

    def newest_matches(
        self, words: Sequence[str], collection_id: str, *, document_id: str | None = None, limit: int, window: int
    ) -> list[int]: ...

    def cjk_ranked_matches(
        self, runs: Sequence[str], collection_id: str, *, document_id: str | None = None, limit: int
    ) -> list[tuple[int, float]]: ...

    def cjk_substring_matches(
        self, run: str, collection_id: str, *, document_id: str | None = None, limit: int, window: int
    ) -> list[int]: ...

    def bm25_statistics(self) -> tuple[int, float]: ...

    def row_token_counts(self, chunk_ids: Sequence[int]) -> dict[int, int]: ...

    def column_texts(self, chunk_ids: Sequence[int]) -> dict[int, tuple[str, str, str, str]]: ...


class VectorIndex(Protocol):
    """The chunks nearest a query vector, compared only within one model identity."""

    def search(
        self, query: np.ndarray, identity: str, collection_id: str, *, document_id: str | None = None, limit: int = 50
    ) -> list[tuple[int, float]]: ...

    def stored_vectors(self, chunk_ids: Sequence[int], identity: str, dim: int) -> dict[int, np.ndarray]: ...

    def committed_vectors(
        self, content_hashes: Iterable[str], *, identity: str, dim: int, parser_version: int, chunker_version: int
    ) -> dict[str, np.ndarray]: ...

    def note_committed(self, chunk_ids: Iterable[int] = ()) -> None: ...

    def note_removed(self, chunk_ids: Iterable[int]) -> None: ...

    def save(self) -> None: ...

    def close(self) -> None: ...


class BlobStore(Protocol):
    """The encrypted sources, one per document (AES-256-GCM, bound to the document id).
    Written only by the catalog, with the document's row."""

    def iter_plaintext(self, blob_id: str) -> Iterator[bytes]: ...

    def verify(self, blob_id: str) -> int: ...

    def read_bytes(self, blob_id: str, *, max_bytes: int | None = None) -> bytes: ...

    def delete(self, blob_id: str) -> bool: ...

    def blob_ids(self) -> set[str]: ...


class NodeLockHandle(Protocol):
    def release(self) -> None: ...


class Coordination(Protocol):
    """Many nodes on one store: work is claimed, not pushed.

    A node claims documents with a lease (its id, renewed by heartbeats); a
    stage's write is refused once the lease has passed to another node, and
    a lease that is not renewed within ``lease_s`` can be taken over. The
    queue of record is the store's, so its bound is the knowledge base's."""

    node_id: str
    lease_s: float

    def join(self, *, role: str, model_identity: str | None, lease_s: float) -> None:
        """Register this node (refused with ``PipelineHeldElsewhere`` when live
        pipeline nodes embed with another model identity)."""
        ...

    def leave(self) -> None:
        """Give back every lease this node holds (its documents Pending again) and say it stopped."""
        ...

    def claim(self, limit: int) -> list[str]:
        """Lease up to ``limit`` documents to work on, oldest first: Pending
        rows, and documents whose lease ran out on a node that stopped heartbeating."""
        ...

    def release(self, document_ids: Sequence[str]) -> None:
        """Give back this node's leases on ``document_ids`` (Pending again, for any node)."""
        ...

    def heartbeat(self, held: Sequence[str], *, in_flight: int) -> set[str]:
        """Renew the leases of ``held`` and this node's row; return those no longer this node's."""
        ...

    def waiting(self, cap: int) -> int:
        """Pending documents no node has claimed yet, counted up to ``cap``."""
        ...

    def nodes(self) -> list[NodeRecord]:
        """Every node that has worked on or searched this store, most recently started first."""
        ...

    def single_runner(self, job: str) -> AbstractContextManager[bool]:
        """Whether this node runs ``job`` now (True for one node at a time), held for the block."""
        ...

    def announce(self, payload: str) -> None:
        """Send an event (JSON, no document text or names) to every node listening."""
        ...

    def listen(self, on_payload: Callable[[str], None], stop: Callable[[], bool]) -> None:
        """Deliver other nodes' announcements until ``stop()`` is true (blocks; run it in a thread)."""
        ...


class Storage(Protocol):
    """One opened knowledge base: every interface above, and how to hold it."""

    home: Path
    node_key: bytes
    read_only: bool
    backend: str  # sqlite | postgresql

    @property
    def catalog(self) -> Catalog: ...

    @property
    def sources(self) -> SourceCatalog: ...

    @property
    def chunks(self) -> ChunkReads: ...

    @property
    def lexical(self) -> LexicalIndex: ...

    @property
    def vectors(self) -> VectorIndex: ...

    @property
    def blobs(self) -> BlobStore: ...

    @property
    def coordination(self) -> Coordination | None:
        """The nodes sharing this store (None where one node per data directory works alone: SQLite)."""
        ...

    def session(self) -> AbstractContextManager[None]:
        """The calling thread's connection, opened (and closed after) if it has none."""
        ...

    def lock_node(self) -> NodeLockHandle | None:
        """The right to run this data directory's pipeline, or None when a node runs."""
        ...

    def node_running(self) -> bool: ...

    def close(self) -> None: ...
