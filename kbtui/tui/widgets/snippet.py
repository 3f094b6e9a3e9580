"""A one-line snippet of a chunk around the words that matched, highlighted
(the same words and window as the CLI: :mod:`kbtui.retrieval.snippets`)."""

from __future__ import annotations

from rich.text import Text

from kbtui.printable import printable
from kbtui.retrieval.snippets import QueryHighlighter, snippet_for

HIGHLIGHT_STYLE = "bold reverse"


def highlighted_snippet(text: str, query: str | QueryHighlighter, width: int) -> Text:
    """At most ``width`` characters of ``text`` (whitespace collapsed) around the
    best match, with every matched word (whole words, stems included, never
    stop words) highlighted."""
    highlighter = query if isinstance(query, QueryHighlighter) else QueryHighlighter.for_query(query)
    snippet = Text()
    # Escaped first, so the escapes count against the width.
    for segment in snippet_for(printable(" ".join(text.split())), highlighter, width):
        snippet.append(segment.text, style=HIGHLIGHT_STYLE if segment.highlighted else "")
    return snippet


def query_terms(query: str) -> list[str]:
    """The query's words worth highlighting (content words, not stop words),
    longest first (the document preview marks these)."""
    words = QueryHighlighter.for_query(query).words
    return sorted(words, key=lambda w: (-len(w), w))
