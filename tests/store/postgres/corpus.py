"""Documents written the same way into both stores, for the parity tests: the
SQLite store through ``store.catalog`` and the PostgreSQL store through
``store.postgres.catalog``, chunk specs and vectors alike.

The text is chosen to exercise what the lexical index must agree on: stems
(run, running, runs), identifiers cut at underscores (pg_basebackup), digits
(x86_64, v2), diacritics (café, Müller), words repeated in a chunk, and the
four weighted columns (path, heading, symbol, body).
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass

import numpy as np
import psycopg

from kbtui.chunking import ChunkSpec, SectionSpec
from store import catalog
from store.postgres import catalog as pg_catalog
from store.postgres.blobs import PostgresBlobStore

IDENTITY = "test:unit-vectors@0000:native:32"
DIM = 32
KEY = bytes(range(32))

WORDS = (
    "the of and to a in is that for it as was with be by on not this are or from at which but "
    "backup backups restore restoring restored database databases replica replication running runs run runner "
    "certificate certificates rotate rotation tls cluster clusters index indexes indexing query queries "
    "pg_basebackup x86_64 v2 café cafe müller naïve résumé snapshot snapshots volume volumes "
    "kubernetes helm chart charts deploy deployment deployments latency throughput shard shards "
    "connection connections pool pooling timeout timeouts vacuum analyze checkpoint wal archive archives"
).split()
SYMBOLS = ("", "", "restore_database", "RotateCertificates", "pg_basebackup", "run_vacuum")


@dataclass(frozen=True)
class Written:
    """The same document in both stores: its ids and its chunks' uids in order."""

    sqlite_id: str
    postgres_id: str
    uids: list[str]


def random_chunks(rng: np.random.Generator, name: str, count: int) -> tuple[list[SectionSpec], list[ChunkSpec]]:
    sections = [SectionSpec(0, f"{name} guide", 1, 0, 1000, None), SectionSpec(1, f"{name} guide > details", 2, 0, 1000, 2)]
    chunks = []
    for ordinal in range(count):
        words = [WORDS[int(i)] for i in np.minimum(rng.zipf(1.3, int(rng.integers(8, 60))) - 1, len(WORDS) - 1)]
        content = " ".join(words).capitalize() + "."
        heading = " ".join(WORDS[int(i)] for i in rng.integers(20, len(WORDS), 2))
        symbol = SYMBOLS[int(rng.integers(0, len(SYMBOLS)))]
        chunks.append(
            ChunkSpec(
                chunk_uid=hashlib.sha256(f"{name}|{ordinal}".encode()).hexdigest(),
                ordinal=ordinal,
                section_ordinal=ordinal % 2,
                content=content,
                contextual_content=f"{heading}\n{content}",
                content_hash=hashlib.sha256(f"{name}|{ordinal}|{content}".encode()).hexdigest(),
                heading_path=heading,
                kind="prose",
                language=None,
                symbol=symbol or None,
                page=None,
                start_offset=0,
                end_offset=len(content),
                token_estimate=len(words),
            )
        )
    return sections, chunks


def text_chunks(name: str, texts: list[str]) -> list[ChunkSpec]:
    return [
        ChunkSpec(
            chunk_uid=hashlib.sha256(f"{name}|{i}".encode()).hexdigest(), ordinal=i, section_ordinal=0, content=text,
            contextual_content=text, content_hash=hashlib.sha256(f"{name}|{i}|{text}".encode()).hexdigest(),
            heading_path="", kind="prose", language=None, symbol=None, page=None, start_offset=0,
            end_offset=len(text), token_estimate=len(text) // 4,
        )
        for i, text in enumerate(texts)
    ]


def unit_vectors(rng: np.random.Generator, count: int, dim: int = DIM) -> np.ndarray:
    centres = rng.standard_normal((8, dim))
    points = centres[rng.integers(0, 8, count)] + 0.6 * rng.standard_normal((count, dim))
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


def add_postgres(
    conn: psycopg.Connection,
    blobs: PostgresBlobStore,
    name: str,
    chunks: list[ChunkSpec],
    *,
    sections: list[SectionSpec] | None = None,
    vectors: np.ndarray | None = None,
    collection: str = "DEFAULT",
    identity: str = IDENTITY,
) -> tuple[str, list[int]]:
    data = f"document {name}".encode()
    document_id = pg_catalog.create_document(
        conn, blobs, KEY, collection, io.BytesIO(data), content_hash=hashlib.sha256(data).hexdigest(),
        display_name=f"{name}.md", fmt="markdown", source_path=f"docs/{name}.md",
    )
    if vectors is None:
        vectors = np.zeros((len(chunks), DIM), np.float32) + 1 / np.sqrt(DIM)
    ids = pg_catalog.commit_index(
        conn, document_id, sections=sections or [], chunks=chunks, vectors=vectors, identity=identity,
        parser_version=1, chunker_version=1,
    )
    assert ids is not None
    return document_id, ids


def add_sqlite(
    node, name: str, chunks: list[ChunkSpec], *, sections: list[SectionSpec] | None = None, collection: str = "DEFAULT"
) -> tuple[str, list[int]]:
    data = f"document {name}".encode()
    document_id = catalog.create_document(
        node.store, collection, io.BytesIO(data), content_hash=hashlib.sha256(data).hexdigest(),
        display_name=f"{name}.md", fmt="markdown", source_path=f"docs/{name}.md",
    )
    ids = catalog.commit_index(
        document_id, sections=sections or [], chunks=chunks, vectors=np.zeros((len(chunks), DIM), np.float32) + 0.1,
        identity=IDENTITY, parser_version=1, chunker_version=1,
    )
    assert ids is not None
    return document_id, ids
