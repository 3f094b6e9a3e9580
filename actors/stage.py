"""The shared shape of a pipeline stage actor.

A stage receives one immutable message, calls the domain code in
``kbtui.ingest``, writes through ``store`` and tells the next stage. Any
failure fails that one document with a fixed reason code; the actor lives on.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

import pykka

from actors.events import DocumentRef, DocumentReleased, DocumentStatusChanged
from actors.listener import publish
from kbtui.config import Config
from kbtui.embedding import EmbeddingProvider
from kbtui.embedding.reuse import ChunkEmbeddingReuse
from kbtui.ingest import StageFailed
from kbtui.ports import Storage
from store.errors import is_disk_full, is_store_unavailable
from store.records import Status

log = logging.getLogger(__name__)


@dataclass
class PipelineContext:
    """What every stage needs; built once by the runtime."""

    store: Storage
    config: Config
    embedder: EmbeddingProvider
    reuse: ChunkEmbeddingReuse | None = None
    stopping: threading.Event = field(default_factory=threading.Event)


class DocumentGone(Exception):
    """The document was deleted while it was in the pipeline."""


class DocumentSuperseded(DocumentGone):
    """The document's source was updated in place while it was in the pipeline:
    this version is gone; the new one is Pending and will be admitted again."""


class ShuttingDown(Exception):
    """The node is stopping: abandon the document where it is."""


class StageActor(pykka.ThreadingActor):
    use_daemon_thread = True

    def __init__(self, context: PipelineContext) -> None:
        super().__init__()
        self.context = context

    def on_receive(self, message: Any) -> Any:
        if self.context.stopping.is_set():
            return None  # leave the document non-terminal; the next start resumes it
        document_id = _document_id_of(message)
        try:
            return self.handle(message)
        except Exception as exc:  # noqa: BLE001 - one document must never stop the stage
            if self.context.stopping.is_set():
                return None  # interrupted by shutdown: the document stays queued
            if not document_id:
                log.error("%s failed: %s", type(self).__name__, type(exc).__name__)
                return None
            self.settle(message, document_id, exc)
        return None

    def settle(self, message: Any, document_id: str, exc: Exception) -> None:
        """Record what a failure means for the document (failed, Pending again,
        gone); when even that cannot be written, release it as ``storage_error``."""
        try:
            self._settle(message, document_id, exc)
        except Exception as settle_exc:  # noqa: BLE001 - cannot even record it (disk full? server gone?)
            log.error("could not record the outcome of document %s: %s", document_id, type(settle_exc).__name__)
            publish(DocumentReleased(document_id, reason="storage_error", retry_after_s=self.context.config.storage_retry_s))

    def _settle(self, message: Any, document_id: str, exc: Exception) -> None:
        if isinstance(exc, DocumentSuperseded):
            publish(DocumentReleased(document_id, reason="superseded"))
        elif isinstance(exc, DocumentGone):
            publish(DocumentReleased(document_id, reason="deleted"))
        elif isinstance(exc, StageFailed):
            self.fail(message, exc.reason)
        elif is_disk_full(exc) or is_store_unavailable(exc):
            # A condition of the machine or the database server, not of the
            # document: it goes back to Pending (its unfinished write rolled
            # back) and is retried once the store can be used again.
            reason = "storage_full" if is_disk_full(exc) else "storage_unavailable"
            log.error("%s while processing document %s; will retry", reason, document_id)
            coordination = self.context.store.coordination
            if coordination is None:
                self.context.store.catalog.set_status(document_id, Status.PENDING, reason=reason, progress=0.0)
            else:
                # Only if still ours: a commit whose answer was lost with the connection may
                # have landed (the document is Indexed, its lease ended), and must stay so.
                coordination.release([document_id])
            publish(DocumentReleased(document_id, reason=reason, retry_after_s=self.context.config.storage_retry_s))
        else:
            log.error("%s failed on a document: %s", type(self).__name__, type(exc).__name__)
            self.fail(message, "internal_error")

    def handle(self, message: Any) -> Any:
        raise NotImplementedError

    def transition(self, document: DocumentRef, status: Status, progress: float, reason: str | None = None) -> None:
        """Record and announce a status change; raise DocumentGone if it was deleted."""
        if self.context.stopping.is_set():
            raise ShuttingDown()
        if not self.context.store.catalog.set_status(
            document.document_id, status, reason=reason, progress=progress, content_hash=document.content_hash
        ):
            raise self.gone_or_superseded(document.document_id)
        publish(DocumentStatusChanged(document.document_id, document.collection_id, status.value, progress, reason))

    def gone_or_superseded(self, document_id: str) -> DocumentGone:
        if self.context.store.catalog.document(document_id) is not None:
            return DocumentSuperseded(document_id)
        return DocumentGone(document_id)

    def fail(self, message: Any, reason: str) -> None:
        document_id = _document_id_of(message)
        if document_id is None:
            log.error("a stage failed on a message without a document: %s", reason)
            return
        document = getattr(message, "document", None)
        catalog = self.context.store.catalog
        if document is not None:
            collection_id = document.collection_id
        else:
            found = catalog.document(document_id)
            collection_id = found.collection_id if found is not None else ""
        content_hash = document.content_hash if document is not None else None
        if catalog.set_status(document_id, Status.FAILED, reason=reason, content_hash=content_hash):
            log.info("document %s failed: %s", document_id, reason)
            publish(DocumentStatusChanged(document_id, collection_id, Status.FAILED.value, 0.0, reason))
        else:
            # Deleted, or updated in place: the failure was the old bytes'.
            publish(DocumentReleased(document_id, reason="deleted"))




def _document_id_of(message: Any) -> str | None:
    if hasattr(message, "document"):
        return message.document.document_id
    return getattr(message, "document_id", None)
