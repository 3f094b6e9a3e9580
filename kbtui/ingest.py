"""One document through the pipeline stages: extract, chunk, embed, index.

The stage functions are plain code with fixed, content-free failure reasons;
the synchronous :func:`ingest_document` runs them in order (the actor pipeline
calls the same stages).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from kbtui.chunking import CHUNKER_VERSION, ChunkSpec, SectionSpec, chunk_document
from kbtui.config import Config
from kbtui.embedding import EmbeddingProvider, EmbeddingUnavailable
from kbtui.embedding.reuse import ChunkEmbeddingReuse, EmbeddedChunks
from kbtui.errors import BlobCorrupt, KbtuiError
from kbtui.extract import PARSER_VERSION, Element, ExtractionFailed, extract
from store import Store
from store.catalog import commit_index, set_status
from store.models import Document, Status

log = logging.getLogger(__name__)


class StageFailed(Exception):
    """A stage failed for one document; ``reason`` is a fixed reason code."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Chunked:
    sections: list[SectionSpec]
    chunks: list[ChunkSpec]


def extract_stage(store: Store, config: Config, document: Document) -> list[Element]:
    try:
        data = store.blobs.read_bytes(document.id, max_bytes=config.max_document_bytes)
    except BlobCorrupt:
        raise StageFailed("blob_corrupt") from None
    except KbtuiError:
        raise StageFailed("extract_too_large") from None
    try:
        return extract(data, document.format)
    except ExtractionFailed as exc:
        raise StageFailed(exc.code) from None


def chunk_stage(config: Config, document: Document, elements: list[Element], context_window: int | None) -> Chunked:
    sections, chunks = chunk_document(
        document.id,
        elements,
        source_path=document.source_path or "",
        settings=config.chunking,
        context_window=context_window,
        parser_version=PARSER_VERSION,
    )
    if not chunks:
        raise StageFailed("no_text")
    return Chunked(sections, chunks)


def embed_stage(
    config: Config,
    embedder: EmbeddingProvider,
    chunks: list[ChunkSpec],
    reuse: ChunkEmbeddingReuse | None = None,
) -> EmbeddedChunks:
    """One checked vector per chunk and the identity they belong to; vectors
    whose exact reuse key matches are reused instead of embedded again."""
    reuse = reuse if reuse is not None else ChunkEmbeddingReuse()
    try:
        embedded = reuse.embed_chunks(
            embedder,
            chunks,
            parser_version=PARSER_VERSION,
            chunker_version=CHUNKER_VERSION,
            batch_size=config.max_embedding_batch_size,
        )
    except EmbeddingUnavailable as exc:
        raise StageFailed(exc.code) from None
    vectors = embedded.vectors
    if vectors.ndim != 2 or vectors.shape[0] != len(chunks) or vectors.shape[1] != embedded.identity.dim:
        raise StageFailed("vector_dim_mismatch")
    if not np.all(np.isfinite(vectors)):
        raise StageFailed("vector_not_finite")
    return embedded


def ingest_document(
    store: Store,
    config: Config,
    embedder: EmbeddingProvider,
    document_id: str,
    *,
    reuse: ChunkEmbeddingReuse | None = None,
) -> str | None:
    """Run every stage for one document; return its final status (None if deleted)."""
    document = Document.get_or_none(Document.id == document_id)
    if document is None:
        return None
    try:
        set_status(document_id, Status.EXTRACTING, progress=0.1)
        elements = extract_stage(store, config, document)
        set_status(document_id, Status.CHUNKING, progress=0.4)
        chunked = chunk_stage(config, document, elements, embedder.context_window)
        set_status(document_id, Status.EMBEDDING, progress=0.6)
        embedded = embed_stage(config, embedder, chunked.chunks, reuse)
        committed = commit_index(
            document_id,
            sections=chunked.sections,
            chunks=chunked.chunks,
            vectors=embedded.vectors,
            identity=embedded.identity.canonical(),
            parser_version=PARSER_VERSION,
            chunker_version=CHUNKER_VERSION,
        )
        return Status.INDEXED.value if committed is not None else None
    except StageFailed as exc:
        set_status(document_id, Status.FAILED, reason=exc.reason)
        log.info("document %s failed: %s", document_id, exc.reason)
        return Status.FAILED.value
    except Exception as exc:  # noqa: BLE001 - one document must never stop the rest
        set_status(document_id, Status.FAILED, reason="internal_error")
        log.error("document %s failed with %s", document_id, type(exc).__name__)
        return Status.FAILED.value
