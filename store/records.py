"""The values the store hands out, whichever backend holds them.

Plain frozen dataclasses and the status enum: no database library is
imported here, so the domain, the actors and the faces can name them while
the catalog itself stays behind the store's interfaces (:mod:`kbtui.ports`).
"""

from __future__ import annotations

import enum
import os
import time
from dataclasses import dataclass
from typing import Protocol


class Status(enum.StrEnum):
    PENDING = "Pending"
    EXTRACTING = "Extracting"
    CHUNKING = "Chunking"
    EMBEDDING = "Embedding"
    INDEXED = "Indexed"
    FAILED = "Failed"

    @property
    def terminal(self) -> bool:
        return self in (Status.INDEXED, Status.FAILED)


NON_TERMINAL = [s.value for s in Status if not s.terminal]


@dataclass(frozen=True)
class AddOutcome:
    document_id: str
    created: bool
    status: str


@dataclass(frozen=True)
class DocumentRecord:
    """One document row. ``sealed_name`` is the encrypted display name."""

    id: str
    collection_id: str
    content_hash: str
    sealed_name: bytes
    format: str
    source_path: str | None  # relative path within its source (or an eval id); None for uploads
    source_id: str | None
    size_bytes: int
    status: str
    failure_reason: str | None
    progress: float
    parser_version: int | None
    chunker_version: int | None
    vector_identity: str | None
    vector_dim: int | None
    chunk_count: int
    created_at: float
    updated_at: float
    indexed_at: float | None


@dataclass(frozen=True)
class HistoryRecord:
    status: str
    reason: str | None
    at: float


@dataclass(frozen=True)
class SectionRecord:
    ordinal: int
    heading_path: str
    level: int
    page: int | None
    start_offset: int
    end_offset: int


@dataclass(frozen=True)
class ChunkSummary:
    """A chunk of one document as the detail view lists it (its whole text)."""

    ordinal: int
    chunk_id: str
    heading_path: str
    kind: str
    page: int | None
    start_offset: int
    end_offset: int
    token_estimate: int
    text: str


@dataclass(frozen=True)
class ChunkRecord:
    """A served chunk with its provenance: the one shape search hydration, the
    agent tools' reads, the reader and the TUI preview share."""

    collection_id: str
    document_id: str
    chunk_id: str  # the stable chunk uid
    ordinal: int
    section_key: int | None
    heading_path: str
    source_path: str
    page: int | None
    start_offset: int
    end_offset: int
    kind: str
    language: str | None
    symbol: str | None
    text: str


# A file whose modification or change time lies within this much of the moment
# it was read may still change in the same timestamp tick without its look
# changing: such a look is re-checked by content at the next scan.
RACY_WINDOW_NS = 2_000_000_000


@dataclass(frozen=True)
class FileState:
    """How a file looked when its bytes were read."""

    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int
    device: int
    checked_ns: int

    @classmethod
    def of(cls, info: os.stat_result, *, checked_ns: int | None = None) -> FileState:
        return cls(
            info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev,
            time.time_ns() if checked_ns is None else checked_ns,
        )

    def unchanged(self, info: os.stat_result) -> bool:
        """True when ``info`` (an ``lstat`` now) shows the same file, unchanged since it was read."""
        if (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev) != (
            self.size, self.mtime_ns, self.ctime_ns, self.inode, self.device
        ):
            return False
        return max(self.mtime_ns, self.ctime_ns) < self.checked_ns - RACY_WINDOW_NS


@dataclass(frozen=True)
class PathDocument:
    """The document a source holds at one relative path."""

    document_id: str
    content_hash: str
    status: str
    size_bytes: int
    state: FileState | None  # None: never read by a scan (migrated, or adopted)


@dataclass(frozen=True)
class RegisteredSource:
    id: str
    kind: str  # folder | file | git
    collection_id: str
    name: str
    root: str  # the real path of the folder, file or working tree
    include_sensitive: bool
    watching: bool  # the operator wants it watched (a running node does)
    watch_state: str | None  # how a running node watches it: events | polling
    created_at: float
    last_scan_at: float | None
    last_scan_status: str | None  # completed | incomplete | unreachable | failed
    last_commit: str | None
    # (device, inode) of the directory registered: the folder, the working
    # tree, or a single file's folder; None for a source registered before it was kept.
    root_identity: tuple[int, int] | None = None
    # Why the source cannot be seen now (root_missing, root_replaced,
    # root_empty, root_unreadable), None when it can; and since when.
    unreachable_reason: str | None = None
    unreachable_since: float | None = None
    # On a store many nodes share: the node on whose machine the root lives
    # (only it scans and watches the source); None on SQLite and for older rows.
    owner_node: str | None = None


class PageReport(Protocol):
    """What OCR made of one page (``kbtui.extract.PageOcr`` is one)."""

    @property
    def page(self) -> int: ...

    @property
    def confidence(self) -> float | None: ...

    @property
    def words(self) -> int: ...

    @property
    def seconds(self) -> float: ...

    @property
    def reason(self) -> str | None: ...


@dataclass(frozen=True)
class OcrPage:
    page: int
    confidence: float | None  # mean word confidence 0..1; None when the page gave no text
    words: int
    seconds: float
    reason: str | None


@dataclass(frozen=True)
class NodeRecord:
    """A node that works on, or searches, a knowledge base shared by many nodes.

    Times are the database server's clock (seconds since the epoch); ``alive``
    is the server's judgement: a heartbeat within the node's lease."""

    id: str
    host: str
    pid: int
    role: str  # pipeline | search
    model_identity: str | None
    started_at: float
    heartbeat_at: float
    stopped_at: float | None
    in_flight: int
    alive: bool
    chunks_per_s: float  # chunks it committed in the last minute, per second
