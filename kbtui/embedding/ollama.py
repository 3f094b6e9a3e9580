"""Embeddings from an Ollama server the operator runs (``ollama`` client).

The configured name is resolved through the server's model list; the
installed model's immutable digest goes into the vector identity, so a model
replaced under the same tag changes identity. The identity is re-resolved
after ``identity_ttl_s`` (and on :meth:`refresh_identity`); while the server is
unreachable or the model is not installed the identity is the configured name
with an unresolved digest and ``identity_confident`` is False.

Unless the operator allowed remote models, every connection is made only to
the loopback addresses the host resolves to at that moment
(:func:`ollama_client`): chunk text never leaves the machine, even when DNS
changes under a running node.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import httpcore
import httpx
import numpy as np
import ollama

from kbtui.embedding import UNRESOLVED_DIGEST, EmbeddingUnavailable, VectorIdentity
from kbtui.embedding.policy import VectorPolicy, policy_for
from kbtui.loopback import NotLoopback, loopback_addresses

DEFAULT_OLLAMA_MODEL = "nomic-embed-text:v1.5"
DIGEST_HEX_CHARS = 16
# After a failed resolution, wait this long before asking the server again,
# so a search against a dead server does not pay a connect attempt each time.
UNRESOLVED_RETRY_S = 5.0


class LoopbackOnlyBackend(httpcore.SyncBackend):
    """httpcore's network backend, connecting only to the loopback addresses a host resolves to now."""

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options=None,
    ) -> httpcore.NetworkStream:
        try:
            addresses = loopback_addresses(host, port)
        except OSError as exc:  # the name did not resolve: an ordinary connect failure
            raise httpcore.ConnectError(type(exc).__name__) from None
        last: httpcore.ConnectError | None = None
        for _, sockaddr in addresses:
            try:
                return super().connect_tcp(str(sockaddr[0]), port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:
                last = exc
        assert last is not None
        raise last


def ollama_client(host: str, *, timeout: httpx.Timeout | float, local_only: bool) -> ollama.Client:
    """An Ollama client that never uses a proxy from the environment and, when
    ``local_only``, connects only to loopback addresses (else :class:`NotLoopback`)."""
    if not local_only:
        return ollama.Client(host=host, timeout=timeout, trust_env=False)
    transport = httpx.HTTPTransport(trust_env=False)
    # httpx has no public hook for name resolution; the pool under it takes a network backend.
    transport._pool = httpcore.ConnectionPool(network_backend=LoopbackOnlyBackend())
    return ollama.Client(host=host, timeout=timeout, trust_env=False, transport=transport)


@dataclass(frozen=True)
class ResolvedModel:
    name: str
    digest: str
    native_dim: int
    context_window: int | None


class OllamaEmbedder:
    def __init__(
        self,
        *,
        host: str,
        model: str = DEFAULT_OLLAMA_MODEL,
        vector_mode: str = "matryoshka512",
        batch_size: int = 32,
        timeout_s: float = 60.0,
        query_timeout_s: float = 5.0,
        connect_timeout_s: float = 2.0,
        identity_ttl_s: float = 60.0,
        local_only: bool = True,
    ) -> None:
        self._configured = model
        self._vector_mode = vector_mode
        policy_for(model, vector_mode)  # reject an unknown mode at start-up
        self._batch_size = max(1, batch_size)
        self._identity_ttl_s = identity_ttl_s
        self._client = ollama_client(
            host, timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s), local_only=local_only
        )
        self._query_client = ollama_client(
            host, timeout=httpx.Timeout(query_timeout_s, connect=connect_timeout_s), local_only=local_only
        )
        self._lock = threading.Lock()
        self._resolved: ResolvedModel | None = None
        self._policy = VectorPolicy()
        self._identity = self._fallback_identity()
        self._resolved_at: float | None = None

    # -- identity

    @property
    def identity(self) -> VectorIdentity:
        with self._lock:
            if not self._resolution_due():
                return self._identity
        return self.refresh_identity()

    @property
    def identity_confident(self) -> bool:
        self.identity  # noqa: B018 - resolves if due
        return self._resolved is not None

    @property
    def context_window(self) -> int | None:
        self.identity  # noqa: B018 - resolves if due
        return self._resolved.context_window if self._resolved else None

    def refresh_identity(self) -> VectorIdentity:
        try:
            resolved = self._resolve()
        except EmbeddingUnavailable:
            resolved = None
        return self._adopt(resolved)

    def _adopt(self, resolved: ResolvedModel | None) -> VectorIdentity:
        with self._lock:
            self._resolved = resolved
            self._resolved_at = time.monotonic()
            if resolved is None:
                self._policy = policy_for(self._configured, self._vector_mode)
                self._identity = self._fallback_identity()
            else:
                self._policy = policy_for(resolved.name, self._vector_mode)
                self._identity = VectorIdentity(
                    "ollama",
                    resolved.name,
                    resolved.digest,
                    self._policy.transform,
                    self._policy.output_dim(resolved.native_dim),
                )
            return self._identity

    def _resolution_due(self) -> bool:
        if self._resolved_at is None:
            return True
        ttl = self._identity_ttl_s if self._resolved is not None else UNRESOLVED_RETRY_S
        return time.monotonic() - self._resolved_at >= ttl

    def _fallback_identity(self) -> VectorIdentity:
        return VectorIdentity("ollama", self._configured, UNRESOLVED_DIGEST, "unresolved", 0)

    def _resolve(self) -> ResolvedModel:
        listing = self._call(self._query_client.list)
        wanted = {self._configured, f"{self._configured}:latest"} if ":" not in self._configured else {self._configured}
        match = next((m for m in listing.models if m.model in wanted and m.digest), None)
        if match is None:
            raise EmbeddingUnavailable(
                "embedding_model_missing",
                "the configured Ollama embedding model is not installed on the server",
            )
        info = self._call(self._query_client.show, match.model).modelinfo or {}
        native_dim = _model_info_int(info, ".embedding_length")
        if native_dim is None:
            # The model info does not say; one probe tells the width for sure.
            probe = self._call(self._query_client.embed, model=match.model, input=["dimension probe"])
            native_dim = len(probe.embeddings[0]) if probe.embeddings else 0
        if native_dim <= 0:
            raise EmbeddingUnavailable("embedder_error", "the Ollama model reports no embedding width")
        digest = match.digest.split(":")[-1][:DIGEST_HEX_CHARS]
        return ResolvedModel(match.model, digest, native_dim, _model_info_int(info, ".context_length"))

    # -- embedding

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.identity  # noqa: B018 - resolves if due
        resolved, policy = self._require_resolved()
        if not texts:
            return np.zeros((0, policy.output_dim(resolved.native_dim)), np.float32)
        parts = []
        for start in range(0, len(texts), self._batch_size):
            batch = [policy.document_prefix + t for t in texts[start : start + self._batch_size]]
            parts.append(self._embed(self._client, resolved, policy, batch))
        return np.concatenate(parts)

    def embed_query(self, text: str) -> np.ndarray:
        self.identity  # noqa: B018 - resolves if due
        resolved, policy = self._require_resolved()
        return self._embed(self._query_client, resolved, policy, [policy.query_prefix + text])[0]

    def _require_resolved(self) -> tuple[ResolvedModel, VectorPolicy]:
        with self._lock:
            resolved, policy = self._resolved, self._policy
        if resolved is None:
            # Ask the server now: either it is back, or we learn the precise reason.
            self._adopt(self._resolve())
            with self._lock:
                resolved, policy = self._resolved, self._policy
            assert resolved is not None
        return resolved, policy

    def _embed(self, client: ollama.Client, resolved: ResolvedModel, policy: VectorPolicy, batch: list[str]) -> np.ndarray:
        response = self._call(client.embed, model=resolved.name, input=batch, truncate=True)
        try:
            raw = np.asarray(response.embeddings, dtype=np.float32)
        except (TypeError, ValueError):
            raise EmbeddingUnavailable("vector_dim_mismatch", "Ollama returned vectors of mixed widths") from None
        if raw.ndim != 2 or raw.shape[0] != len(batch):
            raise EmbeddingUnavailable("embedder_error", "Ollama returned the wrong number of vectors", retryable=True)
        if raw.shape[1] != resolved.native_dim:
            raise EmbeddingUnavailable(
                "vector_dim_mismatch",
                f"Ollama returned {raw.shape[1]}-wide vectors; the model reports {resolved.native_dim}",
            )
        if not np.all(np.isfinite(raw)):
            raise EmbeddingUnavailable("vector_not_finite", "Ollama returned non-finite vector values")
        return policy.apply(raw)

    @staticmethod
    def _call(method, *args, **kwargs):
        """Call the client, turning its failures into content-free reason codes."""
        try:
            return method(*args, **kwargs)
        except ollama.ResponseError as exc:
            if exc.status_code == 404:
                raise EmbeddingUnavailable(
                    "embedding_model_missing", "the Ollama embedding model is not installed on the server"
                ) from None
            raise EmbeddingUnavailable(
                "embedder_error", f"Ollama answered with HTTP status {exc.status_code}", retryable=True
            ) from None
        except NotLoopback:
            raise EmbeddingUnavailable(
                "embedder_not_local", "the Ollama host resolved to an address off this machine", retryable=True
            ) from None
        except httpx.TimeoutException:
            raise EmbeddingUnavailable("embedder_timeout", "the Ollama server did not answer in time", retryable=True) from None
        except (ConnectionError, httpx.TransportError):
            raise EmbeddingUnavailable("embedder_unavailable", "the Ollama server is not reachable", retryable=True) from None
        except (ValueError, TypeError, AttributeError, httpx.HTTPError) as exc:  # malformed answers
            raise EmbeddingUnavailable(
                "embedder_error", f"Ollama gave an unusable answer ({type(exc).__name__})", retryable=True
            ) from None


def _model_info_int(info, suffix: str) -> int | None:
    """``<architecture>.embedding_length`` and friends, whatever the architecture."""
    for key, value in dict(info).items():
        if key.endswith(suffix) and isinstance(value, int) and not isinstance(value, bool):
            return value
    return None
