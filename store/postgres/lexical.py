"""The lexical arm on PostgreSQL: :mod:`store.fts` with full-text search and BM25.

Same functions, inputs and results as :mod:`store.fts` (terms from
``kbtui.retrieval.fts_query``, never raw user text; chunk ids and scores,
higher is better), the connection first. Scope (collection, optional
document, served documents only) is part of every statement.

Ranking is FTS5's BM25, computed in the query from statistics the store
keeps rather than ``ts_rank`` (which is not BM25 and would move the arm away
from the SQLite figures):

- a row's weighted frequency ``f`` of a phrase is ``ts_rank_cd`` of that
  phrase alone with the column weights (path 4, heading 3, symbol 3, body 1)
  scaled into its ``{D, C, B, A}`` array: for one phrase ``ts_rank_cd`` with no
  normalisation adds exactly the weight of each occurrence's column;
- ``D`` is the row's ``token_count``, ``N`` and ``avgdl`` come from
  ``lexical_total`` and a lexeme's ``n`` from ``lexeme_stat`` (both kept by
  triggers on ``chunk``); a phrase of several lexemes is counted with the
  index;
- ``idf = ln((N - n + 0.5) / (n + 0.5))``, at least 1e-6, with k1 = 1.2 and
  b = 0.75, as FTS5 does.

So :func:`ranked_matches` returns the same rows and scores as
``store.fts.ranked_matches`` on the same chunks. CJK runs (FTS5's trigram
table in SQLite) are matched as substrings through a pg_trgm index over the
chunks that hold CJK text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

import psycopg
from psycopg import sql

from store.fts import COLUMN_WEIGHTS, OVERALL_DEPTH_FACTOR, OVERALL_DEPTH_MIN
from store.fts_match import CJK_CHARACTERS
from store.models import SERVED_DOCUMENT_SQL
from store.postgres import tokens

K1 = 1.2
B = 0.75
MIN_IDF = 1e-6
# ts_rank_cd takes weights of at most 1, in the order D, C, B, A (body, symbol, heading, path).
_WEIGHT_SCALE = max(COLUMN_WEIGHTS)
_RANK_WEIGHTS = "{" + ",".join(repr(w / _WEIGHT_SCALE) for w in reversed(COLUMN_WEIGHTS)) + "}"
_CJK = re.compile(f"[{CJK_CHARACTERS}]")
_SCOPE = f"c.collection_id = %s AND d.collection_id = %s AND {SERVED_DOCUMENT_SQL}"


def indexed_columns(source_path: str, heading_path: str, symbol: str, content: str) -> tuple[str, list[int], bool]:
    """What a chunk row carries for the lexical index: its weighted ``tsvector``
    text, the token count of each column, and whether its text holds CJK."""
    vector, counts = tokens.weighted_tsvector((source_path, heading_path, symbol, content))
    return vector, counts, _CJK.search(content) is not None


def _scope(collection_id: str, document_id: str | None) -> tuple[str, list[object]]:
    where = _SCOPE
    params: list[object] = [collection_id, collection_id]
    if document_id is not None:
        where += " AND c.document_id = %s"
        params.append(document_id)
    return where, params


def _phrases(words: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Each word's lexemes; words that make no token (nothing to match) are left out."""
    return {word: found for word in words if (found := tokens.phrase(word))}


def _any_of(phrases: Iterable[tuple[str, ...]]) -> str:
    return " | ".join(f"({tokens.phrase_query(p)})" for p in phrases)


def indexed_chunk_count(conn: psycopg.Connection) -> int:
    """Roughly how many chunks are indexed (the chunk id high-water mark)."""
    row = conn.execute("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM chunk_id_seq").fetchone()
    return int(row[0]) if row else 0


def term_row_counts(conn: psycopg.Connection, words: Sequence[str], cap: int, *, generation: int) -> dict[str, int]:
    """For each word, the number of chunks (all collections) holding it, counted
    only up to ``cap``. ``generation`` is accepted for ``store.fts``'s
    signature: the counts here are the store's own, always current."""
    del generation
    counts = dict.fromkeys(words, 0)
    exact = _holding(conn, _phrases(words), cap)
    counts.update({word: min(n, cap) for word, n in exact.items()})
    return counts


