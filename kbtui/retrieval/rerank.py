"""Optional reranking with a cross-encoder served by llama.cpp's ``llama-server``.

The client speaks the server's rerank endpoint (``POST /v1/rerank`` with
``query`` and ``documents``; the answer lists ``index`` and
``relevance_score``) on loopback only (unless ``allow_cloud_model_access``),
checked on the URL and again on the addresses its host resolves to at each
connection. It never starts the server: an
unreachable or still-loading server is *cold* and the search carries on in
fusion order while it asks for a warm (:func:`reranker_warmer` is the
PrewarmManager's warmer). A request still running at the search deadline is
abandoned, not cancelled (llama-server keeps scoring a cancelled request
anyway): it finishes in the background under the client's own timeout, and
while it is outstanding every new rerank falls back at once (*busy*).

:func:`rerank_skip_reason` is the adaptive policy: skip when both arms agree
on the top chunk, when the pool is too small to reorder, or when 80 % of the
latency budget is already spent.
"""

from __future__ import annotations

import http.client
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from kbtui.config import Config
from kbtui.errors import KbtuiError
from kbtui.loopback import NotLoopback, connect_loopback, is_loopback_url

log = logging.getLogger(__name__)

RERANK_PATH = "/v1/rerank"
HEALTH_PATH = "/health"
# The background request's own bound: past the search deadline it is left to
# finish (or time out) here, and the reranker counts as busy meanwhile.
REQUEST_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 0.5
MIN_RERANK_CANDIDATES = 3
BUDGET_SPENT_SHARE = 0.8
MAX_DOCUMENT_CHARS = 2_000

# Outcome codes, reported on the search response as ``reranker_<code>``.
COLD = "cold"
BUSY = "busy"
DEADLINE = "deadline"
MALFORMED = "malformed"
FAILED = "failed"
NOT_LOCAL = "not_local"  # the host resolved off this machine: nothing was sent


class RerankerConfigError(KbtuiError):
    """The configured reranker URL is not an http URL (on loopback unless remote models are allowed)."""


@dataclass(frozen=True)
class RerankOutcome:
    """Scores in the order of the documents sent, or a failure ``code``."""

    scores: tuple[float, ...] | None
    code: str | None = None

    @property
    def ok(self) -> bool:
        return self.scores is not None


def rerank_skip_reason(
    *,
    candidates: int,
    lexical_top: Hashable | None,
    vector_top: Hashable | None,
    elapsed_s: float,
    budget_s: float,
    adaptive: bool = True,
) -> str | None:
    """Why the optional rerank should not run (a ``skipped_*`` code), or None to run it."""
    if candidates < 2:
        return "skipped_small_pool"  # nothing to reorder, adaptive or not
    if not adaptive:
        return None
    if candidates < MIN_RERANK_CANDIDATES:
        return "skipped_small_pool"
    if lexical_top is not None and lexical_top == vector_top:
        return "skipped_agree"
    if elapsed_s >= BUDGET_SPENT_SHARE * budget_s:
        return "skipped_budget"
    return None


def reranker_endpoint(url: str, *, local_only: bool = True) -> tuple[str, int]:
    """Host and port of an ``http://`` URL, on this machine when ``local_only``; anything else is refused."""
    try:
        parts = urlsplit(url)
        scheme, host, port = parts.scheme, parts.hostname or "", parts.port or 80
    except ValueError:  # a port out of range, a broken IPv6 literal
        scheme, host, port = "", "", 0
    if scheme != "http" or not host:
        raise RerankerConfigError("reranker_url must be an http:// URL on this machine")
    if local_only and not is_loopback_url(url):
        raise RerankerConfigError("reranker_url must point at a loopback address")
    return host, port


class _LoopbackConnection(http.client.HTTPConnection):
    """An HTTP connection made only to the loopback addresses its host resolves to now."""

    def connect(self) -> None:
        self.sock = connect_loopback(self.host, self.port, self.timeout)


