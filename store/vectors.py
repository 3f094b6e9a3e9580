"""Vectors in SQLite, the source of truth: float32 BLOBs with their canonical
identity and width, the exact scan, the lookups of exact embedding reuse, and
the reads the ANN index (:mod:`store.ann`) is built and checked from.

Every read names one identity and one width, so vectors of another model or
width are never compared. Visibility is decided here, by SQLite: a chunk is
served only while its document is (``SERVED_DOCUMENT_SQL``) and in the
requested collection, and every ANN candidate is checked against the same
condition (:func:`visible_chunk_ids`) before it is returned.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from store.db import database
from store.id_batches import id_batches, placeholders
from store.models import SERVED_DOCUMENT_SQL

# Rows the ANN index reads at a time while it builds or catches up.
PAGE_ROWS = 4096

# (chunk id, collection id, document id, embedding): what an ANN index holds of a row.
IndexRow = tuple[int, str, str, bytes]


def to_blob(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def from_blob(blob: bytes, dim: int) -> np.ndarray:
    vector = np.frombuffer(blob, dtype="<f4")
    if vector.shape[0] != dim:
        raise ValueError("stored vector width does not match its recorded dimension")
    return vector


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` highest scores, best first (ties by position).

    Partitions the negated scores: ``np.argpartition`` is pathologically slow
    when most values equal the ones it is asked to put last.
    """
    n = scores.shape[0]
    if k <= 0 or n == 0:
        return np.zeros(0, np.int64)
    negated = -scores
    picked = np.argpartition(negated, k - 1)[:k] if k < n else np.arange(n)
    return picked[np.lexsort((picked, negated[picked]))]


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
    return score_rows(rows, query, limit)


def score_rows(rows: Sequence[tuple[int, bytes]], query: np.ndarray, limit: int) -> list[tuple[int, float]]:
    """The ``limit`` (chunk id, embedding) rows most similar to ``query``, best
    first with their scores; rows of another width are skipped."""
    dim = int(query.shape[0])
    rows = [r for r in rows if len(r[1]) == 4 * dim]
    if not rows:
        return []
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(len(rows), dim)
    scores = matrix @ query.astype(np.float32)
    return [(int(ids[i]), float(scores[i])) for i in top_k(scores, limit)]


def stored_vectors(chunk_ids: Sequence[int], identity: str, dim: int) -> dict[int, np.ndarray]:
    """The stored vectors of exactly ``identity`` and ``dim`` for ``chunk_ids``
    (chunks without one are absent). No scope: callers pass ids they scoped."""
    return {
        row[0]: np.frombuffer(row[3], dtype="<f4")
        for row in rows_by_id(list(chunk_ids), identity, dim)
        if len(row[3]) == 4 * dim
    }


def committed_vectors(
    content_hashes: Iterable[str],
    *,
    identity: str,
    dim: int,
    parser_version: int,
    chunker_version: int,
) -> dict[str, np.ndarray]:
    """Vectors already committed for these contextual-content hashes under the
    exact reuse key: same identity and width, and a document indexed with the
    same parser and chunker versions. Rows exist only after an atomic index
    commit, so every row found here is a finished vector."""
    found: dict[str, np.ndarray] = {}
    for batch in id_batches(dict.fromkeys(content_hashes)):
        # CROSS JOIN fixes the join order: start from the content-hash index.
        # Left to itself the planner scanned every vector of the identity, once
        # per document, which made ingestion quadratic in the corpus size.
        rows = database.execute_sql(
            "SELECT c.content_hash, v.embedding FROM chunk AS c "
            "CROSS JOIN vector AS v ON v.chunk_id = c.id CROSS JOIN document AS d ON d.id = c.document_id "
            f"WHERE c.content_hash IN ({placeholders(batch)}) AND v.identity = ? AND v.dim = ? "
            "AND d.parser_version = ? AND d.chunker_version = ?",
            [*batch, identity, dim, parser_version, chunker_version],
        ).fetchall()
        for content_hash, blob in rows:
            if content_hash not in found and len(blob) == 4 * dim:
                found[content_hash] = np.frombuffer(blob, dtype="<f4").copy()
    return found


