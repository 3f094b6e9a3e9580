"""Vectors committed through the real catalog for the vector store's tests:
clustered unit vectors, chunk specs and one document per call."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from kbtui.chunking import ChunkSpec
from store import catalog
from store.ann import IndexSettings, VectorIndexes
from store.vectors import exact_search

IDENTITY = "test:unit-vectors@0000:native:32"
OTHER_IDENTITY = "test:other-model@1111:native:32"
DIM = 32
# Force the graph path on small data: no exact scan of small scopes, inline builds.
GRAPH_ONLY = IndexSettings(exact_scan_min_rows=0, exact_scan_fraction=0.0, inline_build_max_rows=100_000)


def unit_vectors(rng: np.random.Generator, count: int, dim: int = DIM) -> np.ndarray:
    # Clustered, like real sentence embeddings (and unlike uniform noise).
    centres = rng.standard_normal((8, dim))
    points = centres[rng.integers(0, 8, count)] + 0.6 * rng.standard_normal((count, dim))
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


def specs(document_id: str, count: int, salt: str = "") -> list[ChunkSpec]:
    out = []
    for i in range(count):
        text = f"chunk {i} of {document_id}{salt}"
        out.append(
            ChunkSpec(
                chunk_uid=hashlib.sha256(f"{document_id}|{salt}|{i}".encode()).hexdigest(),
                ordinal=i,
                section_ordinal=0,
                content=text,
                contextual_content=text,
                content_hash=hashlib.sha256(text.encode()).hexdigest(),
                heading_path="",
                kind="prose",
                language=None,
                symbol=None,
                page=None,
                start_offset=0,
                end_offset=len(text),
                token_estimate=4,
            )
        )
    return out


def add_document(node, tmp_path: Path, name: str, vectors: np.ndarray, *, collection="DEFAULT", identity=IDENTITY):
    source = tmp_path / f"{name}.txt"
    source.write_text(f"document {name}", encoding="utf-8")
    outcome = catalog.add_document(node.store, collection, source, display_name=source.name, fmt="text")
    ids = commit(outcome.document_id, vectors, identity=identity)
    return outcome.document_id, ids


def commit(document_id: str, vectors: np.ndarray, *, identity=IDENTITY, salt: str = "") -> list[int]:
    return catalog.commit_index(
        document_id,
        sections=[],
        chunks=specs(document_id, len(vectors), salt),
        vectors=vectors,
        identity=identity,
        parser_version=1,
        chunker_version=1,
    )


def recall_at_10(indexes: VectorIndexes, queries: np.ndarray, collection: str = "DEFAULT") -> float:
    found = 0
    for query in queries:
        truth = {c for c, _ in exact_search(query, IDENTITY, collection, limit=10)}
        got = {c for c, _ in indexes.search(query, IDENTITY, collection, limit=10)}
        found += len(truth & got)
    return found / (10 * len(queries))