def _holding(conn: psycopg.Connection, phrases: Mapping[str, tuple[str, ...]], cap: int | None) -> dict[str, int]:
    """How many chunks hold each phrase: a lexeme's count is kept in
    ``lexeme_stat``; a phrase of several is counted with the index (up to ``cap``)."""
    single = {word: p[0] for word, p in phrases.items() if len(p) == 1}
    found: dict[str, int] = {}
    if single:
        rows = conn.execute(
            "SELECT lexeme, chunks FROM lexeme_stat WHERE lexeme = ANY(%s)", (list(set(single.values())),)
        ).fetchall()
        by_lexeme = {lexeme: int(n) for lexeme, n in rows}
        found.update({word: by_lexeme.get(lexeme, 0) for word, lexeme in single.items()})
    for word, p in phrases.items():
        if len(p) > 1:
            limit = "" if cap is None else f" LIMIT {int(cap)}"
            row = conn.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM chunk WHERE search_vector @@ %s::tsquery{limit}) AS held",
                (tokens.phrase_query(p),),
            ).fetchone()
            found[word] = int(row[0]) if row else 0
    return found


def bm25_statistics(conn: psycopg.Connection) -> tuple[int, float]:
    """The row count and the average tokens per row over all columns (BM25's ``N`` and ``avgdl``)."""
    row = conn.execute("SELECT chunks, tokens FROM lexical_total").fetchone()
    if row is None or row[0] <= 0:
        return 0, 0.0
    return int(row[0]), int(row[1]) / int(row[0])


def _float(value: float) -> sql.Composable:
    """A double precision constant (a bare literal like 0.75 would be numeric: slow arithmetic)."""
    return sql.SQL("{}::float8").format(sql.Literal(repr(float(value))))


def _idf(rows: int, holding: int) -> float:
    # ``holding`` above ``rows`` happens when the two were read before and after a commit.
    value = math.log((rows - holding + 0.5) / (holding + 0.5)) if rows > 0 and holding < rows else 0.0
    return value if value > 0 else MIN_IDF


