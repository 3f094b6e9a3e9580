"""Stopping the pipeline stops local inference at once (issue 20, finding 1).

A process that exits while onnxruntime's threads run an inference aborts
(``terminate called without an active exception``, exit 134); so a stop
interrupts the batch in progress instead of waiting for it.
"""

from __future__ import annotations

import threading
import time

import pytest

from kbtui.embedding import EmbeddingUnavailable
from kbtui.embedding.local import LocalEmbedder


def test_interrupt_stops_a_long_batch_at_once_and_queries_still_embed():
    embedder = LocalEmbedder(batch_size=512)
    embedder.warm()
    texts = [" ".join(f"word{i} token{j}" for j in range(120)) for i in range(512)]  # many seconds of work
    outcome: list[BaseException | None] = []

    def embed() -> None:
        try:
            embedder.embed_documents(texts)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            outcome.append(exc)

    worker = threading.Thread(target=embed)
    worker.start()
    deadline = time.monotonic() + 30
    while not embedder._document_runs and time.monotonic() < deadline:  # wait until inference runs
        time.sleep(0.01)
    assert embedder._document_runs, "the batch never started"
    started = time.monotonic()
    embedder.interrupt()
    worker.join(timeout=5)
    assert not worker.is_alive() and time.monotonic() - started < 1.0
    assert isinstance(outcome[0], EmbeddingUnavailable)
    assert outcome[0].code == "embedder_interrupted" and outcome[0].retryable
    # Until resumed, no new batch starts; a search's query is never interrupted.
    with pytest.raises(EmbeddingUnavailable):
        embedder.embed_documents(["another"])
    assert embedder.embed_query("still works").shape == (384,)
    embedder.resume()
    assert embedder.embed_documents(["works again"]).shape == (1, 384)
