"""Exact embedding reuse: hits exactly when the whole key matches, misses otherwise."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from kbtui.chunking import CHUNKER_VERSION
from kbtui.embedding import VectorIdentity
from kbtui.embedding.hashing import HashEmbedder
from kbtui.embedding.reuse import CacheBounds, ChunkEmbeddingReuse, ReuseKey, VectorCache
from kbtui.extract import PARSER_VERSION
from store import catalog
from store.models import Chunk as ChunkRow
from store.models import Document, StatusHistory
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


def keys_for(reuse, provider, chunks=CHUNKS, parser_version=1, chunker_version=1):
    return reuse.keys(provider, chunks, parser_version=parser_version, chunker_version=chunker_version)


def test_equal_content_gets_equal_keys_and_a_remembered_vector_is_found():
    provider, reuse = CountingProvider(), ChunkEmbeddingReuse()
    keys = keys_for(reuse, provider)
    assert keys[0] == keys[2] != keys[1]
    assert reuse.lookup(keys) == {}
    vector = provider.embed_documents(["alpha bravo"])[0]
    reuse.remember(keys[0], vector)
    found = reuse.lookup(keys)
    assert set(found) == {0, 2} and np.array_equal(found[0], vector)


@pytest.mark.parametrize("change", ["parser_version", "chunker_version", "identity", "dimension", "content"])
def test_any_change_in_the_key_is_a_miss(change):
    provider, reuse = CountingProvider(), ChunkEmbeddingReuse()
    vectors = provider.embed_documents([c.contextual_content for c in CHUNKS])
    for key, vector in zip(keys_for(reuse, provider), vectors, strict=True):
        reuse.remember(key, vector)
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
        kwargs["chunks"] = [Chunk("alpha bravo!"), Chunk("charlie delta!")]
    assert reuse.lookup(keys_for(reuse, other, **kwargs)) == {}


def test_a_provider_without_a_confident_identity_gets_no_keys():
    provider = CountingProvider()
    provider.confident = False
    assert keys_for(ChunkEmbeddingReuse(), provider) is None


def test_committed_rows_are_found_only_under_their_exact_key(node, tmp_path):
    doc = add(node, tmp_path, "a.md", DOC)
    assert node.ingest(doc) == "Indexed"
    hashes = [c.content_hash for c in ChunkRow.select().where(ChunkRow.document == doc)]
    identity = node.embedder.identity
    exact = {"identity": identity.canonical(), "dim": identity.dim,
             "parser_version": PARSER_VERSION, "chunker_version": CHUNKER_VERSION}
    assert set(committed_vectors(hashes, **exact)) == set(hashes)
    for change in ({"parser_version": PARSER_VERSION + 1}, {"chunker_version": CHUNKER_VERSION + 1},
                   {"identity": "hash:other@v1:native:256"}, {"dim": 128}):
        assert committed_vectors(hashes, **{**exact, **change}) == {}


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
    node.embedder = provider
    first = add(node, tmp_path, "a.md", DOC)
    assert node.ingest(first) == "Indexed"
    embedded_once = len(provider.texts)
    assert embedded_once == Document.get_by_id(first).chunk_count > 1

    # As after a restart: an empty RAM cache, only the committed rows to go on.
    node.reuse.cache = VectorCache()
    catalog.mark_pending([first])
    assert node.ingest(first) == "Indexed"
    copy = add(node, tmp_path, "copy.md", DOC, collection="OTHER")
    assert node.ingest(copy) == "Indexed"
    assert len(provider.texts) == embedded_once

    # One section changed: only its chunks are embedded again.
    changed = add(node, tmp_path, "b.md", DOC.replace("word3x7 ", "changed "))
    assert node.ingest(changed) == "Indexed"
    new_texts = provider.texts[embedded_once:]
    assert new_texts and all("Section 3" in t for t in new_texts)


def test_equal_chunks_in_flight_together_are_embedded_once(node, tmp_path):
    provider = CountingProvider()
    node.embedder = provider
    ids = [add(node, tmp_path, f"copy{i}.md", DOC, collection=f"C{i}") for i in range(3)]
    assert set(node.index(ids).values()) == {"Indexed"}
    assert len(provider.texts) == len(set(provider.texts)) == Document.get_by_id(ids[0]).chunk_count


def test_no_reuse_without_a_confident_identity(node, tmp_path):
    provider = CountingProvider()
    node.embedder = provider
    first = add(node, tmp_path, "a.md", DOC)
    assert node.ingest(first) == "Indexed"
    provider.confident = False

    class Resolves(CountingProvider):
        """Unidentified until it has been used, like a server found by the first call."""

        def embed_documents(self, texts):
            self.confident = True
            return super().embed_documents(texts)

    late = Resolves()
    late.confident = False
    node.embedder = late
    copy = add(node, tmp_path, "copy.md", DOC, collection="OTHER")
    assert node.ingest(copy) == "Indexed"
    assert len(late.texts) == Document.get_by_id(copy).chunk_count


def test_a_model_replaced_while_embedding_is_retried_under_the_new_identity(node, tmp_path):
    import dataclasses

    class Replaced(CountingProvider):
        def __init__(self) -> None:
            super().__init__()
            self.replaced = False

        def refresh_identity(self):
            if not self.replaced:
                self.replaced = True  # the tag now points at other weights
                self.inner._identity = VectorIdentity("hash", "feature-hash", "replaced", "native", 256)
            return self.inner.identity

    node.config = dataclasses.replace(node.config, embedding_retry_initial_s=0.1)
    provider = Replaced()
    node.embedder = provider
    doc = add(node, tmp_path, "a.md", DOC)
    assert node.ingest(doc) == "Indexed"
    assert Document.get_by_id(doc).vector_identity == "hash:feature-hash@replaced:native:256"
    assert any(h.reason == "embedder_changed" for h in StatusHistory.select().where(StatusHistory.document == doc))