def ranked_matches(
    conn: psycopg.Connection,
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
    said = dict(zip(words, repeats, strict=False))
    phrases = _phrases(words)
    if not phrases:
        return []
    rows, average = bm25_statistics(conn)
    holding = _holding(conn, phrases, None)
    frequencies: list[sql.Composable] = []
    terms: list[sql.Composable] = []
    for i, (word, p) in enumerate(phrases.items()):
        weight = max(1, said.get(word, 1)) * _idf(rows, holding.get(word, 0)) * (K1 + 1.0)
        frequencies.append(
            sql.SQL("{scale} * ts_rank_cd({weights}::real[], c.search_vector, {query}::tsquery, 0) AS {name}").format(
                scale=_float(_WEIGHT_SCALE),
                weights=sql.Literal(_RANK_WEIGHTS),
                query=sql.Literal(tokens.phrase_query(p)),
                name=sql.Identifier(f"f{i}"),
            )
        )
        terms.append(sql.SQL("{weight} * {f} / ({f} + norm)").format(weight=_float(weight), f=sql.Identifier(f"f{i}")))
    # k1 * (1 - b + b * D / avgdl), as a + c * D.
    norm = sql.SQL("{a} + {c} * c.token_count").format(
        a=_float(K1 * (1.0 - B) if average > 0 else K1), c=_float(K1 * B / average if average > 0 else 0.0)
    )
    if document_id is None:
        found = _best_overall_in_scope(conn, phrases, terms, frequencies, norm, collection_id, limit)
        if found is not None:
            return found
    where, params = _scope(collection_id, document_id)
    statement = _ranking(
        terms, frequencies, norm,
        sql.SQL("FROM chunk AS c JOIN document AS d ON d.id = c.document_id WHERE c.search_vector @@ %s::tsquery AND ")
        + sql.SQL(where),
    )
    found = conn.execute(statement, [_any_of(phrases.values()), *params, limit]).fetchall()
    return [(int(row[0]), float(row[1])) for row in found]


def _ranking(
    terms: Sequence[sql.Composable], frequencies: Sequence[sql.Composable], norm: sql.Composable,
    source: sql.Composable,
) -> sql.Composed:
    # OFFSET 0 keeps the inner query whole: each frequency is computed once per
    # row (pulled up, the planner would call ts_rank_cd in every term that uses it).
    return sql.SQL(
        "SELECT id, {score} AS score FROM (SELECT c.id, {frequencies}, {norm} AS norm {source} OFFSET 0) AS tf "
        "ORDER BY score DESC, id LIMIT %s"
    ).format(
        score=sql.SQL(" + ").join(terms),
        frequencies=sql.SQL(", ").join(frequencies),
        norm=norm,
        source=source,
    )


def _best_overall_in_scope(
    conn: psycopg.Connection, phrases: Mapping[str, tuple[str, ...]], terms: Sequence[sql.Composable],
    frequencies: Sequence[sql.Composable], norm: sql.Composable, collection_id: str, limit: int,
) -> list[tuple[int, float]] | None:
    """As ``store.fts``: the ``limit`` best in-scope matches taken from the best
    of the whole index, ranked without a join per matching row (the document
    join costs about a quarter of the scoped query at a million chunks), or
    None when too few of those are in scope to be sure.

    Exact: an in-scope row missing from the overall best scores no better
    than all of them, so it cannot outrank the in-scope rows found there."""
    depth = max(limit * OVERALL_DEPTH_FACTOR, OVERALL_DEPTH_MIN)
    statement = _ranking(terms, frequencies, norm, sql.SQL("FROM chunk AS c WHERE c.search_vector @@ %s::tsquery"))
    rows = conn.execute(statement, [_any_of(phrases.values()), depth]).fetchall()
    where, params = _scope(collection_id, None)
    kept = {
        int(row[0])
        for row in conn.execute(
            f"SELECT c.id FROM chunk AS c JOIN document AS d ON d.id = c.document_id WHERE c.id = ANY(%s) AND {where}",
            [[int(row[0]) for row in rows], *params],
        ).fetchall()
    }
    found = [(int(row[0]), float(row[1])) for row in rows if int(row[0]) in kept]
    if len(found) >= limit or len(rows) < depth:
        return found[:limit]
    return None


def newest_matches(
    conn: psycopg.Connection,
    words: Sequence[str],
    collection_id: str,
    *,
    document_id: str | None = None,
    limit: int,
    window: int,
) -> list[int]:
    """Served chunks in scope holding all of ``words``, newest first, looking
    at no more than the ``window`` newest chunks that hold them (no ranking)."""
    phrases = _phrases(words)
    if not phrases or len(phrases) < len(set(words)):
        return []  # a word with no token matches nothing, so no chunk holds them all
    query = " & ".join(f"({tokens.phrase_query(p)})" for p in phrases.values())
    where, params = _scope(collection_id, document_id)
    rows = conn.execute(
        "SELECT c.id FROM (SELECT id FROM chunk WHERE search_vector @@ %s::tsquery ORDER BY id DESC LIMIT %s) AS w "
        f"JOIN chunk AS c ON c.id = w.id JOIN document AS d ON d.id = c.document_id WHERE {where} "
        "ORDER BY c.id DESC LIMIT %s",
        [query, window, *params, limit],
    ).fetchall()
    return [int(row[0]) for row in rows]


def _like_pattern(run: str) -> str:
    return "%" + run.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def cjk_ranked_matches(
    conn: psycopg.Connection,
    runs: Sequence[str],
    collection_id: str,
    *,
    document_id: str | None = None,
    limit: int,
) -> list[tuple[int, float]]:
    """Chunks whose text contains any of the CJK ``runs`` (three characters or
    more), through the trigram index, BM25 best first (as FTS5's trigram
    table ranks them: a run's occurrences against the chunk's trigrams)."""
    runs = list(dict.fromkeys(r for r in runs if len(r) >= 3))
    if not runs:
        return []
    total = conn.execute("SELECT cjk_chunks, cjk_chars FROM lexical_total").fetchone()
    chunks, chars = (int(total[0]), int(total[1])) if total else (0, 0)
    average = max(1.0, chars / chunks - 2) if chunks else 1.0
    patterns = [_like_pattern(run) for run in runs]
    counts = conn.execute(
        "SELECT " + ", ".join("count(*) FILTER (WHERE content LIKE %s)" for _ in runs)
        + " FROM chunk WHERE has_cjk AND content LIKE ANY(%s)",
        [*patterns, patterns],
    ).fetchone()
    terms = sql.SQL(" + ").join(
        sql.SQL(
            "{idf} * occurrences.n{i} * {k1_plus_1} / (occurrences.n{i} + {k1} * (1 - {b} + {b} * "
            "greatest(char_length(c.content) - 2, 1) / {average}::float8))"
        ).format(
            idf=sql.Literal(_idf(chunks, int(counts[i]) if counts else 0)), i=sql.SQL(str(i)),
            k1_plus_1=sql.Literal(K1 + 1.0), k1=sql.Literal(K1), b=sql.Literal(B), average=sql.Literal(average),
        )
        for i in range(len(runs))
    )
    occurrences = sql.SQL(", ").join(
        sql.SQL("(char_length(c.content) - char_length(replace(c.content, {run}, ''))) / {width} AS n{i}").format(
            run=sql.Literal(run), width=sql.Literal(len(run)), i=sql.SQL(str(i))
        )
        for i, run in enumerate(runs)
    )
    where, params = _scope(collection_id, document_id)
    statement = sql.SQL(
        "SELECT c.id, {terms} AS score FROM chunk AS c JOIN document AS d ON d.id = c.document_id "
        "CROSS JOIN LATERAL (SELECT {occurrences}) AS occurrences "
        "WHERE c.has_cjk AND c.content LIKE ANY(%s) AND {where} ORDER BY score DESC, c.id LIMIT %s"
    ).format(terms=terms, occurrences=occurrences, where=sql.SQL(where))
    rows = conn.execute(statement, [patterns, *params, limit]).fetchall()
    return [(int(row[0]), float(row[1])) for row in rows]


def cjk_substring_matches(
    conn: psycopg.Connection,
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
    where, params = _scope(collection_id, document_id)
    rows = conn.execute(
        "SELECT c.id FROM (SELECT id FROM chunk WHERE has_cjk ORDER BY id DESC LIMIT %s) AS w "
        f"JOIN chunk AS c ON c.id = w.id JOIN document AS d ON d.id = c.document_id "
        f"WHERE strpos(c.content, %s) > 0 AND {where} ORDER BY c.id DESC LIMIT %s",
        [window, run, *params, limit],
    ).fetchall()
    return [int(row[0]) for row in rows]


def row_token_counts(conn: psycopg.Connection, chunk_ids: Sequence[int]) -> dict[int, int]:
    """Each row's token count over all columns (BM25's ``D``)."""
    rows = conn.execute("SELECT id, token_count FROM chunk WHERE id = ANY(%s)", (list(chunk_ids),)).fetchall()
    return {int(row[0]): int(row[1]) for row in rows}


def column_texts(conn: psycopg.Connection, chunk_ids: Sequence[int]) -> dict[int, tuple[str, str, str, str]]:
    """The indexed columns of each chunk, in ``chunk_fts`` order (no scope:
    callers pass rows already checked to be in scope)."""
    rows = conn.execute(
        "SELECT id, source_path, heading_path, symbol, content FROM chunk WHERE id = ANY(%s)", (list(chunk_ids),)
    ).fetchall()
    return {int(row[0]): (row[1] or "", row[2] or "", row[3] or "", row[4] or "") for row in rows}


def integrity_check(conn: psycopg.Connection) -> bool:
    """The BM25 statistics agree with the chunk rows they were kept from."""
    row = conn.execute(
        "SELECT (SELECT (chunks, tokens) FROM lexical_total) = "
        "(SELECT (count(*), coalesce(sum(token_count), 0)) FROM chunk) "
        "AND (SELECT coalesce(sum(chunks), 0) FROM lexeme_stat) = (SELECT coalesce(sum(length(search_vector)), 0) FROM chunk)"
    ).fetchone()
    return bool(row and row[0])
