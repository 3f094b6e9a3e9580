"""Vectors: float32 BLOBs in SQLite (the source of truth) and exact search."""

from __future__ import annotations

import numpy as np

from store.db import database
from store.models import SERVED_DOCUMENT_SQL


def to_blob(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def from_blob(blob: bytes, dim: int) -> np.ndarray:
    vector = np.frombuffer(blob, dtype="<f4")
    if vector.shape[0] != dim:
        raise ValueError("stored vector width does not match its recorded dimension")
    return vector


def exact_search(
    query: np.ndarray,
    identity: str,
    collection_id: str,
    *,
    document_id: str | None = None,
    limit: int = 50,
) -> list[tuple[int, float]]:
    """Cosine similarity of ``query`` against every visible vector of ``identity``.

    Only vectors with exactly this identity and the query's width are read,
    so vectors of another model or width can never be compared.
    """
    dim = int(query.shape[0])
    sql = (
        "SELECT v.chunk_id, v.embedding FROM vector AS v "
        "JOIN chunk AS c ON c.id = v.chunk_id JOIN document AS d ON d.id = c.document_id "
        "WHERE v.identity = ? AND v.dim = ? AND c.collection_id = ? AND d.collection_id = ? "
        f"AND {SERVED_DOCUMENT_SQL}"
    )
    params: list[object] = [identity, dim, collection_id, collection_id]
    if document_id is not None:
        sql += " AND c.document_id = ?"
        params.append(document_id)
    rows = database.execute_sql(sql, params).fetchall()
    if not rows:
        return []
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(len(rows), dim)
    scores = matrix @ query.astype(np.float32)
    top = min(limit, len(rows))
    order = np.argsort(-scores, kind="stable")[:top]
    return [(int(ids[i]), float(scores[i])) for i in order]
