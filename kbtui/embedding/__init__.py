"""Embedding providers and the canonical vector identity.

Vectors are compared only within one identity: provider + resolved model +
immutable weight digest + transform/version + width. Two vectors with
different identities are never scored against each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from kbtui.errors import KbtuiError


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
    """The embedding provider cannot serve now (down, missing model, timeout)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class EmbeddingProvider(Protocol):
    """Anything that turns text into L2-normalised float32 vectors of one identity."""

    @property
    def identity(self) -> VectorIdentity: ...

    @property
    def context_window(self) -> int | None: ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


def l2_normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return (matrix / np.where(norms == 0, 1.0, norms)).astype(np.float32)


def make_provider(name: str, **options: object) -> EmbeddingProvider:
    """Build the provider named in the configuration."""
    if name == "hash":
        from kbtui.embedding.hashing import HashEmbedder

        return HashEmbedder()
    raise KbtuiError(f"unknown embedding provider {name!r} (expected: hash)")
