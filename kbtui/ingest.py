"""The domain work of the extraction and chunking stages, for the pipeline's actors.

Plain functions with fixed, content-free failure reasons; embedding and the
atomic index commit live in ``actors/embedder.py`` and ``actors/indexer.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kbtui.chunking import ChunkSpec, SectionSpec, chunk_document, chunker_version
from kbtui.config import Config
from kbtui.errors import BlobCorrupt, StoreError
from kbtui.extract import PARSER_VERSION, Element, ExtractionFailed, extract_isolated
from kbtui.ports import Storage


class DocumentFacts(Protocol):
    """What the stages read of a document (``actors.events.DocumentRef`` carries it)."""

    @property
    def document_id(self) -> str: ...

    @property
    def format(self) -> str: ...

    @property
    def source_path(self) -> str | None: ...


class StageFailed(Exception):
    """A stage failed for one document; ``reason`` is a fixed reason code."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Chunked:
    sections: list[SectionSpec]
    chunks: list[ChunkSpec]
    chunker_version: int  # what the chunks were cut under: committed with them, matched by reuse


def extract_stage(store: Storage, config: Config, document: DocumentFacts) -> list[Element]:
    """Decrypt the document and parse it in a killable worker under the configured limits.

    Which parser read it and what OCR made of each page it ran on are
    recorded, whatever comes of the later stages."""
    try:
        max_bytes = min(config.max_document_bytes, config.extraction.max_input_bytes)
        data = store.blobs.read_bytes(document.document_id, max_bytes=max_bytes)
    except BlobCorrupt:
        raise StageFailed("blob_corrupt") from None
    except StoreError:  # over the size limit
        raise StageFailed("extract_too_large") from None
    store.catalog.upgrade_legacy_blob(document.document_id)  # re-indexing gives an old blob its sealed label
    try:
        extraction = extract_isolated(data, document.format, config.extraction, config.ocr)
    except ExtractionFailed as exc:
        raise StageFailed(exc.code) from None
    store.catalog.record_extraction(document.document_id, PARSER_VERSION, extraction.ocr_pages)
    return extraction.elements


def chunk_stage(
    config: Config, document: DocumentFacts, elements: list[Element], context_window: int | None
) -> Chunked:
    sections, chunks = chunk_document(
        document.document_id,
        elements,
        source_path=document.source_path or "",
        settings=config.chunking,
        context_window=context_window,
        parser_version=PARSER_VERSION,
    )
    if not chunks:
        raise StageFailed("no_text")
    return Chunked(sections, chunks, chunker_version(config.chunking))
