"""Embedder: embeds chunks in batches that may span several documents.

Each arriving document is buffered and a ``FlushEmbeddings`` is told to
self; by the time a flush is handled, every document that arrived before it
is in the buffer, so batches fill up across documents without any timer.
One flush embeds one batch and re-arms itself, so other messages interleave.

Before anything is embedded, exact reuse (RAM cache, then committed rows)
supplies the vectors it already knows; chunks with the same reuse key that
are waiting at the same time share one embedding (in-flight coalescing).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Hashable
from dataclasses import dataclass, field

import numpy as np
from pykka import ActorRef

from actors.events import DocumentReleased, EmbedDocument, FlushEmbeddings, IndexDocument
from actors.faults import pause_point
from actors.listener import publish
from actors.stage import DocumentGone, PipelineContext, StageActor
from kbtui.embedding import EmbeddingUnavailable, VectorIdentity
from kbtui.embedding.reuse import ReuseKey, checked_vectors
from kbtui.extract import PARSER_VERSION
from store.records import Status

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 60.0


@dataclass(eq=False)
class _Pending:
    """A document waiting for its vectors."""

    message: EmbedDocument
    vectors: list[np.ndarray | None]
    remaining: int
    identity: VectorIdentity | None = None  # the identity every vector so far belongs to
    identity_conflict: bool = False


@dataclass(eq=False)
class _Job:
    """One text to embed, for every waiting chunk with the same key."""

    key: Hashable
    text: str
    waiters: list[tuple[_Pending, int]] = field(default_factory=list)


class Embedder(StageActor):
    def __init__(self, context: PipelineContext, indexer: ActorRef) -> None:
        super().__init__(context)
        self.indexer = indexer
        self.jobs: dict[Hashable, _Job] = {}  # insertion order is the embedding order
        self.backoff_s = 0.0

    def handle(self, message: EmbedDocument | FlushEmbeddings) -> None:
        if isinstance(message, EmbedDocument):
            self._accept(message)
            self.actor_ref.tell(FlushEmbeddings())
        elif self.jobs:
            self._embed_one_batch()
            if self.jobs:
                self.actor_ref.tell(FlushEmbeddings())

    # ------------------------------------------------------------ arrival

    def _accept(self, message: EmbedDocument) -> None:
        self.transition(message.document, Status.EMBEDDING, 0.5)
        chunks = message.chunked.chunks
        pending = _Pending(message, [None] * len(chunks), len(chunks))
        provider, reuse = self.context.embedder, self.context.reuse
        keys = None
        if reuse is not None:
            keys = reuse.keys(
                provider, chunks, parser_version=PARSER_VERSION, chunker_version=message.chunked.chunker_version
            )
        if reuse is not None and keys is not None:
            identity = provider.identity
            for position, vector in reuse.lookup(keys).items():
                self._deliver(pending, position, vector, identity)
        for position, chunk in enumerate(chunks):
            if pending.vectors[position] is not None:
                continue
            key = keys[position] if keys is not None else (id(pending), position)
            job = self.jobs.get(key)
            if job is None:
                job = self.jobs[key] = _Job(key, chunk.contextual_content)
            job.waiters.append((pending, position))
        if pending.remaining == 0:
            self._complete(pending)

    # ------------------------------------------------------------ embedding

    def _embed_one_batch(self) -> None:
        batch = list(itertools.islice(self.jobs.values(), max(1, self.context.config.max_embedding_batch_size)))
        affected = list({id(p): p for job in batch for p, _ in job.waiters}.values())
        provider = self.context.embedder
        before = provider.identity if provider.identity_confident else None
        pause_point("embedding")
        try:
            raw = provider.embed_documents([job.text for job in batch])
            identity = provider.refresh_identity()
            if not provider.identity_confident or identity.dim <= 0:
                raise EmbeddingUnavailable(
                    "embedder_unavailable", "the embedding model could not be identified", retryable=True
                )
            if before is not None and identity != before:
                raise EmbeddingUnavailable("embedder_changed", "the model changed while embedding", retryable=True)
            vectors = checked_vectors(raw, len(batch), identity.dim)
        except EmbeddingUnavailable as exc:
            if self.context.stopping.is_set():
                return  # interrupted by shutdown: the documents stay where they are for the next start
            if exc.retryable:
                self._release_for_retry(affected, exc.code)
            else:
                for pending in affected:
                    self._drop(pending)
                    self.fail(pending.message, exc.code)
            return
        self.backoff_s = 0.0
        canonical = identity.canonical()
        for job, vector in zip(batch, vectors, strict=True):
            self.jobs.pop(job.key, None)
            if isinstance(job.key, ReuseKey) and job.key.identity == canonical and self.context.reuse is not None:
                self.context.reuse.remember(job.key, vector)
            for pending, position in job.waiters:
                self._deliver(pending, position, vector, identity)
        for pending in affected:
            if pending.remaining == 0:
                self._complete(pending)
                continue
            total = len(pending.vectors)
            try:
                self.transition(pending.message.document, Status.EMBEDDING, 0.5 + 0.4 * (total - pending.remaining) / total)
            except DocumentGone:
                self._drop(pending)
                publish(DocumentReleased(pending.message.document.document_id, reason="deleted"))
            except Exception as exc:  # noqa: BLE001 - the store failed for this one: the others carry on
                # Left in the batch, its chunks would wait for a flush no one sends.
                self._drop(pending)
                self.settle(pending.message, pending.message.document.document_id, exc)

    def _deliver(self, pending: _Pending, position: int, vector: np.ndarray, identity: VectorIdentity) -> None:
        if pending.vectors[position] is not None:
            return
        if pending.identity is None:
            pending.identity = identity
        elif pending.identity != identity:
            pending.identity_conflict = True
        pending.vectors[position] = vector
        pending.remaining -= 1

    def _complete(self, pending: _Pending) -> None:
        if pending.identity_conflict or pending.identity is None:
            # Vectors of two models in one document: embed it again, never mix them.
            self._release_for_retry([pending], "embedder_changed")
            return
        self.indexer.tell(
            IndexDocument(
                pending.message.document,
                pending.message.chunked,
                np.stack([v for v in pending.vectors if v is not None]).astype(np.float32),
                pending.identity.canonical(),
            )
        )

    # ------------------------------------------------------------ giving documents back

    def _release_for_retry(self, pendings: list[_Pending], code: str) -> None:
        """The provider is down or changed: put the documents back to Pending and back off."""
        initial = self.context.config.embedding_retry_initial_s
        self.backoff_s = min(max(self.backoff_s * 2, initial), MAX_BACKOFF_S)
        log.warning("embedding provider unavailable (%s); retrying in %.0f s", code, self.backoff_s)
        for pending in pendings:
            self._drop(pending)
            document_id = pending.message.document.document_id
            try:
                self.context.store.catalog.set_status(document_id, Status.PENDING, reason=code, progress=0.0)
            except Exception as exc:  # noqa: BLE001 - the store is down too: admission gives it back later
                log.error("could not put document %s back to Pending: %s", document_id, type(exc).__name__)
                publish(DocumentReleased(document_id, reason="storage_error", retry_after_s=self.backoff_s))
                continue
            publish(DocumentReleased(document_id, reason=code, retry_after_s=self.backoff_s))

    def _drop(self, pending: _Pending) -> None:
        """Forget a document's outstanding chunks (jobs nobody else waits for go too)."""
        for key in list(self.jobs):
            job = self.jobs[key]
            job.waiters = [(p, i) for p, i in job.waiters if p is not pending]
            if not job.waiters:
                del self.jobs[key]
