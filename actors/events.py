"""Events the pipeline publishes (past tense) and the messages its actors exchange.

All are frozen dataclasses. Fields that carry document text are excluded from
``repr`` so that no message can leak text into a log line by accident.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

# ---------------------------------------------------------------- events


@dataclass(frozen=True)
class DocumentStatusChanged:
    """A document moved to another status (with its stage progress, 0..1).

    ``node`` names the node that did the work: empty for this process's own
    node, another node's id for an event relayed from a store many nodes
    share (:mod:`actors.relay`)."""

    name: ClassVar[str] = "document_status_changed"
    document_id: str
    collection_id: str
    status: str
    progress: float
    reason: str | None = None
    node: str = ""


@dataclass(frozen=True)
class DocumentReleased:
    """A document left the pipeline without a terminal status: it is Pending
    again (to be retried after ``retry_after_s``), was deleted, or the node is
    stopping. Admission frees its slot."""

    name: ClassVar[str] = "document_released"
    document_id: str
    reason: str
    retry_after_s: float = 0.0


@dataclass(frozen=True)
class AdmissionChanged:
    """Queue depth and counters after any admission decision."""

    name: ClassVar[str] = "admission_changed"
    queue_depth: int
    queue_capacity: int
    in_flight: int
    accepted: int
    rejected: int
    paused_for_s: float = 0.0


Event = DocumentStatusChanged | DocumentReleased | AdmissionChanged

# ---------------------------------------------------------------- admission requests and answers


@dataclass(frozen=True)
class Admit:
    document_id: str


@dataclass(frozen=True)
class Accepted:
    document_id: str


@dataclass(frozen=True)
class AlreadyQueued:
    document_id: str


@dataclass(frozen=True)
class Busy:
    """The queue is full: the row stays Pending; ask again after ``retry_after_s``."""

    document_id: str
    retry_after_s: float = 5.0


@dataclass(frozen=True)
class NotAdmitting:
    """The node is shutting down."""

    document_id: str


AdmitResult = Accepted | AlreadyQueued | Busy | NotAdmitting


@dataclass(frozen=True)
class SweepPending:
    """Admit Pending rows (written by this or another process) while there is room."""


@dataclass(frozen=True)
class StopAdmitting:
    pass


@dataclass(frozen=True)
class GetAdmissionState:
    pass


# ---------------------------------------------------------------- stage messages


@dataclass(frozen=True)
class DocumentRef:
    """The immutable facts about a document the stages need."""

    document_id: str
    collection_id: str
    format: str
    source_path: str | None
    # The bytes the stages work on: a source updated in place meanwhile
    # (another hash) makes their work stale, and they let the document go.
    content_hash: str | None = None


@dataclass(frozen=True)
class ExtractDocument:
    document_id: str


@dataclass(frozen=True)
class ChunkDocument:
    document: DocumentRef
    elements: Any = field(repr=False)


@dataclass(frozen=True)
class EmbedDocument:
    document: DocumentRef
    chunked: Any = field(repr=False)


@dataclass(frozen=True)
class FlushEmbeddings:
    pass


@dataclass(frozen=True)
class IndexDocument:
    document: DocumentRef
    chunked: Any = field(repr=False)
    vectors: Any = field(repr=False)
    identity: str  # the canonical identity the vectors were made under


@dataclass(frozen=True)
class ScanForStale:
    pass


@dataclass(frozen=True)
class FlushStatus:
    """Write the latest node status now (throttled writes may be behind)."""


@dataclass(frozen=True)
class RequestWarm:
    target: str
    requested_at: float
