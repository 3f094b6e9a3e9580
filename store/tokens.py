"""The lexical index's tokens, made in Python exactly as SQLite's FTS5 makes them
(``porter unicode61 remove_diacritics 2``): lower case, diacritics folded,
runs of letters and digits, Porter stems of tokens of 3 to 64 bytes.

One copy for everything that must agree with the index: the PostgreSQL
store writes its ``tsvector`` columns from these tokens
(:mod:`store.postgres.tokens`), the lexical plan completes BM25 scores with
them (``kbtui.retrieval.bm25``), and snippets highlight by the same stems.
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata

import Stemmer

# FTS5's porter tokenizer stems tokens of 3 to 64 bytes and passes others through.
_PORTER_MIN, _PORTER_MAX = 3, 64
_TOKEN = re.compile(r"[^\W_]+")
_stemmers = threading.local()  # a PyStemmer object must not be shared between threads


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The Porter stem of a lower-case word."""
    stemmer = getattr(_stemmers, "porter", None)
    if stemmer is None:
        stemmer = _stemmers.porter = Stemmer.Stemmer("porter")
    return str(stemmer.stemWord(word))


def surface_tokens(text: str) -> list[str]:
    """``text`` split and folded as ``unicode61 remove_diacritics 2`` does (before stemming)."""
    folded = text.lower()
    if not folded.isascii():
        folded = "".join(ch for ch in unicodedata.normalize("NFKD", folded) if not unicodedata.combining(ch))
    return _TOKEN.findall(folded)


def stemmed(token: str) -> str:
    """A surface token as the index holds it."""
    return stem(token) if _PORTER_MIN <= len(token.encode("utf-8")) <= _PORTER_MAX else token


def tokens(text: str) -> list[str]:
    """``text`` tokenized as ``porter unicode61 remove_diacritics 2`` does."""
    return [stemmed(t) for t in surface_tokens(text)]
