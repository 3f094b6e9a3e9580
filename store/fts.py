"""The lexical arm: BM25 over the weighted FTS5 columns, scoped in the query."""

from __future__ import annotations

from store.db import database
from store.models import SERVED_DOCUMENT_SQL

# bm25() column weights, in table order: source_path, heading_path, symbol, content.
# Exact identifiers, paths and headings outrank repeated body terms.
COLUMN_WEIGHTS = (4.0, 3.0, 3.0, 1.0)


def lexical_search(
    match_expression: str,
    collection_id: str,
    *,
    document_id: str | None = None,
    limit: int = 50,
) -> list[tuple[int, float]]:
    """Chunk ids and scores (higher is better) of visible chunks matching the expression.

    ``match_expression`` must come from
    :func:`kbtui.retrieval.fts_query.fts_match_expression`.
    """
    weights = ", ".join(str(w) for w in COLUMN_WEIGHTS)
    sql = (
        f"SELECT f.rowid, bm25(chunk_fts, {weights}) AS score "
        "FROM chunk_fts AS f JOIN document AS d ON d.id = f.document_id "
        "WHERE chunk_fts MATCH ? AND f.collection_id = ? AND d.collection_id = ? "
        f"AND {SERVED_DOCUMENT_SQL}"
    )
    params: list[object] = [match_expression, collection_id, collection_id]
    if document_id is not None:
        sql += " AND f.document_id = ?"
        params.append(document_id)
    sql += " ORDER BY score LIMIT ?"
    params.append(limit)
    # bm25() is more negative for stronger matches; negate so higher is better.
    return [(row[0], -row[1]) for row in database.execute_sql(sql, params).fetchall()]


def integrity_check() -> bool:
    """FTS5's own consistency check between the index and the chunk table."""
    try:
        database.execute_sql("INSERT INTO chunk_fts(chunk_fts, rank) VALUES ('integrity-check', 1)")
    except Exception:  # noqa: BLE001 - any failure means "not consistent"
        return False
    return True
