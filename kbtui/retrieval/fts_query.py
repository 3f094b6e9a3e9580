"""Turn untrusted query text into the terms the lexical arm searches.

Nothing the user types is ever FTS5 syntax: the query is cut into word terms
(``\\w+`` runs) and CJK runs, and :mod:`store.fts_match` quotes each term and
joins them. So ``"x``, ``(a OR``, ``NEAR(a b``, ``*a``, ``-a`` and
``col:foo`` are all literal words to look for.

Words go to the Porter-stemmed ``chunk_fts`` table. Runs of Han, kana or
Hangul (``store.fts_match.CJK_CHARACTERS``) go to the trigram table
``chunk_cjk`` (unicode61 keeps a whole CJK run as one token, so 東京 would
never match inside 東京都に住んでいます). Emoji and other symbols are not
searchable lexically: no tokenizer keeps them, so a query made only of them
has no lexical terms.

A word said several times in the query counts several times in BM25 (its
query-term frequency, capped at ``MAX_REPEATS``): the lexical arm repeats
its phrase in the OR. Measured on CISI, whose queries are paragraphs,
nDCG@10 is about .07 lower when repeats are ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from store.fts_match import CJK_CHARACTERS, any_of

MAX_TERMS = 32  # content terms (words that are not stop words, and CJK runs); as many stop words again
MAX_TERM_CHARS = 64
MAX_QUERY_CHARS = 4_096  # the part of a query that is looked at (for terms and for the embedder)
MAX_REPEATS = 3  # query-term frequency cap: "titles ... titles ... titles ... titles" counts three times

STOP_WORDS = frozenset(
    (
        # English (the usual IR list)
        "a about above after again against all am an and any are as at be because been before being "
        "below between both but by can could did do does doing down during each few for from further "
        "had has have having he her here hers herself him himself his how i if in into is it its itself "
        "just me more most my myself no nor not now of off on once only or other our ours ourselves out "
        "over own same she should so some such than that the their theirs them themselves then there "
        "these they this those through to too under until up very was we were what when where which "
        "while who whom why will with would you your yours yourself yourselves "
        # German
        "aber als am an auch auf aus bei bin bis da damit dann das dass dem den der des die dies doch "
        "dort du durch ein eine einem einen einer eines er es für hat hatte ich ihr im in ist ja kann "
        "mit nach nicht noch nur ob oder sich sie sind so über um und uns von vor war was welche wenn "
        "wer wie wir wird wo zu zum zur"
    ).split()
)

_CJK_RUN = re.compile(f"[{CJK_CHARACTERS}]+")
_WORD = re.compile(f"(?:(?![{CJK_CHARACTERS}])\\w)+", re.UNICODE)


@dataclass(frozen=True)
class QueryTerms:
    """The searchable parts of a query, lower-cased, de-duplicated, in query order."""

    words: tuple[str, ...]
    cjk_runs: tuple[str, ...]
    # How often each word occurs in the query (same order as ``words``, at
    # most MAX_REPEATS); empty means once each.
    repeats: tuple[int, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.words and not self.cjk_runs

    def repeats_of(self) -> dict[str, int]:
        """Word -> its query-term frequency (1 when not recorded)."""
        return {w: (self.repeats[i] if i < len(self.repeats) else 1) for i, w in enumerate(self.words)}


def parse_query(query: str) -> QueryTerms:
    """Split ``query`` (its first ``MAX_QUERY_CHARS``) into word terms and CJK
    runs: at most ``MAX_TERMS`` content terms plus as many stop words, each
    word with how often it occurs (up to ``MAX_REPEATS``)."""
    counts: dict[str, int] = {}
    runs: list[str] = []
    content = stop = 0
    lowered = query[:MAX_QUERY_CHARS].lower()
    for match in re.finditer(f"{_CJK_RUN.pattern}|{_WORD.pattern}", lowered):
        term = match.group(0)[:MAX_TERM_CHARS]
        if _CJK_RUN.fullmatch(term):
            if term not in runs and content < MAX_TERMS:
                runs.append(term)
                content += 1
        elif term in counts:
            counts[term] = min(counts[term] + 1, MAX_REPEATS)
        elif term in STOP_WORDS:
            if stop < MAX_TERMS:
                counts[term] = 1
                stop += 1
        elif content < MAX_TERMS:
            counts[term] = 1
            content += 1
    return QueryTerms(tuple(counts), tuple(runs), tuple(counts.values()))


def fts_match_expression(query: str) -> str | None:
    """The OR-of-words expression for ``query`` (None when it has no word term)."""
    return any_of(parse_query(query).words)


def highlight_terms(query: str) -> tuple[str, ...]:
    """Lower-cased terms to mark in a snippet: the words and CJK runs of the query."""
    terms = parse_query(query)
    return terms.words + terms.cjk_runs
