"""Vector policy: which intent prefixes and which transform a model's vectors get.

Ingestion and query share this policy, so a query vector always has the same
transform, width and prefix convention as the chunk vectors it is compared with.
The transform's name and version are part of the canonical vector identity.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kbtui.embedding import VECTOR_MODES, l2_normalise
from kbtui.errors import KbtuiError

NATIVE_TRANSFORM = "native"
# Bump the suffix whenever the recipe below changes: old vectors then stop
# matching the identity and are re-embedded instead of mis-compared.
MATRYOSHKA_TRANSFORM = "matryoshka512-v1"
MATRYOSHKA_DIM = 512
MATRYOSHKA_LAYER_NORM_EPS = 1e-5

NOMIC_DOCUMENT_PREFIX = "search_document: "
NOMIC_QUERY_PREFIX = "search_query: "


@dataclass(frozen=True)
class VectorPolicy:
    """What a model's text and vectors go through before they are stored or compared."""

    transform: str = NATIVE_TRANSFORM
    document_prefix: str = ""
    query_prefix: str = ""

    def output_dim(self, native_dim: int) -> int:
        if self.transform == MATRYOSHKA_TRANSFORM:
            return min(MATRYOSHKA_DIM, native_dim)
        return native_dim

    def apply(self, vectors: np.ndarray) -> np.ndarray:
        """Transform a batch ``(n, native_dim)`` of raw model outputs into stored vectors."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if self.transform == MATRYOSHKA_TRANSFORM:
            return matryoshka_512(vectors)
        return l2_normalise(vectors)


def matryoshka_512(vectors: np.ndarray) -> np.ndarray:
    """Nomic's Matryoshka recipe: layer norm over the full vector (population
    variance, eps 1e-5, no affine), keep the first 512 components, L2 normalise."""
    full = np.asarray(vectors, dtype=np.float64)
    mean = full.mean(axis=-1, keepdims=True)
    variance = full.var(axis=-1, keepdims=True)
    normed = (full - mean) / np.sqrt(variance + MATRYOSHKA_LAYER_NORM_EPS)
    return l2_normalise(normed[..., :MATRYOSHKA_DIM])


def is_nomic_embed_text(model: str) -> bool:
    return "nomic-embed-text" in model.lower()


def is_nomic_v1_5(model: str) -> bool:
    """True only when the resolved name says v1.5 (a tag or repository name).

    A bare ``nomic-embed-text:latest`` is not assumed to be v1.5: the
    transform is applied only where the model is known to be trained for it.
    """
    name = model.lower()
    return "nomic-embed-text-v1.5" in name or name.startswith("nomic-embed-text:v1.5")


def policy_for(model: str, vector_mode: str) -> VectorPolicy:
    """The policy for a resolved model name under the configured vector mode."""
    if vector_mode not in VECTOR_MODES:
        raise KbtuiError(f"unknown embedding vector mode {vector_mode!r} (expected one of: {', '.join(VECTOR_MODES)})")
    if not is_nomic_embed_text(model):
        return VectorPolicy()
    transform = MATRYOSHKA_TRANSFORM if vector_mode == "matryoshka512" and is_nomic_v1_5(model) else NATIVE_TRANSFORM
    return VectorPolicy(transform, NOMIC_DOCUMENT_PREFIX, NOMIC_QUERY_PREFIX)
