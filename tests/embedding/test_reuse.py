"""Exact embedding reuse: hits exactly when the whole key matches, misses otherwise."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from kbtui.embedding import EmbeddingUnavailable, VectorIdentity
from kbtui.embedding.hashing import HashEmbedder
from kbtui.embedding.reuse import CacheBounds, ChunkEmbeddingReuse, ReuseKey, VectorCache
from kbtui.ingest import ingest_document
from store import catalog
from store.models import Chunk as ChunkRow
from store.models import Document
from store.vectors import committed_vectors


class CountingProvider:
    """A real provider that counts every text it is asked to embed."""

    def __init__(self, inner=None) -> None:
        self.inner = inner or HashEmbedder()
        self.texts: list[str] = []
        self.confident = True
        self.gate: threading.Event | None = None

    @property
    def identity(self) -> VectorIdentity:
        return self.inner.identity

    @property
    def identity_confident(self) -> bool:
        return self.confident

    @property
    def context_window(self):
        return self.inner.context_window

    def refresh_identity(self) -> VectorIdentity:
        return self.inner.refresh_identity()

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if self.gate is not None:
            self.gate.wait(5)
        self.texts.extend(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)


@dataclass(frozen=True)
class Chunk:
    contextual_content: str

    @property
    def content_hash(self) -> str:
        import hashlib

        return hashlib.sha256(self.contextual_content.encode()).hexdigest()


CHUNKS = [Chunk("alpha bravo"), Chunk("charlie delta"), Chunk("alpha bravo")]


def embed(reuse, provider, chunks=CHUNKS, parser_version=1, chunker_version=1):
    return reuse.embed_chunks(provider, chunks, parser_version=parser_version, chunker_version=chunker_version)


def test_the_same_key_is_embedded_once_and_reused():
    provider, reuse = CountingProvider(), ChunkEmbeddingReuse()
    first = embed(reuse, provider)
    assert provider.texts == ["alpha bravo", "charlie delta"]  # the duplicate inside one document too
    second = embed(reuse, provider)
    assert len(provider.texts) == 2 and second.embedded == 0 and second.reused == 3
    assert np.array_equal(first.vectors, second.vectors)
    assert np.allclose(first.vectors[0], HashEmbedder().embed_documents(["alpha bravo"])[0])


@pytest.mark.parametrize(
    "change",
    ["parser_version", "chunker_version", "identity", "dimension", "content"],
)
def test_any_change_in_the_key_is_a_miss(change):
    provider, reuse = CountingProvider(), ChunkEmbeddingReuse()
    embed(reuse, provider)
    before = len(provider.texts)
    kwargs = {"parser_version": 1, "chunker_version": 1, "chunks": CHUNKS}
    other = provider
    if change == "parser_version":
        kwargs["parser_version"] = 2
    elif change == "chunker_version":
        kwargs["chunker_version"] = 2
    elif change == "identity":
        other = CountingProvider()
        other.inner._identity = VectorIdentity("hash", "feature-hash", "v2", "native", 256)
    elif change == "dimension":
        other = CountingProvider(HashEmbedder(dim=128))
    else:
        kwargs["chunks"] = [Chunk("alpha bravo!"), Chunk("charlie delta")]
    result = embed(reuse, other, **kwargs)
    embedded_now = len(other.texts) - (before if other is provider else 0)
    assert result.embedded == embedded_now and embedded_now >= 1
    assert result.vectors.shape[1] == other.identity.dim


def test_a_provider_without_a_confident_identity_gets_no_reuse():
    class ResolvesWhenUsed(CountingProvider):
        def embed_documents(self, texts):
            self.confident = True  # like a server found only by this call
            return super().embed_documents(texts)

    provider, reuse = ResolvesWhenUsed(), ChunkEmbeddingReuse()
    provider.confident = False
    result = embed(reuse, provider)
    assert result.embedded == 3 and result.reused == 0 and len(reuse.cache) == 0
    assert result.identity == provider.identity

    never = CountingProvider()
    never.confident = False
    with pytest.raises(EmbeddingUnavailable) as failure:
        embed(reuse, never)  # still unidentified: its vectors are stored under no identity
    assert failure.value.code == "embedder_unavailable" and len(reuse.cache) == 0


def test_two_threads_asking_for_the_same_vectors_embed_them_once():
    provider, reuse = CountingProvider(), ChunkEmbeddingReuse()
    provider.gate = threading.Event()
    results = []
    threads = [threading.Thread(target=lambda: results.append(embed(reuse, provider))) for _ in range(2)]
    for thread in threads:
        thread.start()
    provider.gate.set()
    for thread in threads:
        thread.join()
    assert sorted(provider.texts) == ["alpha bravo", "charlie delta"]
    assert np.array_equal(results[0].vectors, results[1].vectors)


def test_a_failed_embedding_reaches_the_waiting_thread_and_is_not_cached():
    class Failing(CountingProvider):
        def embed_documents(self, texts):
            self.gate.wait(5)
            raise EmbeddingUnavailable("embedder_timeout", "the server did not answer in time", retryable=True)

    provider, reuse = Failing(), ChunkEmbeddingReuse()
    provider.gate = threading.Event()
    errors = []

    def run():
        try:
            embed(reuse, provider)
        except EmbeddingUnavailable as exc:
            errors.append(exc.code)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    provider.gate.set()
    for thread in threads:
        thread.join()
    assert errors == ["embedder_timeout", "embedder_timeout"] and len(reuse.cache) == 0


def test_a_model_replaced_while_embedding_fails_retryably():
    class Replaced(CountingProvider):
        def refresh_identity(self):
            return VectorIdentity("hash", "feature-hash", "replaced", "native", 256)

    with pytest.raises(EmbeddingUnavailable) as failure:
        embed(ChunkEmbeddingReuse(), Replaced())
    assert failure.value.code == "embedder_changed" and failure.value.retryable


def key(n: int) -> ReuseKey:
    return ReuseKey(f"hash{n}", 1, 1, "hash:feature-hash@v1:native:4", 4)


def test_the_ram_cache_is_bounded_by_age_entries_and_bytes():
    now = [0.0]
    cache = VectorCache(CacheBounds(ttl_s=10, max_entries=3, max_bytes=1000), clock=lambda: now[0])
    vector = np.ones(4, np.float32)  # 16 bytes
    for n in range(4):
        cache.put(key(n), vector)
    assert cache.get(key(0)) is None and len(cache) == 3  # the least recently used went first
    cache.get(key(1))
    cache.put(key(4), vector)
    assert cache.get(key(1)) is not None and cache.get(key(2)) is None
    now[0] = 10.0
    assert cache.get(key(1)) is None  # expired
    small = VectorCache(CacheBounds(max_entries=100, max_bytes=40))
    for n in range(5):
        small.put(key(n), vector)
    assert len(small) == 2 and small.nbytes == 32
    small.put(key(9), np.ones(100, np.float32))  # larger than the whole budget: never stored
    assert small.get(key(9)) is None


def add(node, tmp_path: Path, name: str, text: str, collection="DEFAULT") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return catalog.add_document(node.store, collection, path, display_name=name, fmt="markdown").document_id


DOC = "\n\n".join(
    f"# Section {i}\n\n" + " ".join(f"word{i}x{j}" for j in range(120)) for i in range(6)
)


def test_reindexing_or_re_adding_unchanged_content_embeds_nothing(node, tmp_path):
    provider = CountingProvider()
    first = add(node, tmp_path, "a.md", DOC)
    assert ingest_document(node.store, node.config, provider, first, reuse=ChunkEmbeddingReuse()) == "Indexed"
    embedded_once = len(provider.texts)
    chunk_count = Document.get_by_id(first).chunk_count
    assert embedded_once == chunk_count > 1

    # A new process: an empty RAM cache, only the committed rows to go on.
    fresh = ChunkEmbeddingReuse(VectorCache(), committed_vectors)
    assert ingest_document(node.store, node.config, provider, first, reuse=fresh) == "Indexed"
    copy = add(node, tmp_path, "copy.md", DOC, collection="OTHER")
    assert ingest_document(node.store, node.config, provider, copy, reuse=fresh) == "Indexed"
    assert len(provider.texts) == embedded_once

    # One section changed: only its chunks are embedded again.
    changed_doc = DOC.replace("word3x7 ", "changed ")
    changed = add(node, tmp_path, "b.md", changed_doc)
    ingest_document(node.store, node.config, provider, changed, reuse=ChunkEmbeddingReuse(VectorCache(), committed_vectors))
    new_texts = provider.texts[embedded_once:]
    assert new_texts and all("Section 3" in t for t in new_texts)


def test_a_parser_or_chunker_version_bump_is_a_durable_miss(node, tmp_path):
    provider = CountingProvider()
    doc = add(node, tmp_path, "a.md", DOC)
    ingest_document(node.store, node.config, provider, doc, reuse=ChunkEmbeddingReuse())
    hashes = [c.content_hash for c in ChunkRow.select().where(ChunkRow.document == doc)]
    identity = provider.identity
    same = committed_vectors(hashes, identity=identity.canonical(), dim=identity.dim, parser_version=1, chunker_version=1)
    assert set(same) == set(hashes)
    for versions in ({"parser_version": 2, "chunker_version": 1}, {"parser_version": 1, "chunker_version": 2}):
        assert committed_vectors(hashes, identity=identity.canonical(), dim=identity.dim, **versions) == {}
    assert committed_vectors(hashes, identity="hash:other@v1:native:256", dim=256, parser_version=1, chunker_version=1) == {}
    assert committed_vectors(hashes, identity=identity.canonical(), dim=128, parser_version=1, chunker_version=1) == {}
