"""The lexical index's ``tsvector`` columns, from the tokens SQLite's FTS5 makes
(:mod:`store.tokens`), so that both stores rank with the same terms.
PostgreSQL's own parsers and stemmers differ (Snowball's English stemmer,
stop-word removal, file paths and hyphenated words kept whole), which would
move the lexical arm away from the SQLite figures.

A chunk's four indexed columns become one weighted ``tsvector``: path (A),
heading (B), symbol (C) and body (D), positions running on through the
columns with a gap between two columns so that a phrase never spans them. A
query word becomes a ``tsquery`` phrase of its tokens (``pg_basebackup`` is
``'pg' <-> 'basebackup'``, as FTS5 reads the quoted word).

Limits of ``tsvector`` (counted anyway in the token lengths): positions stop
at 16383 and a lexeme keeps at most 256 of them, so a term's frequency in a
chunk longer than about 16,000 tokens, or said more than 256 times in one, is
undercounted; a token over 2046 bytes is not indexed (no query can name it:
query terms are cut at 64 characters).
"""

from __future__ import annotations

from collections.abc import Sequence

from store.tokens import tokens

# Column weight letters in chunk_fts order: source_path, heading_path, symbol, content.
WEIGHT_LETTERS = ("A", "B", "C", "D")
MAX_POSITION = 16383
MAX_POSITIONS_PER_LEXEME = 256
MAX_LEXEME_BYTES = 2046


def _quoted(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def weighted_tsvector(columns: Sequence[str]) -> tuple[str, list[int]]:
    """The ``tsvector`` text of the four indexed columns (path, heading, symbol,
    body) and each column's token count."""
    positions: dict[str, list[str]] = {}
    counts: list[int] = []
    position = 0
    for text, letter in zip(columns, WEIGHT_LETTERS, strict=True):
        found = tokens(text) if text else []
        counts.append(len(found))
        for token in found:
            position += 1
            if position > MAX_POSITION:
                break
            held = positions.setdefault(token, [])
            if len(held) < MAX_POSITIONS_PER_LEXEME and len(token.encode("utf-8")) <= MAX_LEXEME_BYTES:
                held.append(f"{position}{letter}")
        position += 1  # a gap: no phrase runs from one column into the next
    vector = " ".join(f"{_quoted(lexeme)}:{','.join(held)}" for lexeme, held in positions.items() if held)
    return vector, counts


def phrase(word: str) -> tuple[str, ...]:
    """The lexemes a quoted query word stands for, in order (empty: it matches nothing)."""
    return tuple(tokens(word))


def phrase_query(lexemes: Sequence[str]) -> str:
    """The ``tsquery`` text of a phrase (one lexeme or several in a row)."""
    return " <-> ".join(_quoted(lexeme) for lexeme in lexemes)