def visible_chunk_ids(chunk_ids: Iterable[int], identity: str, dim: int, collection_id: str) -> set[int]:
    """Which of ``chunk_ids`` search may serve in ``collection_id`` under this identity."""
    visible: set[int] = set()
    for batch in id_batches(int(c) for c in chunk_ids):
        rows = database.execute_sql(
            "SELECT c.id FROM chunk AS c JOIN vector AS v ON v.chunk_id = c.id "
            "JOIN document AS d ON d.id = c.document_id "
            f"WHERE c.id IN ({placeholders(batch)}) AND v.identity = ? AND v.dim = ? "
            f"AND c.collection_id = ? AND d.collection_id = ? AND {SERVED_DOCUMENT_SQL}",
            [*batch, identity, dim, collection_id, collection_id],
        ).fetchall()
        visible.update(r[0] for r in rows)
    return visible


def visible_vectors(
    chunk_ids: Iterable[int], identity: str, dim: int, collection_id: str
) -> list[tuple[int, bytes]]:
    """The (chunk id, embedding) rows of those of ``chunk_ids`` search may serve
    in ``collection_id`` under this identity."""
    rows: list[tuple[int, bytes]] = []
    for batch in id_batches(int(c) for c in chunk_ids):
        rows.extend(
            database.execute_sql(
                "SELECT v.chunk_id, v.embedding FROM vector AS v JOIN chunk AS c ON c.id = v.chunk_id "
                f"JOIN document AS d ON d.id = c.document_id WHERE v.chunk_id IN ({placeholders(batch)}) "
                "AND v.identity = ? AND v.dim = ? AND c.collection_id = ? AND d.collection_id = ? "
                f"AND {SERVED_DOCUMENT_SQL}",
                [*batch, identity, dim, collection_id, collection_id],
            ).fetchall()
        )
    return rows


# -- what the ANN index of one identity is built and checked from


def row_count(identity: str, dim: int, *, after: int = 0) -> int:
    """How many vectors of the identity have a chunk id above ``after``."""
    return database.execute_sql(
        "SELECT count(*) FROM vector WHERE identity = ? AND dim = ? AND chunk_id > ?", (identity, dim, after)
    ).fetchone()[0]


def rows_after(watermark: int, identity: str, dim: int) -> list[IndexRow]:
    """The next page of rows above ``watermark``, in chunk id order."""
    return database.execute_sql(
        "SELECT v.chunk_id, c.collection_id, c.document_id, v.embedding FROM vector AS v "
        "JOIN chunk AS c ON c.id = v.chunk_id "
        "WHERE v.chunk_id > ? AND v.identity = ? AND v.dim = ? ORDER BY v.chunk_id LIMIT ?",
        (watermark, identity, dim, PAGE_ROWS),
    ).fetchall()


def rows_by_id(chunk_ids: Sequence[int], identity: str, dim: int) -> list[IndexRow]:
    """The rows of ``chunk_ids`` that are vectors of the identity, in chunk id order per batch."""
    rows: list[IndexRow] = []
    for batch in id_batches(chunk_ids):
        rows.extend(
            database.execute_sql(
                "SELECT v.chunk_id, c.collection_id, c.document_id, v.embedding FROM vector AS v "
                f"JOIN chunk AS c ON c.id = v.chunk_id WHERE v.chunk_id IN ({placeholders(batch)}) "
                "AND v.identity = ? AND v.dim = ? ORDER BY v.chunk_id",
                [*batch, identity, dim],
            ).fetchall()
        )
    return rows


def max_chunk_id(identity: str, dim: int) -> int:
    """The highest chunk id holding a vector of the identity (0 for none)."""
    row = database.execute_sql(
        "SELECT max(chunk_id) FROM vector WHERE identity = ? AND dim = ?", (identity, dim)
    ).fetchone()
    return int(row[0] or 0)


def chunk_ids(identity: str, dim: int) -> np.ndarray:
    """Every chunk id holding a vector of the identity, ascending."""
    rows = database.execute_sql(
        "SELECT chunk_id FROM vector WHERE identity = ? AND dim = ? ORDER BY chunk_id", (identity, dim)
    ).fetchall()
    return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))


def label_rows(identity: str, dim: int) -> list[tuple[int, str, str]]:
    """(chunk id, collection id, document id) of every vector of the identity, ascending."""
    return database.execute_sql(
        "SELECT v.chunk_id, c.collection_id, c.document_id FROM vector AS v JOIN chunk AS c ON c.id = v.chunk_id "
        "WHERE v.identity = ? AND v.dim = ? ORDER BY v.chunk_id",
        (identity, dim),
    ).fetchall()
