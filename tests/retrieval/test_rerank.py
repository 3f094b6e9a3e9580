"""Reranking against a real llama-server-shaped HTTP server on loopback."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kbtui.retrieval.rerank import LlamaServerReranker, RerankerConfigError, reranker_warmer
from kbtui.retrieval.search import SearchRequest, SearchService


class RerankServer:
    """Scores each document by how often it contains ``favourite``; can be slow, loading or broken."""

    def __init__(self) -> None:
        self.delay_s = 0.0
        self.status = 200
        self.malformed = False
        self.favourite = "gamma"
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_GET(self):
                body = b'{"status": "ok"}' if outer.status == 200 else b'{"error": "loading"}'
                self.send_response(outer.status)
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(request)
                time.sleep(outer.delay_s)
                if outer.status != 200:
                    self.send_response(outer.status)
                    self.end_headers()
                    return
                results = [
                    {"index": i, "relevance_score": float(doc.lower().count(outer.favourite))}
                    for i, doc in enumerate(request["documents"])
                ]
                if outer.malformed:
                    results = results[:1]
                payload = json.dumps({"results": results}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def rerank_server():
    server = RerankServer()
    yield server
    server.stop()


@pytest.fixture
def documents(indexed):
    # Lexically, "alpha" ranks the alpha-heavy chunks first; the reranker prefers gamma.
    for i, text in enumerate(["alpha alpha alpha", "alpha beta", "alpha gamma gamma", "alpha delta", "alpha gamma"]):
        indexed(f"d{i}.md", f"# Doc {i}\n\n{text} shared words here")


def service(node, url, warms, **config):
    cfg = dataclasses.replace(node.config, reranker_url=url, **config)
    return SearchService(cfg, node.embedder, node.store, reranker=LlamaServerReranker(url), request_warm=warms.append)


def test_a_live_reranker_reorders_the_fused_pool(node, documents, rerank_server):
    warms: list[str] = []
    searcher = service(node, rerank_server.url, warms, adaptive_reranking=False)
    try:
        response = searcher.search(SearchRequest("alpha", "DEFAULT", limit=3))
    finally:
        searcher.close()
    assert response.degraded == []
    assert [h.score_kind for h in response.hits] == ["Rerank"] * 3
    assert "gamma gamma" in response.hits[0].text and response.hits[0].score == 2.0
    assert response.hits[0].fusion_rank > 1  # it was not first before reranking
    assert rerank_server.requests[0]["query"] == "alpha" and len(rerank_server.requests[0]["documents"]) == 5
    assert warms == []


def test_a_cold_reranker_returns_fusion_order_at_once_and_asks_for_a_warm(node, documents, rerank_server):
    url = rerank_server.url
    rerank_server.stop()  # nothing listens there any more
    warms: list[str] = []
    searcher = service(node, url, warms, adaptive_reranking=False)
    try:
        started = time.perf_counter()
        response = searcher.search(SearchRequest("alpha", "DEFAULT", limit=3))
        elapsed = time.perf_counter() - started
    finally:
        searcher.close()
    assert response.degraded == ["reranker_cold"]
    assert all(h.score_kind == "Fusion" for h in response.hits) and response.hits
    assert warms == ["reranker"]
    assert elapsed < 0.5


def test_a_loading_reranker_counts_as_cold(node, documents, rerank_server):
    rerank_server.status = 503
    warms: list[str] = []
    searcher = service(node, rerank_server.url, warms, adaptive_reranking=False)
    try:
        assert searcher.search(SearchRequest("alpha", "DEFAULT")).degraded == ["reranker_cold"]
    finally:
        searcher.close()
    assert warms == ["reranker"]


def test_a_slow_reranker_hits_the_deadline_then_is_busy_until_it_answers(node, documents, rerank_server):
    rerank_server.delay_s = 1.0
    warms: list[str] = []
    searcher = service(node, rerank_server.url, warms, adaptive_reranking=False, search_latency_budget_ms=200.0)
    try:
        started = time.perf_counter()
        first = searcher.search(SearchRequest("alpha", "DEFAULT", limit=3))
        first_s = time.perf_counter() - started
        started = time.perf_counter()
        second = searcher.search(SearchRequest("alpha", "DEFAULT", limit=3))
        second_s = time.perf_counter() - started
        assert first.degraded == ["reranker_deadline"] and first_s < 0.6
        assert all(h.score_kind == "Fusion" for h in first.hits)
        assert second.degraded == ["reranker_busy"] and second_s < 0.15
        assert len(rerank_server.requests) == 1  # the busy search never sent a request
        assert warms == ["reranker"]  # a deadline asks for a warm; busy does not
        # Once the abandoned request has finished, reranking works again.
        deadline = time.monotonic() + 5
        while searcher.reranker.busy and time.monotonic() < deadline:
            time.sleep(0.05)
        rerank_server.delay_s = 0.0
        third = searcher.search(SearchRequest("alpha", "DEFAULT", limit=3))
        assert third.degraded == [] and third.hits[0].score_kind == "Rerank"
    finally:
        searcher.close()


def test_a_malformed_answer_keeps_fusion_order(node, documents, rerank_server):
    rerank_server.malformed = True
    warms: list[str] = []
    searcher = service(node, rerank_server.url, warms, adaptive_reranking=False)
    try:
        response = searcher.search(SearchRequest("alpha", "DEFAULT"))
    finally:
        searcher.close()
    assert response.degraded == ["reranker_malformed"]
    assert all(h.score_kind == "Fusion" for h in response.hits)
    assert warms == ["reranker"]


def test_the_adaptive_gate_skips_when_both_arms_agree(node, indexed, rerank_server):
    indexed("only.md", "# Only\n\nzebracorn budget")
    indexed("other.md", "# Other\n\nsoup on fridays")
    indexed("third.md", "# Third\n\nsomething else entirely")
    warms: list[str] = []
    searcher = service(node, rerank_server.url, warms)
    try:
        response = searcher.search(SearchRequest("zebracorn budget", "DEFAULT"))
    finally:
        searcher.close()
    assert response.degraded == ["reranker_skipped_agree"]
    assert rerank_server.requests == []


def test_the_reranker_must_live_on_loopback():
    for url in ("http://192.168.1.5:8080", "https://127.0.0.1:8080", "http://example.com", "file:///tmp/x"):
        with pytest.raises(RerankerConfigError):
            LlamaServerReranker(url)
    LlamaServerReranker("http://localhost:8012")
    LlamaServerReranker("http://[::1]:8012")


def test_the_warmer_waits_for_a_live_server_and_fails_fast_without_one(rerank_server):
    reranker = LlamaServerReranker(rerank_server.url)
    reranker_warmer(reranker, wait_s=2.0)()
    assert rerank_server.requests and rerank_server.requests[-1]["documents"] == ["warm up"]
    url = rerank_server.url
    rerank_server.stop()
    with pytest.raises(ConnectionError):
        reranker_warmer(LlamaServerReranker(url), wait_s=0.2)()
