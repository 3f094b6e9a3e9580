"""Reindexer: finds Indexed documents built by an older pipeline and re-admits them.

A document is stale when its parser or chunker version differs from this
build's (the chunker version follows the chunk settings in config.toml), or
when its vector identity differs from the active provider's. The identity
comparison is made only when the provider resolved its model
confidently: during an outage the configured-name fallback would otherwise
flag the whole corpus. Re-admission goes through the same bounded queue; a
document keeps serving its old index until the new one commits.
"""

from __future__ import annotations

import logging

import pykka

from actors.events import Admit, ScanForStale
from actors.stage import PipelineContext
from kbtui.chunking import chunker_version
from kbtui.extract import PARSER_VERSION

log = logging.getLogger(__name__)


class Reindexer(pykka.ThreadingActor):
    use_daemon_thread = True

    def __init__(self, context: PipelineContext, admission: pykka.ActorRef, *, batch: int) -> None:
        super().__init__()
        self.context = context
        self.admission = admission
        self.batch = batch

    def on_receive(self, message: object) -> object:
        if isinstance(message, ScanForStale) and not self.context.stopping.is_set():
            try:
                return self.scan()
            except Exception as exc:  # noqa: BLE001 - try again at the next scan
                log.error("stale-document scan failed: %s", type(exc).__name__)
        return None

    def scan(self) -> int:
        # On a store many nodes share, one node at a time scans (they would re-admit the same documents).
        coordination = self.context.store.coordination
        if coordination is None:
            return self._scan()
        with coordination.single_runner("stale-reindex") as mine:
            return self._scan() if mine else 0

    def _scan(self) -> int:
        embedder = self.context.embedder
        confident = getattr(embedder, "identity_confident", True)
        catalog = self.context.store.catalog
        stale = catalog.stale_document_ids(
            parser_version=PARSER_VERSION,
            chunker_version=chunker_version(self.context.config.chunking),
            vector_identity=embedder.identity.canonical() if confident else None,
            limit=self.batch,
        )
        # Pending first: the database is the queue of record, so a busy queue
        # only delays them; they keep serving their old index meanwhile.
        catalog.mark_pending(stale)
        for document_id in stale:
            self.admission.tell(Admit(document_id))
        if stale:
            log.info("re-admitting %d stale document(s)", len(stale))
        return len(stale)
