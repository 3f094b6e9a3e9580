"""The Ollama provider against a real HTTP server on 127.0.0.1 started by the test.

The server speaks the three endpoints the provider uses (/api/tags, /api/show,
/api/embed) and serves 768-wide vectors from the hash embedder, so every
answer can be recomputed here.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from kbtui.config import Config
from kbtui.embedding import EmbeddingUnavailable
from kbtui.embedding.hashing import HashEmbedder
from kbtui.embedding.ollama import OllamaEmbedder
from kbtui.embedding.policy import matryoshka_512
from kbtui.node import Node
from store import catalog

NOMIC = "nomic-embed-text:v1.5"
DIGEST_A = "sha256:" + "a1" * 32
DIGEST_B = "sha256:" + "b2" * 32


class FakeOllama:
    """A small, controllable Ollama: models, digests, delays and widths are knobs."""

    def __init__(self) -> None:
        self.models = {NOMIC: DIGEST_A}
        self.width = 768
        self.reported_width: int | None = 768
        self.delay_s = 0.0
        self.inputs: list[str] = []
        self.hasher = HashEmbedder(dim=768)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def _reply(self, status: int, payload: dict) -> None:
                body = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def do_GET(self) -> None:
                if self.path == "/api/tags":
                    models = [{"model": m, "name": m, "digest": d, "size": 1} for m, d in fake.models.items()]
                    self._reply(200, {"models": models})
                else:
                    self._reply(404, {"error": "not found"})

            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path == "/api/show":
                    if request["model"] not in fake.models:
                        self._reply(404, {"error": f"model '{request['model']}' not found"})
                        return
                    info = {"general.architecture": "nomic-bert", "nomic-bert.context_length": 2048}
                    if fake.reported_width is not None:
                        info["nomic-bert.embedding_length"] = fake.reported_width
                    self._reply(200, {"model_info": info, "details": {}})
                elif self.path == "/api/embed":
                    if request["model"] not in fake.models:
                        self._reply(404, {"error": f"model '{request['model']}' not found"})
                        return
                    time.sleep(fake.delay_s)
                    inputs = request["input"] if isinstance(request["input"], list) else [request["input"]]
                    fake.inputs.extend(inputs)
                    vectors = fake.raw(inputs)
                    self._reply(200, {"model": request["model"], "embeddings": vectors.tolist()})
                else:
                    self._reply(404, {"error": "not found"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.host = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def raw(self, inputs: list[str]) -> np.ndarray:
        """What the server returns: un-normalised, shifted hash vectors of the given width."""
        vectors = HashEmbedder(dim=self.width).embed_documents(inputs) * 3.0 + 0.25
        return vectors

    def __enter__(self) -> FakeOllama:
        self.thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def ollama_server():
    with FakeOllama() as server:
        yield server


def provider(server: FakeOllama, **kwargs) -> OllamaEmbedder:
    options = {"host": server.host, "model": NOMIC, "timeout_s": 2.0, "query_timeout_s": 1.0, "connect_timeout_s": 1.0}
    options.update(kwargs)
    return OllamaEmbedder(**options)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_identity_comes_from_the_servers_model_list(ollama_server):
    embedder = provider(ollama_server)
    identity = embedder.identity
    assert embedder.identity_confident
    assert (identity.provider, identity.model, identity.digest) == ("ollama", NOMIC, "a1" * 8)
    assert (identity.transform, identity.dim) == ("matryoshka512-v1", 512)
    assert embedder.context_window == 2048


def test_documents_and_queries_get_their_prefix_and_the_matryoshka_recipe(ollama_server):
    embedder = provider(ollama_server)
    vectors = embedder.embed_documents(["rotate the certificate", "restore the backup"])
    query = embedder.embed_query("how to rotate certificates")
    assert ollama_server.inputs == [
        "search_document: rotate the certificate",
        "search_document: restore the backup",
        "search_query: how to rotate certificates",
    ]
    expected = matryoshka_512(ollama_server.raw(ollama_server.inputs))
    assert np.allclose(vectors, expected[:2], atol=1e-5) and np.allclose(query, expected[2], atol=1e-5)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_native_mode_keeps_the_full_width(ollama_server):
    embedder = provider(ollama_server, vector_mode="native")
    assert (embedder.identity.transform, embedder.identity.dim) == ("native", 768)
    vector = embedder.embed_query("x")
    assert vector.shape == (768,)
    assert embedder.identity != provider(ollama_server).identity


def test_a_width_unknown_to_the_model_info_is_probed(ollama_server):
    ollama_server.reported_width = None
    assert provider(ollama_server, vector_mode="native").identity.dim == 768


def test_a_model_replaced_under_the_same_tag_changes_identity(ollama_server):
    embedder = provider(ollama_server, identity_ttl_s=0.0)
    before = embedder.identity
    ollama_server.models[NOMIC] = DIGEST_B
    after = embedder.identity
    assert after.digest == "b2" * 8 and after.canonical() != before.canonical()


def test_an_unreachable_server_is_a_retryable_content_free_failure():
    embedder = OllamaEmbedder(host=f"http://127.0.0.1:{free_port()}", model=NOMIC, connect_timeout_s=0.5)
    assert not embedder.identity_confident and embedder.identity.digest == "unresolved"
    with pytest.raises(EmbeddingUnavailable) as failure:
        embedder.embed_documents(["secret text"])
    assert failure.value.code == "embedder_unavailable" and failure.value.retryable
    assert "secret" not in str(failure.value)


def test_an_unknown_model_is_not_confidently_resolved(ollama_server):
    embedder = provider(ollama_server, model="no-such-embedder")
    assert not embedder.identity_confident
    with pytest.raises(EmbeddingUnavailable) as failure:
        embedder.embed_query("x")
    assert failure.value.code == "embedding_model_missing" and not failure.value.retryable


def test_a_slow_server_within_the_timeout_still_answers(ollama_server):
    embedder = provider(ollama_server)
    ollama_server.delay_s = 0.3
    assert embedder.embed_documents(["slow but fine"]).shape == (1, 512)


def test_a_hung_server_times_out(ollama_server):
    embedder = provider(ollama_server, timeout_s=0.5)
    embedder.identity  # noqa: B018 - resolved while the server is still quick
    ollama_server.delay_s = 3.0
    started = time.monotonic()
    with pytest.raises(EmbeddingUnavailable) as failure:
        embedder.embed_documents(["never answered"])
    assert failure.value.code == "embedder_timeout" and failure.value.retryable
    assert time.monotonic() - started < 2.5


def test_vectors_of_the_wrong_width_are_refused(ollama_server):
    embedder = provider(ollama_server)
    embedder.identity  # noqa: B018
    ollama_server.width = 1024  # the server now answers wider than its model info says
    with pytest.raises(EmbeddingUnavailable) as failure:
        embedder.embed_documents(["x"])
    assert failure.value.code == "vector_dim_mismatch"


def ollama_node(home: Path, server: FakeOllama, monkeypatch) -> Node:
    monkeypatch.setenv("KBTUI_EMBEDDING_PROVIDER", "ollama")
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'ollama_host = "{server.host}"\nembedding_timeout_s = 2.0\nembedding_query_timeout_s = 0.5\n'
        "embedding_connect_timeout_s = 0.5\n",
        encoding="utf-8",
    )
    return Node.open(Config.load(home))


def test_a_node_indexes_and_searches_through_ollama_and_degrades_when_it_goes(home, tmp_path, monkeypatch):
    server = FakeOllama().__enter__()
    node = ollama_node(home, server, monkeypatch)
    try:
        doc = tmp_path / "tls.md"
        doc.write_text("# TLS\n\nRotate the ingress certificate before it expires.\n", encoding="utf-8")
        added = catalog.add_document(node.store, "DEFAULT", doc, display_name="tls.md", fmt="markdown")
        assert node.ingest(added.document_id) == "Indexed"
        row = catalog.resolve_document(added.document_id)
        assert row.vector_identity == node.embedder.identity.canonical() and row.vector_dim == 512
        hits = node.search("rotate ingress certificate", "DEFAULT").hits
        assert hits and hits[0].vector_rank == 1

        server.__exit__()
        response = node.search("rotate ingress certificate", "DEFAULT")
        assert "embedder_unavailable" in response.degraded and response.hits  # lexical still answers
    finally:
        node.close()


def test_a_model_answering_in_the_wrong_width_fails_the_document(home, tmp_path, monkeypatch, ollama_server):
    node = ollama_node(home, ollama_server, monkeypatch)
    try:
        node.embedder.identity  # noqa: B018
        ollama_server.width = 1024
        doc = tmp_path / "a.md"
        doc.write_text("# A\n\nSome text.\n", encoding="utf-8")
        added = catalog.add_document(node.store, "DEFAULT", doc, display_name="a.md", fmt="markdown")
        assert node.ingest(added.document_id) == "Failed"
        assert catalog.resolve_document(added.document_id).failure_reason == "vector_dim_mismatch"
    finally:
        node.close()
