"""The synthetic knowledge base that ``benchmarks/search.py`` searches.

Zipfian text (the most frequent words are real English function words, so
queries with "the", "of", "what is" hit most chunks, as in real prose),
documents of ten chunks, 10 % of them in a second collection, and clustered
unit vectors (one topic per document) of width 384. The database is written
straight through the real schema (migrations, FTS triggers) into a data
directory under a cache folder outside the repository, built once per size
and reused: the million-chunk one takes a long while to build. Its ANN index
is saved beside it by the store itself (``store.ann``) the first time a
run opens it, and loaded (checked against the database) on later runs.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

GENERATOR_VERSION = 1
DIM = 384
CHUNKS_PER_DOCUMENT = 10
VOCABULARY_SIZE = 60_000
ZIPF_EXPONENT = 1.07
OTHER_COLLECTION_SHARE = 0.1
VECTOR_IDENTITY = "bench:clustered@v1:native:384"

FUNCTION_WORDS = ["the", "of", "and", "to", "a", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "they", "you", "were", "their", "one", "all", "we", "can", "her", "has", "there", "been", "if", "more", "when", "will", "would", "who", "so", "no", "what", "about", "up", "out", "into", "than", "them", "some", "could", "other", "time", "only", "new", "its", "these", "two", "may", "first", "then", "do", "any", "like", "my", "now", "over", "such", "our", "man", "me", "even", "most", "made", "after", "also", "did", "many", "before", "must", "through", "back", "years", "where", "much", "your", "way", "well", "down", "should", "because", "each", "just", "those", "how", "too"]

_SYLLABLES = [c + v for c in "bcdfghjklmnprstvwz" for v in ("a", "e", "i", "o", "u", "ai", "ou")]


@dataclass(frozen=True)
class SyntheticCorpus:
    home: Path
    size: int
    vocabulary: list[str]
    topics: np.ndarray  # (topic count, DIM) centres the vectors cluster around

    @property
    def database_path(self) -> Path:
        return self.home / "kb.sqlite3"


def vocabulary(seed: int) -> list[str]:
    """Function words first (most frequent), then pronounceable synthetic words."""
    rng = np.random.default_rng(seed)
    words = list(FUNCTION_WORDS)
    seen = set(words)
    while len(words) < VOCABULARY_SIZE:
        word = "".join(_SYLLABLES[i] for i in rng.integers(0, len(_SYLLABLES), rng.integers(2, 5)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def zipf_probabilities() -> np.ndarray:
    ranks = np.arange(1, VOCABULARY_SIZE + 1, dtype=np.float64)
    weights = ranks ** -ZIPF_EXPONENT
    return weights / weights.sum()


def topic_centres(seed: int, size: int) -> np.ndarray:
    rng = np.random.default_rng(seed + 1)
    return rng.standard_normal((max(64, size // 500), DIM)).astype(np.float32)


def clustered_vectors(rng: np.random.Generator, centres: np.ndarray, topics: np.ndarray) -> np.ndarray:
    points = centres[topics] + 0.9 * rng.standard_normal((len(topics), DIM), np.float32)
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


def corpus_home(cache: Path, size: int, seed: int) -> Path:
    return cache / f"zipf-{size}-v{GENERATOR_VERSION}-s{seed}"


def open_or_build(cache: Path, size: int, seed: int, *, log=print) -> SyntheticCorpus:
    """The cached knowledge base of ``size`` chunks, built first if missing."""
    home = corpus_home(cache, size, seed)
    words = vocabulary(seed)
    centres = topic_centres(seed, size)
    if not (home / "complete").exists():
        if home.exists():
            log(f"  discarding an unfinished build of {size:,} chunks")
            shutil.rmtree(home)  # rows were written in batches: start over rather than collide
        build(home, size, seed, words, centres, log=log)
    return SyntheticCorpus(home, size, words, centres)


def build(home: Path, size: int, seed: int, words: list[str], centres: np.ndarray, *, log=print) -> None:
    from store import open_store

    home.mkdir(parents=True, exist_ok=True)
    store = open_store(home)  # the real schema: migrations and FTS triggers
    store.close()
    started = time.perf_counter()
    connection = sqlite3.connect(home / "kb.sqlite3", isolation_level=None)
    connection.execute("PRAGMA journal_mode=wal")
    connection.execute("PRAGMA synchronous=off")
    connection.execute("PRAGMA cache_size=-262144")
    rng = np.random.default_rng(seed)
    cumulative = np.cumsum(zipf_probabilities())
    word_array = np.array(words, dtype=object)
    now = time.time()
    for collection in ("DEFAULT", "OTHER"):
        connection.execute("INSERT OR IGNORE INTO collection(id, created_at) VALUES (?, ?)", (collection, now))
    documents = -(-size // CHUNKS_PER_DOCUMENT)
    batch_documents = 2_000
    chunk_id = 0
    for first in range(0, documents, batch_documents):
        count = min(batch_documents, documents - first)
        doc_rows, chunk_rows, vector_rows = [], [], []
        doc_topics = rng.integers(0, centres.shape[0], count)
        for offset in range(count):
            number = first + offset
            document_id = hashlib.sha256(f"doc-{seed}-{number}".encode()).hexdigest()[:32]
            collection = "OTHER" if rng.random() < OTHER_COLLECTION_SHARE else "DEFAULT"
            chunks_here = min(CHUNKS_PER_DOCUMENT, size - number * CHUNKS_PER_DOCUMENT)
            doc_rows.append((document_id, collection, document_id, b"\0", "text", f"docs/{number}.md",
                             0, "Indexed", chunks_here, now, now, now, VECTOR_IDENTITY, DIM))
            lengths = rng.integers(60, 180, chunks_here)
            ids = np.searchsorted(cumulative, rng.random(int(lengths.sum())))
            ids = np.minimum(ids, VOCABULARY_SIZE - 1)
            texts = np.split(word_array[ids], np.cumsum(lengths)[:-1])
            vectors = clustered_vectors(rng, centres, np.full(chunks_here, doc_topics[offset]))
            for ordinal in range(chunks_here):
                chunk_id += 1
                content = " ".join(texts[ordinal])
                heading = " ".join(texts[ordinal][:3])
                chunk_rows.append((chunk_id, f"{document_id}-{ordinal}", document_id, collection, ordinal,
                                   content, "h", heading, f"docs/{number}.md", "", "prose",
                                   0, len(content), len(content) // 4))
                vector_rows.append((chunk_id, VECTOR_IDENTITY, DIM, vectors[ordinal].astype("<f4").tobytes()))
        connection.execute("BEGIN")
        connection.executemany(
            "INSERT INTO document(id, collection_id, content_hash, display_name, format, source_path, "
            "size_bytes, status, chunk_count, created_at, updated_at, indexed_at, vector_identity, vector_dim) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", doc_rows)
        connection.executemany(
            "INSERT INTO chunk(id, chunk_uid, document_id, collection_id, ordinal, content, content_hash, "
            "heading_path, source_path, symbol, kind, start_offset, end_offset, token_estimate) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", chunk_rows)
        connection.executemany("INSERT INTO vector(chunk_id, identity, dim, embedding) VALUES (?, ?, ?, ?)", vector_rows)
        connection.execute("COMMIT")
        if (first // batch_documents) % 10 == 0:
            log(f"  built {chunk_id:,} / {size:,} chunks ({time.perf_counter() - started:.0f} s)")
    connection.execute("INSERT INTO chunk_fts(chunk_fts) VALUES ('optimize')")
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.execute("ANALYZE")
    connection.close()
    (home / "complete").write_text(f"{size} chunks in {time.perf_counter() - started:.0f} s\n")
    log(f"  built {size:,} chunks in {time.perf_counter() - started:.0f} s")
