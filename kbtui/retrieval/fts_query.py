"""Turn untrusted query text into safe FTS5 MATCH expressions.

Nothing the user types is ever FTS5 syntax: the query is cut into word terms
(``\\w+`` runs) and CJK runs, each term is wrapped in double quotes (a term
can never contain one), and terms are joined with OR by this code. So
``"x``, ``(a OR``, ``NEAR(a b``, ``*a``, ``-a`` and ``col:foo`` are all
literal words to look for.

Words go to the Porter-stemmed ``chunk_fts`` table. Runs of Han, kana or
Hangul go to the trigram table ``chunk_cjk`` (unicode61 keeps a whole CJK
run as one token, so 東京 would never match inside 東京都に住んでいます).
Emoji and other symbols are not searchable lexically: no tokenizer keeps
them, so a query made only of them has no lexical terms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_TERMS = 32
MAX_TERM_CHARS = 64

# Must match store.migrations.m0003_search_tokenizers.CJK_GLOB.
CJK_CHARACTERS = "\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003ffff"
_CJK_RUN = re.compile(f"[{CJK_CHARACTERS}]+")
_WORD = re.compile(f"(?:(?![{CJK_CHARACTERS}])\\w)+", re.UNICODE)


@dataclass(frozen=True)
class QueryTerms:
    """The searchable parts of a query, lower-cased, de-duplicated, in query order."""

    words: tuple[str, ...]
    cjk_runs: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not self.words and not self.cjk_runs


def parse_query(query: str) -> QueryTerms:
    """Split ``query`` into word terms and CJK runs (at most ``MAX_TERMS`` in all)."""
    words: list[str] = []
    runs: list[str] = []
    lowered = query.lower()
    for match in re.finditer(f"{_CJK_RUN.pattern}|{_WORD.pattern}", lowered):
        term = match.group(0)[:MAX_TERM_CHARS]
        bucket = runs if _CJK_RUN.fullmatch(term) else words
        if term not in bucket:
            bucket.append(term)
        if len(words) + len(runs) == MAX_TERMS:
            break
    return QueryTerms(tuple(words), tuple(runs))


def quoted(term: str) -> str:
    """One FTS5 string: ``term`` never holds a double quote (``\\w`` or a CJK run)."""
    return f'"{term}"'


def any_of(terms: tuple[str, ...] | list[str]) -> str | None:
    """An OR of quoted terms (partial matches still rank), or None for no terms."""
    return " OR ".join(quoted(t) for t in terms) or None


def all_of(terms: tuple[str, ...] | list[str]) -> str | None:
    """An AND of quoted terms, or None for no terms."""
    return " AND ".join(quoted(t) for t in terms) or None


def fts_match_expression(query: str) -> str | None:
    """The OR-of-words expression for ``query`` (None when it has no word term)."""
    return any_of(parse_query(query).words)


def highlight_terms(query: str) -> tuple[str, ...]:
    """Lower-cased terms to mark in a snippet: the words and CJK runs of the query."""
    terms = parse_query(query)
    return terms.words + terms.cjk_runs
