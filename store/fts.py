"""The lexical arm's SQL: BM25 over the weighted FTS5 columns, scoped in the query.

Every function takes terms, never raw user text: the MATCH expressions are
built here from quoted terms (:mod:`store.fts_match`), so no FTS5 syntax
from a query can reach SQLite. Scope (collection, optional document,
served documents only) is part of every statement.

Cost model (measured in ``benchmarks/search.py``): ``bm25()`` reads every
row that matches, about 1.5 microseconds each, and a scope join on every
matching row costs about 4 more; worse, bm25 counts the whole posting list of
every term for its idf. A term in most chunks ("the") therefore costs
hundreds of milliseconds at a million chunks, while it adds almost nothing to
the ranking. :func:`term_row_counts` answers "how many chunks hold this term,
up to a cap" cheaply (FTS5 stops iterating at the cap), so the query planner
can leave such terms out; and
:func:`ranked_matches` ranks without the join first, checking the scope of
only the best matches overall (exact whenever enough of them are in scope,
else it falls back to the scoped query).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from store.chunks import SCOPED_SQL, scoped_id_batches
from store.db import database
from store.fts_match import all_of, any_of, quoted, weighted_any_of

# bm25() column weights, in table order: source_path, heading_path, symbol, content.
# Exact identifiers, paths and headings outrank repeated body terms.
COLUMN_WEIGHTS = (4.0, 3.0, 3.0, 1.0)
_WEIGHTS_SQL = ", ".join(str(w) for w in COLUMN_WEIGHTS)

# Row counts are remembered for one state of the index (its chunk id
# high-water mark moves with every commit) and at most this long.
ROW_COUNT_TTL_S = 300.0
_ROW_COUNT_CACHE_MAX = 20_000
_SCAN_BATCH = 256
# Ranking without the scope join looks at this many best matches overall.
OVERALL_DEPTH_FACTOR = 4
OVERALL_DEPTH_MIN = 200

_SCOPE_SQL = (
    "JOIN chunk AS c ON c.id = f.rowid JOIN document AS d ON d.id = c.document_id "
    f"WHERE {SCOPED_SQL}"
)


def _scope(collection_id: str, document_id: str | None) -> tuple[str, list[object]]:
    sql = _SCOPE_SQL
    params: list[object] = [collection_id, collection_id]
    if document_id is not None:
        sql += " AND c.document_id = ?"
        params.append(document_id)
    return sql, params


class _RowCountCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[object, ...], tuple[int, float]] = {}

    def get(self, key: tuple[object, ...]) -> int | None:
        with self._lock:
            entry = self._entries.get(key)
        if entry is None or time.monotonic() - entry[1] > ROW_COUNT_TTL_S:
            return None
        return entry[0]

    def put(self, key: tuple[object, ...], count: int) -> None:
        with self._lock:
            if len(self._entries) >= _ROW_COUNT_CACHE_MAX:
                self._entries.clear()
            self._entries[key] = (count, time.monotonic())

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


_row_counts = _RowCountCache()


def indexed_chunk_count() -> int:
    """Roughly how many chunks are indexed (the chunk id high-water mark)."""
    row = database.execute_sql("SELECT seq FROM sqlite_sequence WHERE name = 'chunk'").fetchone()
    return int(row[0]) if row and row[0] else 0


def term_row_counts(words: Sequence[str], cap: int, *, generation: int) -> dict[str, int]:
    """For each word, the number of chunks (all collections) holding it, counted
    only up to ``cap``: a count equal to ``cap`` means "at least that many".

    ``generation`` is :func:`indexed_chunk_count` now: counts remembered for an
    older state of the index are not used.
    """
    counts: dict[str, int] = {}
    for word in words:
        key = (database.database, generation, word, cap)
        cached = _row_counts.get(key)
        if cached is None:
            row = database.execute_sql(
                "SELECT count(*) FROM (SELECT 1 FROM chunk_fts WHERE chunk_fts MATCH ? LIMIT ?)",
                [quoted(word), cap],
            ).fetchone()
            cached = int(row[0])
            _row_counts.put(key, cached)
        counts[word] = cached
    return counts


def forget_row_counts() -> None:
    """Drop remembered row counts (tests; after a bulk import)."""
    _row_counts.clear()


def ranked_matches(
    words: Sequence[str],
    collection_id: str,
    *,
    document_id: str | None = None,
    limit: int,
    repeats: Sequence[int] = (),
) -> list[tuple[int, float]]:
    """Chunk ids and BM25 scores (higher is better) of served chunks in scope
    that hold any of ``words``, best first. ``repeats`` (same order as
    ``words``) is each word's query-term frequency; missing means once."""
    expression = weighted_any_of(list(words), dict(zip(words, repeats, strict=False)))  # missing: once
    if expression is None:
        return []
    if document_id is None:
        found = _best_overall_in_scope(expression, collection_id, limit)
        if found is not None:
            return found
    scope_sql, scope_params = _scope(collection_id, document_id)
    sql = (
        f"SELECT f.rowid, bm25(chunk_fts, {_WEIGHTS_SQL}) AS score FROM chunk_fts AS f {scope_sql} "
        "AND chunk_fts MATCH ? ORDER BY score LIMIT ?"
    )
    rows = database.execute_sql(sql, [*scope_params, expression, limit]).fetchall()
    # bm25() is more negative for stronger matches; negate so higher is better.
    return [(row[0], -row[1]) for row in rows]


