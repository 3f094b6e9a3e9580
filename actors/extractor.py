"""Extractor: reads the encrypted source and extracts its elements."""

from __future__ import annotations

from pykka import ActorRef

from actors.events import ChunkDocument, DocumentRef, DocumentReleased, ExtractDocument
from actors.faults import pause_point
from actors.listener import publish
from actors.stage import DocumentGone, PipelineContext, StageActor
from kbtui.ingest import extract_stage
from store.records import Status


class Extractor(StageActor):
    def __init__(self, context: PipelineContext, chunker: ActorRef) -> None:
        super().__init__(context)
        self.chunker = chunker

    def handle(self, message: ExtractDocument) -> None:
        row = self.context.store.catalog.document(message.document_id)
        if row is None:
            raise DocumentGone(message.document_id)
        if row.status != Status.PENDING.value:
            # Only Pending rows are work: an admit that raced with another
            # node or process must not index the same document twice.
            publish(DocumentReleased(row.id, reason="not_pending"))
            return
        document = DocumentRef(row.id, row.collection_id, row.format, row.source_path, row.content_hash)
        self.transition(document, Status.EXTRACTING, 0.1)
        pause_point("extracting")
        elements = extract_stage(self.context.store, self.context.config, document)
        self.chunker.tell(ChunkDocument(document, elements))
