"""Embedding providers and the canonical vector identity.

Vectors are compared only within one identity: provider + resolved model +
immutable weight digest + transform/version + width. Two vectors with
different identities are never scored against each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kbtui.errors import KbtuiError

if TYPE_CHECKING:
    import numpy as np

# How a model's vectors are shaped (kbtui.embedding.policy); here so that the
# configuration can name them without loading numpy.
VECTOR_MODES = ("matryoshka512", "native")

PROVIDER_NAMES = ("local", "ollama", "hash")

# The digest recorded while a provider cannot say which weights it would run
# (server down, model not installed). Never a real digest, so vectors are
# never stored or reused under it.
UNRESOLVED_DIGEST = "unresolved"


@dataclass(frozen=True)
class VectorIdentity:
    provider: str
    model: str
    digest: str
    transform: str
    dim: int

    def canonical(self) -> str:
        return f"{self.provider}:{self.model}@{self.digest}:{self.transform}:{self.dim}"


class EmbeddingUnavailable(KbtuiError):
    """The embedding provider cannot serve now (down, missing model, timeout).

    ``code`` is a fixed, content-free reason; ``retryable`` says whether the
    same request may succeed later without the operator changing anything
    (a timeout or an unreachable server, not a missing model or a wrong width).
    """

    def __init__(self, code: str, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = retryable


class EmbeddingProvider(Protocol):
    """Anything that turns text into L2-normalised float32 vectors of one identity.

    ``embed_documents`` and ``embed_query`` apply the model's intent prefixes
    and vector transform themselves: callers pass the plain text.
    """

    @property
    def identity(self) -> VectorIdentity: ...

    @property
    def identity_confident(self) -> bool:
        """True when the identity names weights actually found (an installed
        model matched), not a configured-name fallback during an outage."""
        ...

    @property
    def context_window(self) -> int | None: ...

    def refresh_identity(self) -> VectorIdentity:
        """Resolve the identity again now (e.g. a model replaced under its tag)."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


def l2_normalise(matrix: np.ndarray) -> np.ndarray:
    import numpy as np

    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return (matrix / np.where(norms == 0, 1.0, norms)).astype(np.float32)


def make_provider(
    name: str,
    *,
    model: str = "",
    ollama_host: str = "http://127.0.0.1:11434",
    vector_mode: str = "matryoshka512",
    batch_size: int = 32,
    threads: int = 0,
    timeout_s: float = 60.0,
    query_timeout_s: float = 5.0,
    connect_timeout_s: float = 2.0,
    identity_ttl_s: float = 60.0,
    local_only: bool = True,
) -> EmbeddingProvider:
    """Build the provider named in the configuration.

    Building never touches the network or loads a model: a provider that
    cannot serve says so when it is first used, so search can degrade.
    ``local_only`` holds a server provider to loopback addresses at every connection.
    """
    if vector_mode not in VECTOR_MODES:
        raise KbtuiError(f"unknown embedding vector mode {vector_mode!r} (expected one of: {', '.join(VECTOR_MODES)})")
    if name == "hash":
        from kbtui.embedding.hashing import HashEmbedder

        return HashEmbedder()
    if name == "local":
        from kbtui.embedding.local import LocalEmbedder

        return LocalEmbedder(threads=threads, batch_size=batch_size)
    if name == "ollama":
        from kbtui.embedding.ollama import DEFAULT_OLLAMA_MODEL, OllamaEmbedder

        return OllamaEmbedder(
            host=ollama_host,
            model=model or DEFAULT_OLLAMA_MODEL,
            vector_mode=vector_mode,
            batch_size=batch_size,
            timeout_s=timeout_s,
            query_timeout_s=query_timeout_s,
            connect_timeout_s=connect_timeout_s,
            identity_ttl_s=identity_ttl_s,
            local_only=local_only,
        )
    raise KbtuiError(f"unknown embedding provider {name!r} (expected one of: {', '.join(PROVIDER_NAMES)})")
