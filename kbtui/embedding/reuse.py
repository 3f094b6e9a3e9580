"""Exact embedding reuse: a stored vector is reused only when its whole key matches.

The key is (contextual-content hash, parser version, chunker version,
canonical vector identity, dimension). Lookups go RAM cache → committed rows
in the database; what is still missing goes to the provider (the Embedder
actor, which also coalesces equal keys that are in flight at once). A
provider whose identity is not confidently resolved (or whose width is not
known) gets no reuse at all: reuse is exact or off.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from kbtui.embedding import EmbeddingProvider, EmbeddingUnavailable


@dataclass(frozen=True)
class ReuseKey:
    content_hash: str
    parser_version: int
    chunker_version: int
    identity: str
    dim: int


@dataclass(frozen=True)
class CacheBounds:
    ttl_s: float = 900.0
    max_entries: int = 20_000
    max_bytes: int = 64 * 1024 * 1024


class VectorCache:
    """A thread-safe LRU of vectors bounded by age, entry count and bytes."""

    def __init__(self, bounds: CacheBounds | None = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.bounds = bounds or CacheBounds()
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[ReuseKey, tuple[np.ndarray, float]] = OrderedDict()
        self._bytes = 0

    def get(self, key: ReuseKey) -> np.ndarray | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            vector, expires = entry
            if self._clock() >= expires:
                self._drop(key)
                return None
            self._entries.move_to_end(key)
            return vector

    def put(self, key: ReuseKey, vector: np.ndarray) -> None:
        stored = np.array(vector, dtype=np.float32)
        stored.setflags(write=False)
        if stored.nbytes > self.bounds.max_bytes or self.bounds.max_entries <= 0:
            return
        with self._lock:
            if key in self._entries:
                self._drop(key)
            self._entries[key] = (stored, self._clock() + self.bounds.ttl_s)
            self._bytes += stored.nbytes
            while len(self._entries) > self.bounds.max_entries or self._bytes > self.bounds.max_bytes:
                self._drop(next(iter(self._entries)))

    def _drop(self, key: ReuseKey) -> None:
        vector, _ = self._entries.pop(key)
        self._bytes -= vector.nbytes

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        return self._bytes


class EmbeddableChunk(Protocol):
    """What reuse needs of a chunk (a :class:`kbtui.chunking.ChunkSpec` fits)."""

    @property
    def contextual_content(self) -> str: ...

    @property
    def content_hash(self) -> str: ...


class CommittedLookup(Protocol):
    """Committed vectors by content hash under one exact key (``store.vectors.committed_vectors``)."""

    def __call__(
        self, content_hashes: Sequence[str], *, identity: str, dim: int, parser_version: int, chunker_version: int
    ) -> dict[str, np.ndarray]: ...


class ChunkEmbeddingReuse:
    """The reuse keys of chunks, and the vectors already known for them."""

    def __init__(self, cache: VectorCache | None = None, lookup: CommittedLookup | None = None) -> None:
        self.cache = cache if cache is not None else VectorCache()
        self._lookup = lookup

    def keys(
        self,
        provider: EmbeddingProvider,
        chunks: Sequence[EmbeddableChunk],
        *,
        parser_version: int,
        chunker_version: int,
    ) -> list[ReuseKey] | None:
        """One exact key per chunk, or None when the provider's identity or
        width is not confidently known (then nothing may be reused)."""
        identity = provider.identity
        if not provider.identity_confident or identity.dim <= 0:
            return None
        canonical = identity.canonical()
        return [ReuseKey(c.content_hash, parser_version, chunker_version, canonical, identity.dim) for c in chunks]

    def lookup(self, keys: Sequence[ReuseKey]) -> dict[int, np.ndarray]:
        """Known vectors by position in ``keys``: the RAM cache first, then committed rows."""
        found: dict[int, np.ndarray] = {}
        for position, key in enumerate(keys):
            cached = self.cache.get(key)
            if cached is not None:
                found[position] = cached
        missing = [position for position in range(len(keys)) if position not in found]
        if missing and self._lookup is not None:
            first = keys[missing[0]]
            committed = self._lookup(
                [keys[p].content_hash for p in missing],
                identity=first.identity,
                dim=first.dim,
                parser_version=first.parser_version,
                chunker_version=first.chunker_version,
            )
            for position in missing:
                vector = committed.get(keys[position].content_hash)
                if vector is not None and vector.shape == (keys[position].dim,):
                    found[position] = vector
                    self.cache.put(keys[position], vector)
        return found

    def remember(self, key: ReuseKey, vector: np.ndarray) -> None:
        self.cache.put(key, vector)


def checked_vectors(vectors: np.ndarray, count: int, dim: int) -> np.ndarray:
    """The provider's answer as float32, or an error: vectors of another width
    or with non-finite values must never be stored or compared."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[0] != count or vectors.shape[1] != dim:
        raise EmbeddingUnavailable("vector_dim_mismatch", "the embedder returned vectors of an unexpected width")
    if not np.all(np.isfinite(vectors)):
        raise EmbeddingUnavailable("vector_not_finite", "the embedder returned non-finite vector values")
    return vectors