class LlamaServerReranker:
    """A client of one running llama-server rerank model (on loopback unless ``local_only`` is off)."""

    def __init__(
        self,
        url: str,
        model: str = "",
        *,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        local_only: bool = True,
    ) -> None:
        self.host, self.port = reranker_endpoint(url, local_only=local_only)
        self._connection_class = _LoopbackConnection if local_only else http.client.HTTPConnection
        self.model = model
        self.request_timeout_s = request_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self._lock = threading.Lock()
        self._abandoned = 0  # requests past their deadline, still running

    @property
    def busy(self) -> bool:
        with self._lock:
            return self._abandoned > 0

    def rerank(self, query: str, documents: Sequence[str], *, deadline_s: float) -> RerankOutcome:
        """Score ``documents`` for ``query``, waiting at most ``deadline_s`` seconds.

        Never raises: a cold, busy, slow or misbehaving server is an outcome code.
        """
        if self.busy:
            return RerankOutcome(None, BUSY)
        if deadline_s <= 0:
            return RerankOutcome(None, DEADLINE)
        body = json.dumps(
            {
                **({"model": self.model} if self.model else {}),
                "query": query,
                "documents": [d[:MAX_DOCUMENT_CHARS] for d in documents],
                "top_n": len(documents),
            }
        ).encode("utf-8")
        result: dict[str, object] = {}
        finished = threading.Event()

        def run() -> None:
            try:
                outcome = self._post(body, len(documents))
            except Exception as exc:  # noqa: BLE001 - a reranker fault never reaches the search
                log.warning("reranker request failed: %s", type(exc).__name__)
                outcome = RerankOutcome(None, FAILED)
            with self._lock:
                result["outcome"] = outcome
                finished.set()
                if result.get("abandoned"):
                    self._abandoned -= 1

        threading.Thread(target=run, name="kbtui-rerank", daemon=True).start()
        finished.wait(deadline_s)
        with self._lock:
            if finished.is_set():
                return result["outcome"]  # type: ignore[return-value]
            result["abandoned"] = True  # the worker releases it when it ends
            self._abandoned += 1
        return RerankOutcome(None, DEADLINE)

    def _post(self, body: bytes, count: int) -> RerankOutcome:
        connection = self._connection_class(self.host, self.port, timeout=self.connect_timeout_s)
        try:
            try:
                connection.connect()
            except OSError:
                return RerankOutcome(None, COLD)  # nothing listening: never started, or gone
            except NotLoopback:
                log.warning("reranker refused: its host resolved to an address off this machine")
                return RerankOutcome(None, NOT_LOCAL)
            connection.sock.settimeout(self.request_timeout_s)
            connection.request("POST", RERANK_PATH, body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            payload = response.read(8 * 1024 * 1024)
            if response.status == 503:
                return RerankOutcome(None, COLD)  # llama-server still loading the model
            if response.status != 200:
                log.warning("reranker answered HTTP %d", response.status)
                return RerankOutcome(None, FAILED)
            return parse_rerank_response(payload, count)
        except (OSError, http.client.HTTPException) as exc:
            log.warning("reranker request failed: %s", type(exc).__name__)
            return RerankOutcome(None, FAILED)
        finally:
            connection.close()

    def health(self) -> bool:
        """True when the server answers its health check with 200 (model loaded)."""
        connection = self._connection_class(self.host, self.port, timeout=self.connect_timeout_s)
        try:
            connection.request("GET", HEALTH_PATH)
            response = connection.getresponse()
            response.read(4096)
            return response.status == 200
        except (OSError, http.client.HTTPException, NotLoopback):
            return False
        finally:
            connection.close()


def parse_rerank_response(payload: bytes, count: int) -> RerankOutcome:
    """Scores in document order from a llama-server rerank answer; a reply that
    does not score every document exactly once is malformed."""
    try:
        data = json.loads(payload)
        results = data["results"] if isinstance(data, dict) else data
        scores: list[float | None] = [None] * count
        for item in results:
            index = item["index"]
            score = float(item["relevance_score"])
            if not isinstance(index, int) or not 0 <= index < count or scores[index] is not None:
                return RerankOutcome(None, MALFORMED)
            if not math.isfinite(score):
                return RerankOutcome(None, MALFORMED)
            scores[index] = score
    except (ValueError, KeyError, TypeError):
        return RerankOutcome(None, MALFORMED)
    if any(s is None for s in scores):
        return RerankOutcome(None, MALFORMED)
    return RerankOutcome(tuple(float(s) for s in scores if s is not None))


def reranker_warmer(reranker: LlamaServerReranker, *, wait_s: float = 30.0) -> Callable[[], None]:
    """The PrewarmManager warmer for the reranker: waits for a live server and
    loads the model with one tiny request; raises when it is not there, so the
    manager cools down before trying again."""

    def warm() -> None:
        deadline = time.monotonic() + wait_s
        while not reranker.health():
            if time.monotonic() >= deadline:
                raise ConnectionError("reranker not reachable")
            time.sleep(0.5)
        outcome = reranker.rerank("warm up", ["warm up"], deadline_s=wait_s)
        if not outcome.ok and outcome.code != BUSY:
            raise ConnectionError(f"reranker warm-up failed: {outcome.code}")

    return warm


def build_reranker(config: Config) -> LlamaServerReranker | None:
    """The configured reranker client, or None when reranking is off."""
    if not config.reranker_url:
        return None
    return LlamaServerReranker(
        config.reranker_url, config.reranker_model, local_only=not config.allow_cloud_model_access
    )
