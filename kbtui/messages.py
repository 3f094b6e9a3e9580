"""App-wide messages of the terminal UI.

They are posted from worker threads and from the bridge actor with
``App.post_message`` (thread-safe, never blocks) and handled on the UI loop.
Textual sets attributes on a message as it travels, so these are plain
dataclasses; what they carry is immutable (frozen rows, tuples, actor events).

Floods collapse: Textual drops a queued message when the next one in the
queue may replace it (``can_replace``), so a burst of progress for one
document, or of queue-depth changes, costs one UI update.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from actors.events import AdmissionChanged, DocumentStatusChanged
from kbtui.repository.importer import ImportReport
from kbtui.retrieval.search import SearchResponse


@dataclass
class DocumentStatusUpdated(Message):
    """A document of this node moved stage or progress (from the pipeline)."""

    event: DocumentStatusChanged

    def can_replace(self, message: Message) -> bool:
        # Only a newer update of the same document; a Failed or Indexed one is
        # never dropped in favour of stale progress (newer always wins here).
        return isinstance(message, DocumentStatusUpdated) and message.event.document_id == self.event.document_id


@dataclass
class AdmissionUpdated(Message):
    """The admission queue changed: depth, in flight, accepted, rejected."""

    event: AdmissionChanged

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, AdmissionUpdated)


@dataclass
class NodeModeDecided(Message):
    """Start-up decided whether this process runs the pipeline.

    ``mode`` is ``node`` (this process indexes), ``client`` (another process
    holds the node lock) or ``viewer`` (nobody indexes; added documents wait).
    """

    mode: str


@dataclass
class CatalogPolled(Message):
    """The cheap once-a-second look at the database found something to show."""

    snapshot: CatalogSnapshot

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, CatalogPolled)


@dataclass(frozen=True)
class CatalogSnapshot:
    """What the poller saw: a change stamp for the active collection, its
    status counts, the running node's queue (client mode), the collections,
    and whether some process holds the node lock."""

    collection_id: str
    stamp: tuple[int, float]
    status_counts: tuple[tuple[str, int], ...]
    queue: AdmissionChanged | None  # from the pipeline, or published by another node
    collections: tuple[str, ...]
    node_running: bool


@dataclass
class DocumentsChanged(Message):
    """Documents were added, deleted or queued again by this UI."""

    collection_id: str
    summary: str


@dataclass
class SearchFinished(Message):
    """A search worker answered (``generation`` says which keystroke it was for)."""

    generation: int
    query: str
    collection_id: str
    response: SearchResponse


@dataclass
class ImportProgressed(Message):
    """The repository scan moved on (``done`` of ``total`` files listed)."""

    done: int
    total: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ImportProgressed)


@dataclass
class ImportFinished(Message):
    """A repository import ended (``report`` is None when it never started)."""

    report: ImportReport | None
    problem: str | None = None
