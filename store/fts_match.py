"""FTS5 MATCH syntax, built from terms only, and the CJK range the trigram
table indexes: beside the SQL of :mod:`store.fts` and the schema of
:mod:`store.migrations.m0003_search_tokenizers`, which both use them.

A term is a run of word characters or a run of CJK characters (query parsing
cuts text into such runs), so it never holds a double quote: quoted, it is one
FTS5 string. Operators are only ever joined in here, which is why ``"x``,
``(a OR``, ``NEAR(a b``, ``*a``, ``-a`` and ``col:foo`` in a query are
literal words to look for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# Han, CJK symbols and kana (U+2E80-U+9FFF), Hangul syllables, compatibility
# ideographs and the supplementary ideograph planes, as the body of a
# character class. The trigram table indexes the chunks holding any of them
# (its triggers carry CJK_GLOB, so changing the range needs a migration that
# recreates them); query parsing sends runs of them to that table.
CJK_CHARACTERS = "\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003ffff"
CJK_GLOB = f"*[{CJK_CHARACTERS}]*"


def quoted(term: str) -> str:
    """One FTS5 string: ``term`` never holds a double quote (a word or a CJK run)."""
    return f'"{term}"'


def any_of(terms: Sequence[str]) -> str | None:
    """An OR of quoted terms (partial matches still rank), or None for no terms."""
    return " OR ".join(quoted(t) for t in terms) or None


def weighted_any_of(terms: Sequence[str], repeats: Mapping[str, int]) -> str | None:
    """An OR of quoted terms in which a term is repeated ``repeats[term]``
    times (FTS5 bm25 adds one contribution per phrase: its query-term frequency)."""
    phrases = [quoted(t) for t in terms for _ in range(max(1, repeats.get(t, 1)))]
    return " OR ".join(phrases) or None


def all_of(terms: Sequence[str]) -> str | None:
    """An AND of quoted terms, or None for no terms."""
    return " AND ".join(quoted(t) for t in terms) or None
