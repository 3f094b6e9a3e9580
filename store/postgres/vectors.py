"""The vector arm on pgvector: :mod:`store.vectors` and the search entry point of
:mod:`store.ann` (``VectorIndexes.search``), with the connection first.

Vectors are the database's own ``vector`` values, of any width, with their
canonical identity and width beside them; every read names one identity and
one width, so vectors of another model or width are never compared. There is
one HNSW index (cosine) per identity and width, a partial index over the
embedding cast to its fixed width, made the first time a vector of that
identity is committed (:func:`ensure_vector_index`). The identity and width
are written into the search statement as literals so that the planner always
matches that partial index.

A collection filter runs inside the index scan with pgvector's iterative
scans (``hnsw.iterative_scan = relaxed_order``): the scan goes on past
``ef_search`` candidates until enough rows pass the filter, so a small
collection inside a large base still gets its k hits. A scope smaller than
``EXACT_SCAN_MIN_ROWS`` (or one document) is scanned exactly, as
``store.ann`` does; so is any scope the index scan left short.
Visibility (served documents in the collection) is part of every statement.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Sequence

import numpy as np
import psycopg
from pgvector import Vector
from psycopg import sql

from store.ann import EXACT_SCAN_MIN_ROWS
from store.models import SERVED_DOCUMENT_SQL

# pgvector's HNSW indexes vectors of at most 2,000 dimensions; wider ones are scanned exactly.
HNSW_MAX_DIM = 2000
# Graph parameters: those of the hnswlib index (store.ann: M=16, ef_construction=200;
# pgvector defaults to 64, which lost recall on clustered vectors). Recall@10
# against exact search is measured by benchmarks/search_postgres.py.
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 200
# Candidates per index scan (hnsw.ef_search): hnswlib's 128 (store.ann) reached only
# .93 recall@10 on the clustered test vectors in a graph built by inserts; 200
# reached .97 (tests/store/postgres/test_vectors.py; benchmarks/search_postgres.py at 100k).
EF_SEARCH = 200
# How far an iterative scan may go for a filtered query before giving up (the
# exact scan of the scope then answers).
MAX_SCAN_TUPLES = 40_000
# Over ``chunk_vector AS v JOIN document AS d ON d.id = v.document_id``; two collection parameters.
_SCOPE = f"v.collection_id = %s AND d.collection_id = %s AND {SERVED_DOCUMENT_SQL}"
# pg_advisory_xact_lock namespace of index creation ("kbtu" "i-vx"), plus a hash of the index name.
_INDEX_LOCK = 0x6B627475_692D7600


def index_name(identity: str, dim: int) -> str:
    return "chunk_vector_hnsw_" + hashlib.sha256(f"{identity}\0{dim}".encode()).hexdigest()[:16]


def _identity_filter(identity: str, dim: int) -> sql.Composed:
    """The partial-index predicate, with literals (a parameter would not match the index)."""
    return sql.SQL("v.identity = {identity} AND v.dim = {dim}").format(
        identity=sql.Literal(identity), dim=sql.Literal(int(dim))
    )


def _distance(dim: int) -> sql.Composed:
    return sql.SQL("(v.embedding::vector({dim}) <=> %s::vector({dim}))").format(dim=sql.Literal(int(dim)))


def ensure_vector_index(conn: psycopg.Connection, identity: str, dim: int) -> str | None:
    """The HNSW index of ``identity`` at width ``dim``, created (in the caller's
    transaction, if any) when missing; None for a width HNSW cannot index."""
    if dim > HNSW_MAX_DIM:
        return None
    name = index_name(identity, dim)
    known = conn.execute("SELECT 1 FROM vector_index WHERE identity = %s AND dim = %s", (identity, dim)).fetchone()
    if known is not None:
        return name
    with conn.transaction():
        # Two nodes committing the first vectors of an identity: one creates, the other waits and sees it.
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_INDEX_LOCK + int(name[-4:], 16),))
        conn.execute(
            sql.SQL(
                "CREATE INDEX IF NOT EXISTS {name} ON chunk_vector USING hnsw ((embedding::vector({dim})) "
                "vector_cosine_ops) WITH (m = {m}, ef_construction = {ef}) WHERE identity = {identity} AND dim = {dim}"
            ).format(
                name=sql.Identifier(name), dim=sql.Literal(int(dim)), m=sql.Literal(HNSW_M),
                ef=sql.Literal(HNSW_EF_CONSTRUCTION), identity=sql.Literal(identity),
            )
        )
        conn.execute(
            "INSERT INTO vector_index(identity, dim, name, created_at) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (identity, dim) DO NOTHING",
            (identity, dim, name, time.time()),
        )
    return name


def exact_search(
    conn: psycopg.Connection,
    query: np.ndarray,
    identity: str,
    collection_id: str,
    *,
    document_id: str | None = None,
    limit: int = 50,
) -> list[tuple[int, float]]:
    """Cosine similarity of ``query`` against every visible vector of ``identity``
    in scope, best first (``store.vectors.exact_search``)."""
    dim = int(query.shape[0])
    params: list[object] = [np.asarray(query, dtype=np.float32), collection_id, collection_id]
    where = sql.SQL("{identity} AND {scope}").format(identity=_identity_filter(identity, dim), scope=sql.SQL(_SCOPE))
    if document_id is not None:
        where = sql.SQL("{where} AND v.document_id = %s").format(where=where)
        params.append(document_id)
    # OFFSET 0 keeps the scan apart from the ORDER BY: the HNSW index must not answer (it is approximate).
    statement = sql.SQL(
        "SELECT chunk_id, distance FROM (SELECT v.chunk_id, {distance} AS distance FROM chunk_vector AS v "
        "JOIN document AS d ON d.id = v.document_id WHERE {where} OFFSET 0) "
        "AS scored ORDER BY distance, chunk_id LIMIT %s"
    ).format(distance=_distance(dim), where=where)
    rows = conn.execute(statement, [*params, limit]).fetchall()
    return [(int(chunk_id), 1.0 - float(distance)) for chunk_id, distance in rows]


def scope_row_count(conn: psycopg.Connection, identity: str, dim: int, collection_id: str, *, cap: int) -> int:
    """How many vectors of the identity the collection holds, counted up to ``cap``."""
    row = conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM chunk_vector WHERE identity = %s AND dim = %s AND collection_id = %s "
        "LIMIT %s) AS held",
        (identity, dim, collection_id, cap),
    ).fetchone()
    return int(row[0]) if row else 0


def search(
    conn: psycopg.Connection,
    query: np.ndarray,
    identity: str,
    collection_id: str,
    *,
    document_id: str | None = None,
    limit: int = 50,
    ef_search: int = EF_SEARCH,
) -> list[tuple[int, float]]:
    """Cosine-nearest visible chunks of ``identity`` in the collection, best
    first with their similarity (``store.ann.VectorIndexes.search``)."""
    dim = int(query.shape[0])
    if (
        document_id is not None
        or dim > HNSW_MAX_DIM
        or scope_row_count(conn, identity, dim, collection_id, cap=EXACT_SCAN_MIN_ROWS) < EXACT_SCAN_MIN_ROWS
    ):
        return exact_search(conn, query, identity, collection_id, document_id=document_id, limit=limit)
    statement = sql.SQL(
        "WITH nearest AS MATERIALIZED ("
        " SELECT v.chunk_id, {distance} AS distance FROM chunk_vector AS v JOIN document AS d ON d.id = v.document_id"
        " WHERE {identity} AND {scope} ORDER BY distance LIMIT %s"
        ") SELECT chunk_id, distance FROM nearest ORDER BY distance, chunk_id"
    ).format(distance=_distance(dim), identity=_identity_filter(identity, dim), scope=sql.SQL(_SCOPE))
    with conn.transaction():
        # One round trip for the scan's settings. No sort: the planner must walk
        # the index (an exact top-k of a large scope is what the index avoids).
        conn.execute(
            "SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', 'relaxed_order', true),"
            " set_config('hnsw.max_scan_tuples', %s, true), set_config('enable_sort', 'off', true)",
            (str(max(ef_search, limit)), str(MAX_SCAN_TUPLES)),
        )
        rows = conn.execute(statement, [np.asarray(query, dtype=np.float32), collection_id, collection_id, limit]).fetchall()
    if len(rows) < limit:
        # The walk gave up before finding ``limit`` rows in scope: the scope is
        # sparse in the graph; its exact scan is the answer.
        return exact_search(conn, query, identity, collection_id, limit=limit)
    return [(int(chunk_id), 1.0 - float(distance)) for chunk_id, distance in rows]


def _array(embedding: Vector) -> np.ndarray:
    return np.asarray(embedding.to_numpy(), dtype=np.float32)


def stored_vectors(conn: psycopg.Connection, chunk_ids: Sequence[int], identity: str, dim: int) -> dict[int, np.ndarray]:
    """The stored vectors of exactly ``identity`` and ``dim`` for ``chunk_ids``
    (chunks without one are absent). No scope: callers pass ids they scoped."""
    rows = conn.execute(
        "SELECT chunk_id, embedding FROM chunk_vector WHERE chunk_id = ANY(%s) AND identity = %s AND dim = %s",
        (list(chunk_ids), identity, dim),
    ).fetchall()
    return {int(chunk_id): _array(embedding) for chunk_id, embedding in rows}


def committed_vectors(
    conn: psycopg.Connection,
    content_hashes: Iterable[str],
    *,
    identity: str,
    dim: int,
    parser_version: int,
    chunker_version: int,
) -> dict[str, np.ndarray]:
    """Vectors already committed for these contextual-content hashes under the
    exact reuse key (``store.vectors.committed_vectors``)."""
    rows = conn.execute(
        "SELECT DISTINCT ON (c.content_hash) c.content_hash, v.embedding FROM chunk AS c "
        "JOIN chunk_vector AS v ON v.chunk_id = c.id JOIN document AS d ON d.id = c.document_id "
        "WHERE c.content_hash = ANY(%s) AND v.identity = %s AND v.dim = %s "
        "AND d.parser_version = %s AND d.chunker_version = %s ORDER BY c.content_hash, c.id",
        (list(dict.fromkeys(content_hashes)), identity, dim, parser_version, chunker_version),
    ).fetchall()
    return {content_hash: _array(embedding) for content_hash, embedding in rows}
