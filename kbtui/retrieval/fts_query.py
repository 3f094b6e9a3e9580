"""Turn untrusted query text into a safe FTS5 MATCH expression."""

from __future__ import annotations

import re

_TERM = re.compile(r"\w+", re.UNICODE)
MAX_TERMS = 32


def fts_match_expression(query: str) -> str | None:
    """An OR of quoted terms, so partial matches still rank and no FTS syntax
    (quotes, parentheses, NEAR, column filters, ``*``, ``-``) is interpreted.

    Returns None when the query has no searchable term.
    """
    terms: list[str] = []
    for term in _TERM.findall(query.lower()):
        if term not in terms:
            terms.append(term)
        if len(terms) == MAX_TERMS:
            break
    if not terms:
        return None
    # \w+ never contains a double quote, so quoting cannot be broken out of.
    return " OR ".join(f'"{term}"' for term in terms)
