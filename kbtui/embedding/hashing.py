"""A deterministic feature-hashing embedder: fast, dependency-free, lexical.

For tests and as an explicitly requested fallback; it has no semantics beyond
shared words and word pairs.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Sequence

import numpy as np

from kbtui.embedding import VectorIdentity, l2_normalise

_WORD = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    def __init__(self, dim: int = 256) -> None:
        self._identity = VectorIdentity("hash", "feature-hash", "v1", "native", dim)
        self.dim = dim

    @property
    def identity(self) -> VectorIdentity:
        return self._identity

    @property
    def identity_confident(self) -> bool:
        return True

    @property
    def context_window(self) -> int | None:
        return None

    def refresh_identity(self) -> VectorIdentity:
        return self._identity

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return l2_normalise(np.stack([self._features(t) for t in texts])) if texts else np.zeros((0, self.dim), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]

    def _features(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float32)
        words = [w.lower() for w in _WORD.findall(text)]
        for feature in words + [f"{a} {b}" for a, b in itertools.pairwise(words)]:
            digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % self.dim
            vec[bucket] += 1.0 if digest[4] & 1 else -1.0
        return vec
