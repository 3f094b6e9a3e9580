"""FTS5's BM25, term by term, in Python: for completing a ranking that FTS5
scored over only some of the query's words.

FTS5's ``bm25()`` adds one contribution per query phrase:
``idf * f * (k1 + 1) / (f + k1 * (1 - b + b * D / avgdl))`` where ``f`` sums
the column weight of every occurrence of the phrase in the row, ``D`` is the
row's token count over all columns, ``idf = ln((N - n + 0.5) / (n + 0.5))``
(at least 1e-6) over ``N`` rows of which ``n`` hold the phrase. So a word
left out of the FTS5 query (too common to score every row holding it) can be
added afterwards to the rows that matter: counted here in their text with
the same tokenizer (``unicode61 remove_diacritics 2`` then Porter), using
FTS5's own ``D``, ``N``, ``avgdl`` and ``n``. A word adds at most
``idf * (k1 + 1)`` to any row: :func:`upper_bound`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from store.tokens import stemmed, surface_tokens, tokens

K1 = 1.2
B = 0.75
MIN_IDF = 1e-6


@dataclass(frozen=True)
class CorpusStatistics:
    rows: int  # N
    average_tokens: float  # avgdl over all columns


def idf(rows: int, holding: int) -> float:
    """FTS5's idf of a phrase held by ``holding`` of ``rows`` rows."""
    # ``holding`` above ``rows`` happens when the two were read before and after
    # a commit: such a word is in (nearly) every row.
    value = math.log((rows - holding + 0.5) / (holding + 0.5)) if rows > 0 and holding < rows else 0.0
    return value if value > 0 else MIN_IDF


def upper_bound(word_idf: float, repeats: int = 1) -> float:
    """The most one query word (said ``repeats`` times) can add to a row's score."""
    return repeats * word_idf * (K1 + 1.0)


def phrase_tokens(word: str) -> tuple[str, ...]:
    """The token sequence a quoted query word becomes (``pg_basebackup`` is two)."""
    return tuple(tokens(word))


def weighted_frequency(columns: Sequence[list[str]], phrase: tuple[str, ...], weights: Sequence[float]) -> float:
    """``f``: every occurrence of ``phrase`` in a tokenized column counts that column's weight."""
    if not phrase:
        return 0.0
    total = 0.0
    width = len(phrase)
    for found, weight in zip(columns, weights, strict=True):
        if not found:
            continue
        if width == 1:
            total += weight * found.count(phrase[0])
        else:
            total += weight * sum(1 for i in range(len(found) - width + 1) if tuple(found[i : i + width]) == phrase)
    return total


def _column_tokens(text: str, prefixes: frozenset[str] | None) -> list[str]:
    """A column's tokens; with ``prefixes``, only tokens that could stem to a
    query word are stemmed (Porter keeps a word's first two letters), the
    rest stand as an inert placeholder (counts and positions are kept)."""
    if not text:
        return []
    surface = surface_tokens(text)
    if prefixes is None:
        return [stemmed(t) for t in surface]
    return [stemmed(t) if t[:2] in prefixes or len(t) <= 3 else "" for t in surface]


def contribution(frequency: float, word_idf: float, row_tokens: int, stats: CorpusStatistics) -> float:
    """One phrase's part of a row's BM25 score."""
    if frequency <= 0:
        return 0.0
    norm = K1 * (1.0 - B + B * row_tokens / stats.average_tokens) if stats.average_tokens > 0 else K1
    return word_idf * frequency * (K1 + 1.0) / (frequency + norm)


def completed_scores(
    partial: Sequence[tuple[int, float]],
    texts: Mapping[int, Sequence[str]],
    row_tokens: Mapping[int, int],
    words: Mapping[str, tuple[float, int]],
    weights: Sequence[float],
    stats: CorpusStatistics,
) -> list[tuple[int, float]]:
    """``partial`` (row id, BM25 over some words) plus each of ``words``
    (word -> (idf, repeats)) counted in the row's column ``texts``; best first."""
    phrases = {word: phrase_tokens(word) for word in words}
    wanted = [t for phrase in phrases.values() for t in phrase]
    # Porter changes only a word's ending: a token can stem to a wanted one only if they share two letters.
    prefixes = frozenset(t[:2] for t in wanted) if all(len(t) >= 2 for t in wanted) else None
    completed = []
    for position, (row_id, score) in enumerate(partial):
        columns = texts.get(row_id)
        total = score
        if columns is not None:
            tokenized = [_column_tokens(text, prefixes) for text in columns]
            size = row_tokens.get(row_id, 0)
            for word, (word_idf, repeats) in words.items():
                frequency = weighted_frequency(tokenized, phrases[word], weights)
                total += repeats * contribution(frequency, word_idf, size, stats)
        completed.append((total, position, row_id))
    completed.sort(key=lambda item: (-item[0], item[1]))
    return [(row_id, total) for total, _, row_id in completed]
