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
from textual.worker import Worker

from actors.events import AdmissionChanged, DocumentStatusChanged
from kbtui.logs import LogLine
from kbtui.reads import CatalogSnapshot
from kbtui.retrieval.search import Hit, SearchResponse
from kbtui.sources.sync import SyncReport


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
class AddRefused(Message):
    """A path the operator typed could not be added (shown with the path, never logged)."""

    path: str
    reason: str


@dataclass
class NodeLogged(Message):
    """One of the node's log lines (this process's, or the running node's stream)."""

    line: LogLine


@dataclass
class NodeModeDecided(Message):
    """Start-up decided whether this process runs the pipeline.

    ``mode`` is ``node`` (this process indexes), ``client`` (another process
    holds the node lock) or ``viewer`` (nobody indexes; added documents wait).
    """

    mode: str


@dataclass
class NodeStopped(Message):
    """The pipeline this process ran has stopped (the app may leave)."""


@dataclass
class CatalogPolled(Message):
    """The cheap once-a-second look at the database found something to show."""

    snapshot: CatalogSnapshot

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, CatalogPolled)


@dataclass
class DocumentsChanged(Message):
    """Documents were added, deleted, imported or queued again by this UI
    (``summary``: what to tell the operator, if anything)."""

    collection_id: str
    summary: str = ""


@dataclass
class SearchFinished(Message):
    """A search worker answered (``generation`` says which keystroke it was for)."""

    generation: int
    query: str
    collection_id: str
    response: SearchResponse


@dataclass
class ScanProgressed(Message):
    """A source scan moved on (``done`` of ``total`` files listed)."""

    done: int
    total: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ScanProgressed)


@dataclass
class ScanFinished(Message):
    """A source scan ended (``report`` is None when it never started: ``problem`` says why)."""

    name: str
    report: SyncReport | None
    problem: str | None = None


# ---------------------------------------------------------------- requests from screens
# Screens answer with these (they bubble to the app, which owns navigation and
# the node) rather than calling methods of the app.


@dataclass
class OpenDocument(Message):
    """Show one document's detail."""

    document_id: str


@dataclass
class OpenReader(Message):
    """Read a document's whole text: at ``chunk_id`` when given, ``query``'s words highlighted."""

    document_id: str
    collection_id: str
    title: str
    query: str = ""
    chunk_id: str | None = None


@dataclass
class OpenHit(Message):
    """Show a search hit in context."""

    hit: Hit
    query: str
    fallback_name: str | None
    fusion: str | None


@dataclass
class FailuresRequested(Message):
    """Show the failed documents of the active collection, by reason."""


@dataclass
class AddsSkipped(Message):
    """An add of this UI left ``count`` files out (already present or refused)."""

    count: int


@dataclass
class AddRequested(Message):
    """Ask for a path to add to the active collection."""


@dataclass
class DeleteRequested(Message):
    """Delete a document after a confirmation; ``leaving`` is the screen to leave once it is gone."""

    document_id: str
    name: str
    leaving: object | None = None


@dataclass
class ReindexRequested(Message):
    """Queue documents again (None: the whole active collection, after a confirmation)."""

    document_ids: tuple[str, ...] | None


@dataclass
class WorkFailed(Message):
    """A screen's worker failed; the app's one handler reports it."""

    worker: Worker
