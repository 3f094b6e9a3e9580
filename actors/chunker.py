"""Chunker: cuts extracted elements into header-boundary chunks."""

from __future__ import annotations

from pykka import ActorRef

from actors.events import ChunkDocument, EmbedDocument
from actors.faults import pause_point
from actors.stage import PipelineContext, StageActor
from kbtui.ingest import chunk_stage
from store.records import Status


class Chunker(StageActor):
    def __init__(self, context: PipelineContext, embedder: ActorRef) -> None:
        super().__init__(context)
        self.embedder = embedder

    def handle(self, message: ChunkDocument) -> None:
        document = message.document
        self.transition(document, Status.CHUNKING, 0.3)
        pause_point("chunking")
        chunked = chunk_stage(
            self.context.config, document, message.elements, self.context.embedder.context_window
        )
        self.embedder.tell(EmbedDocument(document, chunked))
