"""Embedder: embeds chunks in batches that may span several documents.

Each arriving document is buffered and a ``FlushEmbeddings`` is told to
self; by the time a flush is handled, every document that arrived before it
is in the buffer, so batches fill up across documents without any timer.
One flush embeds one batch and re-arms itself, so other messages interleave.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field

import numpy as np
from pykka import ActorRef

from actors.events import DocumentReleased, EmbedDocument, FlushEmbeddings, IndexDocument
from actors.faults import pause_point
from actors.listener import publish
from actors.stage import DocumentGone, PipelineContext, StageActor
from kbtui.embedding import EmbeddingUnavailable
from kbtui.ingest import StageFailed, check_vectors
from store.catalog import set_status
from store.models import Status

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 60.0


@dataclass
class _Pending:
    message: EmbedDocument
    texts: list[str]
    vectors: list[np.ndarray] = field(default_factory=list)
    done: int = 0


class Embedder(StageActor):
    def __init__(self, context: PipelineContext, indexer: ActorRef) -> None:
        super().__init__(context)
        self.indexer = indexer
        self.buffer: deque[_Pending] = deque()
        self.backoff_s = 0.0

    def handle(self, message: EmbedDocument | FlushEmbeddings) -> None:
        if isinstance(message, EmbedDocument):
            self.transition(message.document, Status.EMBEDDING, 0.5)
            texts = [c.contextual_content for c in message.chunked.chunks]
            self.buffer.append(_Pending(message, texts))
            self.actor_ref.tell(FlushEmbeddings())
            return
        if self.buffer:
            self._embed_one_batch()
            if self.buffer:
                self.actor_ref.tell(FlushEmbeddings())

    def _embed_one_batch(self) -> None:
        batch_size = max(1, self.context.config.max_embedding_batch_size)
        taken: list[tuple[_Pending, int, int]] = []
        texts: list[str] = []
        for pending in self.buffer:
            if len(texts) >= batch_size:
                break
            count = min(batch_size - len(texts), len(pending.texts) - pending.done)
            taken.append((pending, pending.done, count))
            texts.extend(pending.texts[pending.done : pending.done + count])
        pause_point("embedding")
        try:
            vectors = self.context.embedder.embed_documents(texts)
            check_vectors(vectors, len(texts), self.context.embedder.identity.dim)
        except EmbeddingUnavailable as exc:
            self._release_for_retry([pending for pending, _, _ in taken], exc.code)
            return
        except StageFailed as exc:
            for pending, _, _ in taken:
                self._drop(pending)
                self.fail(pending.message, exc.reason)
            return
        self.backoff_s = 0.0
        offset = 0
        for pending, _, count in taken:
            pending.vectors.append(vectors[offset : offset + count])
            pending.done += count
            offset += count
            progress = 0.5 + 0.4 * pending.done / max(len(pending.texts), 1)
            if pending.done == len(pending.texts):
                self._drop(pending)
                self.indexer.tell(
                    IndexDocument(pending.message.document, pending.message.chunked, np.concatenate(pending.vectors))
                )
            else:
                try:
                    self.transition(pending.message.document, Status.EMBEDDING, progress)
                except DocumentGone:
                    self._drop(pending)
                    publish(DocumentReleased(pending.message.document.document_id, reason="deleted"))

    def _release_for_retry(self, pendings: list[_Pending], code: str) -> None:
        """The provider is down: put the documents back to Pending and back off."""
        initial = self.context.config.embedding_retry_initial_s
        self.backoff_s = min(max(self.backoff_s * 2, initial), MAX_BACKOFF_S)
        log.warning("embedding provider unavailable (%s); retrying in %.0f s", code, self.backoff_s)
        for pending in pendings:
            self._drop(pending)
            document_id = pending.message.document.document_id
            set_status(document_id, Status.PENDING, reason=code, progress=0.0)
            publish(DocumentReleased(document_id, reason=code, retry_after_s=self.backoff_s))

    def _drop(self, pending: _Pending) -> None:
        try:
            self.buffer.remove(pending)
        except ValueError:
            pass