def _best_overall_in_scope(expression: str, collection_id: str, limit: int) -> list[tuple[int, float]] | None:
    """The ``limit`` best in-scope matches taken from the best matches in the
    whole index (no join per matching row), or None when too few of those are
    in scope to be sure (the caller runs the scoped query).

    Exact: an in-scope row missing from the overall best scores no better
    than all of them, so it cannot outrank the in-scope rows found there.
    """
    depth = max(limit * OVERALL_DEPTH_FACTOR, OVERALL_DEPTH_MIN)
    rows = database.execute_sql(
        f"SELECT rowid, bm25(chunk_fts, {_WEIGHTS_SQL}) AS score FROM chunk_fts "
        "WHERE chunk_fts MATCH ? ORDER BY score LIMIT ?",
        [expression, depth],
    ).fetchall()
    kept = _in_scope([row[0] for row in rows], collection_id, None)
    found = [(row[0], -row[1]) for row in rows if row[0] in kept]
    if len(found) >= limit or len(rows) < depth:
        return found[:limit]
    return None


def _in_scope(
    chunk_ids: Sequence[int], collection_id: str, document_id: str | None, *, content_holds: str | None = None
) -> set[int]:
    """Which of ``chunk_ids`` are served chunks in the scope (and, if given,
    whose text holds ``content_holds``)."""
    kept: set[int] = set()
    for where, params in scoped_id_batches(chunk_ids, collection_id, document_id):
        check = f"SELECT c.id FROM chunk AS c JOIN document AS d ON d.id = c.document_id WHERE {where}"
        if content_holds is not None:
            check += " AND instr(c.content, ?) > 0"
            params.append(content_holds)
        kept.update(row[0] for row in database.execute_sql(check, params).fetchall())
    return kept


def newest_matches(
    words: Sequence[str],
    collection_id: str,
    *,
    document_id: str | None = None,
    limit: int,
    window: int,
) -> list[int]:
    """Served chunks in scope holding all of ``words``, newest first, looking
    at no more than the ``window`` newest chunks that hold them (no ranking:
    the cost stays bounded however common the words are)."""
    expression = all_of(list(words))
    if expression is None:
        return []
    return _newest_in_scope(
        "SELECT rowid FROM chunk_fts WHERE chunk_fts MATCH ? AND rowid < ? ORDER BY rowid DESC LIMIT ?",
        [expression], collection_id, document_id, limit=limit, window=window,
    )


def _newest_in_scope(
    newest_sql: str,
    params: list[object],
    collection_id: str,
    document_id: str | None,
    *,
    limit: int,
    window: int,
    content_holds: str | None = None,
) -> list[int]:
    """Walk candidate rowids newest first in small batches, keeping those in
    scope (and whose text holds ``content_holds``), until ``limit`` are found
    or ``window`` candidates were looked at."""
    found: list[int] = []
    below = 1 << 62
    examined = 0
    while examined < window and len(found) < limit:
        batch = min(_SCAN_BATCH, window - examined)
        ids = [row[0] for row in database.execute_sql(newest_sql, [*params, below, batch]).fetchall()]
        if not ids:
            break
        examined += len(ids)
        below = ids[-1]
        kept = _in_scope(ids, collection_id, document_id, content_holds=content_holds)
        found.extend(i for i in ids if i in kept)
    return found[:limit]


