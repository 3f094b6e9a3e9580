"""Short highlighted snippets of a hit's text around the query's terms."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kbtui.retrieval.fts_query import parse_query

SNIPPET_CHARS = 200


@dataclass(frozen=True)
class Segment:
    text: str
    highlighted: bool


def snippet(text: str, query: str, width: int = SNIPPET_CHARS) -> list[Segment]:
    """About ``width`` characters of ``text`` (whitespace collapsed) centred on
    the first query term found, with every term occurrence marked.

    Words match at a word start (so "bearing" marks "bearings"); CJK runs
    match anywhere. With no term found, the text's beginning.
    """
    flat = " ".join(text.split())
    terms = parse_query(query)
    patterns = [rf"\b{re.escape(w)}\w*" for w in terms.words if len(w) > 1 or w.isdigit()]
    patterns += [re.escape(run) for run in terms.cjk_runs]
    matcher = re.compile("|".join(patterns), re.IGNORECASE) if patterns else None
    first = matcher.search(flat) if matcher else None
    start = 0 if first is None else max(0, first.start() - width // 3)
    if first is not None and start:
        space = flat.find(" ", start)
        start = space + 1 if 0 <= space < first.start() else start
    window = flat[start : start + width]
    segments: list[Segment] = []
    if start:
        segments.append(Segment("…", False))
    position = 0
    for match in matcher.finditer(window) if matcher else ():
        if match.start() > position:
            segments.append(Segment(window[position : match.start()], False))
        segments.append(Segment(match.group(0), True))
        position = match.end()
    if position < len(window):
        segments.append(Segment(window[position:], False))
    if start + width < len(flat):
        segments.append(Segment("…", False))
    return segments
