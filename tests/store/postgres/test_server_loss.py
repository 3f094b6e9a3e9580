"""The PostgreSQL server going away under a node: search fails with one line
and does not hang; ingestion leaves its documents Pending and finishes them
once the server is back, none indexed twice or half visible."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pykka
import pytest

from kbtui.config import Config
from kbtui.embedding.hashing import HashEmbedder
from kbtui.node import Node
from store.postgres.connection import ServerProblem
from tests.postgres_server import TestServer


class HeldEmbedder(HashEmbedder):
    """The hash embedder, held at a gate so the server can be stopped mid-ingestion."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.entered = threading.Event()

    def embed_documents(self, texts):  # type: ignore[no-untyped-def]
        self.entered.set()
        self.gate.wait(timeout=60)
        return super().embed_documents(texts)

    def embed_query(self, text):  # type: ignore[no-untyped-def]
        # Not held: the pipeline's warm-up embeds a query, and only a document in Embedding must wait.
        return super().embed_documents([text])[0]


def wait_until(predicate: Callable[[], bool], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except ServerProblem:
            pass  # the server is still coming back
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


@pytest.fixture
def paused_server(postgres_server: TestServer) -> Iterator[TestServer]:
    """The suite's server, which the test may pause; it is running again afterwards."""
    try:
        yield postgres_server
    finally:
        postgres_server.resume()


@pytest.fixture
def pg_node(home: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Node]:
    monkeypatch.setenv("KBTUI_DATABASE_URL", postgres_url.replace("postgres:@", "postgres:hunter2secret@"))
    node = Node.open(dataclasses.replace(Config.load(home), storage_retry_s=0.5, drain_sweep_interval_s=0.1))
    try:
        yield node
    finally:
        pykka.ActorRegistry.stop_all()
        node.close()


def _add_one(node: Node, path: Path) -> str:
    return node.store.catalog.add_document("DEFAULT", path, display_name=path.name, fmt="markdown").document_id


def test_search_against_a_stopped_server_fails_with_one_line_then_works_again(
    pg_node: Node, paused_server: TestServer, tmp_path: Path
) -> None:
    path = tmp_path / "a.md"
    path.write_text("# TLS\n\nrotate the certificates every ninety days\n")
    added = _add_one(pg_node, path)
    assert pg_node.index([added]) == {added: "Indexed"}
    assert pg_node.search("rotate certificates", "DEFAULT").hits

    paused_server.pause()
    started = time.monotonic()
    with pytest.raises(ServerProblem) as refused:
        pg_node.search("rotate certificates", "DEFAULT")
    assert time.monotonic() - started < 20
    message = refused.value.message
    assert "\n" not in message and "PostgreSQL server" in message and "hunter2secret" not in message

    paused_server.resume()
    wait_until(lambda: bool(pg_node.search("rotate certificates", "DEFAULT").hits))


def test_a_server_lost_mid_ingestion_leaves_documents_pending_then_they_index(
    pg_node: Node, paused_server: TestServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    embedder = HeldEmbedder()
    pg_node.embedder = embedder
    ids = [_add_one(pg_node, path) for path in _files(tmp_path, 4)]
    with pg_node.pipeline() as runtime:
        assert embedder.entered.wait(60)
        paused_server.pause()
        embedder.gate.set()  # the stages now meet a server that is gone
        wait_until(lambda: runtime.state().in_flight == 0, timeout=60)
        paused_server.resume()
        wait_until(lambda: set(pg_node.statuses(ids).values()) == {"Indexed"})
    counts = {d.id: d.chunk_count for d in pg_node.store.catalog.documents(document_ids=ids)}
    for document_id in ids:
        served = list(pg_node.store.chunks.document_chunks(document_id, "DEFAULT"))
        assert len(served) == counts[document_id] > 0  # whole, and not twice
        assert len({c.chunk_id for c in served}) == len(served)
    assert all(d.failure_reason is None for d in pg_node.store.catalog.documents(document_ids=ids))
    # The loss was met mid-pipeline: documents went back to Pending, then on to Indexed once.
    histories = [[h.status for h in pg_node.store.catalog.history(d)] for d in ids]
    assert any(h.index("Pending", 1) > h.index("Extracting") for h in histories if h.count("Pending") > 1)
    assert all(h.count("Indexed") == 1 for h in histories)
    assert "hunter2secret" not in caplog.text


def _files(tmp_path: Path, count: int) -> list[Path]:
    paths = []
    for i in range(count):
        path = tmp_path / "docs" / f"doc{i}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Runbook {i}\n\nrotation{i} of the certificates, step {i}\n\n## More\n\nrestore {i}\n")
        paths.append(path)
    return paths

