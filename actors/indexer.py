"""Indexer: the atomic Indexed transition, then the ANN index update."""

from __future__ import annotations

import logging

from actors.events import DocumentStatusChanged, IndexDocument
from actors.faults import pause_point
from actors.listener import publish
from actors.stage import DocumentGone, DocumentSuperseded, StageActor
from kbtui.extract import PARSER_VERSION
from store.errors import Superseded
from store.records import Status

log = logging.getLogger(__name__)


class Indexer(StageActor):
    def handle(self, message: IndexDocument) -> None:
        document = message.document
        pause_point("committing")
        try:
            chunk_ids = self.context.store.catalog.commit_index(
                document.document_id,
                sections=message.chunked.sections,
                chunks=message.chunked.chunks,
                vectors=message.vectors,
                identity=message.identity,
                parser_version=PARSER_VERSION,
                chunker_version=message.chunked.chunker_version,
                content_hash=document.content_hash,
            )
        except Superseded:
            raise DocumentSuperseded(document.document_id) from None
        if chunk_ids is None:
            raise DocumentGone(document.document_id)
        pause_point("committed")
        # A derived cache (the SQLite store's ANN files): if this fails, it catches up when next opened.
        try:
            self.context.store.vectors.note_committed(chunk_ids)
        except Exception as exc:  # noqa: BLE001
            log.error("ANN index update failed (%s); it catches up from the database", type(exc).__name__)
        publish(DocumentStatusChanged(document.document_id, document.collection_id, Status.INDEXED.value, 1.0))
