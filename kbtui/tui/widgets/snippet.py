"""A one-line snippet of a chunk around the query's words, with the words highlighted."""

from __future__ import annotations

import re

from rich.text import Text

from kbtui.printable import printable

HIGHLIGHT_STYLE = "bold reverse"
_WORD = re.compile(r"\w+", re.UNICODE)


def query_terms(query: str) -> list[str]:
    """The words worth highlighting: distinct, longest first (so ``tls`` inside
    ``tlsv1`` does not win over the longer word)."""
    words = {w.casefold() for w in _WORD.findall(query) if len(w) > 1 or not w.isascii()}
    return sorted(words, key=lambda w: (-len(w), w))


def highlighted_snippet(text: str, query: str, width: int) -> Text:
    """At most ``width`` characters of ``text`` (whitespace collapsed), starting a
    little before the first query word, with every query word highlighted."""
    flat = printable(" ".join(text.split()))
    terms = query_terms(query)
    pattern = re.compile("|".join(re.escape(t) for t in terms), re.IGNORECASE) if terms else None
    start = 0
    if pattern is not None:
        first = pattern.search(flat)
        if first is not None and first.start() > width // 3:
            # Begin at a word boundary a third of the width before the match.
            start = flat.rfind(" ", 0, first.start() - width // 3) + 1
    window = flat[start : start + width]
    prefix = "…" if start > 0 else ""
    if prefix:
        window = window[: max(0, width - 1)]
    snippet = Text(prefix + window)
    if pattern is not None:
        for match in pattern.finditer(window):
            snippet.stylize(HIGHLIGHT_STYLE, match.start() + len(prefix), match.end() + len(prefix))
    return snippet