def cjk_ranked_matches(
    runs: Sequence[str],
    collection_id: str,
    *,
    document_id: str | None = None,
    limit: int,
) -> list[tuple[int, float]]:
    """Chunks whose text contains any of the CJK ``runs`` (three characters or
    more), through the trigram table, BM25 best first."""
    expression = any_of([r for r in runs if len(r) >= 3])
    if expression is None:
        return []
    scope_sql, scope_params = _scope(collection_id, document_id)
    sql = (
        "SELECT f.rowid, bm25(chunk_cjk) AS score FROM chunk_cjk AS f "
        f"{scope_sql} AND chunk_cjk MATCH ? ORDER BY score LIMIT ?"
    )
    rows = database.execute_sql(sql, [*scope_params, expression, limit]).fetchall()
    return [(row[0], -row[1]) for row in rows]


def cjk_substring_matches(
    run: str,
    collection_id: str,
    *,
    document_id: str | None = None,
    limit: int,
    window: int,
) -> list[int]:
    """Chunks containing a one- or two-character CJK ``run`` (too short for
    trigrams): a substring test over at most the ``window`` newest chunks that
    hold any CJK text."""
    return _newest_in_scope(
        "SELECT rowid FROM chunk_cjk WHERE rowid < ? ORDER BY rowid DESC LIMIT ?",
        [], collection_id, document_id, limit=limit, window=window, content_holds=run,
    )


def _varints(blob: bytes) -> list[int]:
    """SQLite's varints (FTS5 records): 7 bits a byte, high bit set while more
    follow, big-endian; a ninth byte contributes all eight bits."""
    values, value, count = [], 0, 0
    for byte in blob:
        if count == 8:
            values.append((value << 8) | byte)
            value, count = 0, 0
            continue
        value = (value << 7) | (byte & 0x7F)
        count += 1
        if not byte & 0x80:
            values.append(value)
            value, count = 0, 0
    return values


def bm25_statistics() -> tuple[int, float]:
    """FTS5's own BM25 statistics: the row count and the average tokens per
    row over all columns (its "averages" record, which bm25() reads)."""
    row = database.execute_sql("SELECT block FROM chunk_fts_data WHERE id = 1").fetchone()
    values = _varints(bytes(row[0])) if row and row[0] else []
    if not values or values[0] <= 0:
        return 0, 0.0
    return values[0], sum(values[1:]) / values[0]


def row_token_counts(chunk_ids: Sequence[int]) -> dict[int, int]:
    """Each row's token count over all columns (FTS5's ``D``)."""
    found: dict[int, int] = {}
    for start in range(0, len(chunk_ids), 900):
        ids = list(chunk_ids[start : start + 900])
        rows = database.execute_sql(
            f"SELECT id, sz FROM chunk_fts_docsize WHERE id IN ({', '.join('?' for _ in ids)})", ids
        ).fetchall()
        found.update((row[0], sum(_varints(bytes(row[1])))) for row in rows)
    return found


def column_texts(chunk_ids: Sequence[int]) -> dict[int, tuple[str, str, str, str]]:
    """The indexed columns of each chunk, in ``chunk_fts`` order (no scope:
    callers pass rows already checked to be in scope)."""
    found: dict[int, tuple[str, str, str, str]] = {}
    for start in range(0, len(chunk_ids), 900):
        ids = list(chunk_ids[start : start + 900])
        rows = database.execute_sql(
            "SELECT id, source_path, heading_path, symbol, content FROM chunk "
            f"WHERE id IN ({', '.join('?' for _ in ids)})", ids,
        ).fetchall()
        found.update((row[0], (row[1] or "", row[2] or "", row[3] or "", row[4] or "")) for row in rows)
    return found


def integrity_check() -> bool:
    """FTS5's own consistency check between the index and the chunk table."""
    try:
        database.execute_sql("INSERT INTO chunk_fts(chunk_fts, rank) VALUES ('integrity-check', 1)")
    except Exception:  # noqa: BLE001 - any failure means "not consistent"
        return False
    return True
