"""Exact embedding reuse: a stored vector is reused only when its whole key matches.

The key is (contextual-content hash, parser version, chunker version,
canonical vector identity, dimension). Lookups go RAM cache → in-flight
embeddings of other threads → committed rows in the database → the provider.
A provider whose identity is not confidently resolved (or whose width is not
known) gets no reuse at all: reuse is exact or off.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from kbtui.embedding import EmbeddingProvider, EmbeddingUnavailable, VectorIdentity


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


@dataclass(frozen=True)
class EmbeddedChunks:
    """One vector per chunk (in chunk order) and the identity they were made under."""

    vectors: np.ndarray
    identity: VectorIdentity
    reused: int
    embedded: int


class ChunkEmbeddingReuse:
    """Embeds chunks, reusing exactly matching vectors; one instance per process.

    Two threads asking for the same key at once embed it once: the second
    waits for the first (in-flight coalescing).
    """

    def __init__(
        self,
        cache: VectorCache | None = None,
        lookup: CommittedLookup | None = None,
        *,
        wait_s: float = 600.0,
    ) -> None:
        self.cache = cache if cache is not None else VectorCache()
        self._lookup = lookup
        self._wait_s = wait_s
        self._lock = threading.Lock()
        self._in_flight: dict[ReuseKey, Future[np.ndarray]] = {}

    def embed_chunks(
        self,
        provider: EmbeddingProvider,
        chunks: Sequence[EmbeddableChunk],
        *,
        parser_version: int,
        chunker_version: int,
        batch_size: int = 32,
    ) -> EmbeddedChunks:
        identity = provider.identity
        if not provider.identity_confident or identity.dim <= 0:
            return _embed_without_reuse(provider, chunks, batch_size)
        keys = [
            ReuseKey(c.content_hash, parser_version, chunker_version, identity.canonical(), identity.dim)
            for c in chunks
        ]
        texts = {key: chunk.contextual_content for key, chunk in zip(keys, chunks)}
        found: dict[ReuseKey, np.ndarray] = {}
        for key in texts:
            cached = self.cache.get(key)
            if cached is not None:
                found[key] = cached
        owned, others = self._claim([k for k in texts if k not in found])
        embedded = 0
        try:
            if owned and self._lookup is not None:
                committed = self._lookup(
                    [k.content_hash for k in owned],
                    identity=identity.canonical(),
                    dim=identity.dim,
                    parser_version=parser_version,
                    chunker_version=chunker_version,
                )
                for key in owned:
                    vector = committed.get(key.content_hash)
                    if vector is not None and vector.shape == (identity.dim,):
                        found[key] = vector
            to_embed = [k for k in owned if k not in found]
            for start in range(0, len(to_embed), max(1, batch_size)):
                batch = to_embed[start : start + max(1, batch_size)]
                vectors = _checked(provider.embed_documents([texts[k] for k in batch]), len(batch), identity.dim)
                found.update(zip(batch, vectors))
            embedded = len(to_embed)
            if embedded and provider.refresh_identity() != identity:
                raise EmbeddingUnavailable(
                    "embedder_changed", "the embedding model changed while embedding", retryable=True
                )
            for key in owned:
                self.cache.put(key, found[key])
                self._settle(key, result=found[key])
        except BaseException as exc:
            for key in owned:
                self._settle(key, error=exc)
            raise
        for key, future in others.items():
            found[key] = _wait(future, self._wait_s)
        vectors = np.stack([found[k] for k in keys]) if keys else np.zeros((0, identity.dim), np.float32)
        return EmbeddedChunks(vectors.astype(np.float32), identity, len(keys) - embedded, embedded)

    def _claim(self, keys: list[ReuseKey]) -> tuple[list[ReuseKey], dict[ReuseKey, Future[np.ndarray]]]:
        owned: list[ReuseKey] = []
        others: dict[ReuseKey, Future[np.ndarray]] = {}
        with self._lock:
            for key in keys:
                future = self._in_flight.get(key)
                if future is None:
                    self._in_flight[key] = Future()
                    owned.append(key)
                else:
                    others[key] = future
        return owned, others

    def _settle(self, key: ReuseKey, *, result: np.ndarray | None = None, error: BaseException | None = None) -> None:
        with self._lock:
            future = self._in_flight.pop(key, None)
        if future is None or future.done():
            return
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(_for_waiter(error))


def _embed_without_reuse(provider: EmbeddingProvider, chunks: Sequence[EmbeddableChunk], batch_size: int) -> EmbeddedChunks:
    texts = [c.contextual_content for c in chunks]
    parts = [provider.embed_documents(texts[i : i + max(1, batch_size)]) for i in range(0, len(texts), max(1, batch_size))]
    # Read after embedding: the provider may only have resolved itself now.
    identity = provider.identity
    if not provider.identity_confident or identity.dim <= 0:
        raise EmbeddingUnavailable("embedder_unavailable", "the embedding model could not be identified", retryable=True)
    vectors = _checked(np.concatenate(parts) if parts else np.zeros((0, identity.dim), np.float32), len(texts), identity.dim)
    return EmbeddedChunks(vectors, identity, 0, len(texts))


def _checked(vectors: np.ndarray, count: int, dim: int) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[0] != count or vectors.shape[1] != dim:
        raise EmbeddingUnavailable("vector_dim_mismatch", "the embedder returned vectors of an unexpected width")
    if not np.all(np.isfinite(vectors)):
        raise EmbeddingUnavailable("vector_not_finite", "the embedder returned non-finite vector values")
    return vectors


def _wait(future: Future[np.ndarray], wait_s: float) -> np.ndarray:
    try:
        return future.result(timeout=wait_s)
    except FutureTimeout:
        raise EmbeddingUnavailable("embedder_timeout", "a shared embedding did not finish in time", retryable=True) from None


def _for_waiter(error: BaseException) -> EmbeddingUnavailable:
    if isinstance(error, EmbeddingUnavailable):
        return EmbeddingUnavailable(error.code, error.message, retryable=error.retryable)
    return EmbeddingUnavailable("embedder_error", f"embedding failed ({type(error).__name__})", retryable=True)
