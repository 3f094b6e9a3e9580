"""Short highlighted snippets of a hit's text around the words that matched.

A word of the text is highlighted when it is one of the query's words or
shares its Porter stem (the stemmer the lexical index uses, so "rotating"
marks "rotate" and "rotation", as the search matched them): whole words
only, never part of one ("to" does not mark "into" or "stop"), and never a
stop word. CJK runs match anywhere (the trigram index matches substrings).

The window is the stretch of ``width`` characters holding the most distinct
matched words (the first such stretch), opened a little before its first
match and cut at word boundaries on both sides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kbtui.retrieval.fts_query import _CJK_RUN, _WORD, STOP_WORDS, parse_query
from store.tokens import stem

SNIPPET_CHARS = 200
ELLIPSIS = "…"
_LEAD_SHARE = 4  # the window opens about width / 4 before its first match

@dataclass(frozen=True)
class Segment:
    text: str
    highlighted: bool


@dataclass(frozen=True)
class QueryHighlighter:
    """What to highlight for one query: its content words, their stems, its CJK runs."""

    words: frozenset[str]
    stems: frozenset[str]
    cjk_runs: tuple[str, ...]

    @classmethod
    def for_query(cls, query: str) -> QueryHighlighter:
        terms = parse_query(query)
        words = frozenset(w for w in terms.words if w not in STOP_WORDS and (len(w) > 1 or w.isdigit()))
        return cls(words, frozenset(stem(w) for w in words), terms.cjk_runs)

    def key_of(self, token: str) -> str | None:
        """The matched term a text token counts as (its stem), or None."""
        lowered = token.lower()
        if lowered in STOP_WORDS:
            return None
        if lowered in self.words:
            return stem(lowered)
        stemmed = stem(lowered)
        return stemmed if stemmed in self.stems else None

    def matches(self, text: str) -> list[tuple[int, int, str]]:
        """(start, end, term key) of every matched word or CJK run in ``text``, in order."""
        found = [
            (m.start(), m.end(), key)
            for m in _WORD.finditer(text)
            if (key := self.key_of(m.group(0))) is not None
        ]
        if self.cjk_runs:
            for run in _CJK_RUN.finditer(text):
                lowered = run.group(0)
                for term in self.cjk_runs:
                    for hit in re.finditer(re.escape(term), lowered):
                        found.append((run.start() + hit.start(), run.start() + hit.end(), term))
            found.sort()
        return found


def snippet(text: str, query: str, width: int = SNIPPET_CHARS) -> list[Segment]:
    """About ``width`` characters of ``text`` (whitespace collapsed) around the
    best match, with every matched word highlighted (see the module docstring).
    With no match, the text's beginning."""
    return snippet_for(text, QueryHighlighter.for_query(query), width)


def snippet_for(text: str, highlighter: QueryHighlighter, width: int = SNIPPET_CHARS) -> list[Segment]:
    """:func:`snippet` with the query already prepared (one per result list)."""
    flat = " ".join(text.split())
    width = max(2, width)
    matches = highlighter.matches(flat)
    start = _window_start(flat, matches, width)
    room = width - (1 if start else 0)
    end = _window_end(flat, start, room)
    if end < len(flat):
        end = _window_end(flat, start, room - 1)  # leave room for the closing ellipsis
    segments: list[Segment] = [Segment(ELLIPSIS, False)] if start else []
    position = start
    for match_start, match_end, _ in matches:
        if match_start < start or match_end > end:
            continue
        if match_start > position:
            segments.append(Segment(flat[position:match_start], False))
        segments.append(Segment(flat[match_start:match_end], True))
        position = match_end
    if end > position:
        segments.append(Segment(flat[position:end], False))
    if end < len(flat):
        segments.append(Segment(ELLIPSIS, False))
    return segments


def _window_start(flat: str, matches: list[tuple[int, int, str]], width: int) -> int:
    """Where the window opens: before the stretch with the most distinct matched terms."""
    if not matches or len(flat) <= width:
        return 0
    span = width - width // _LEAD_SHARE
    best_first, best_count = 0, 0
    for i, (first_start, _, _) in enumerate(matches):
        distinct = {key for s, e, key in matches[i:] if e - first_start <= span}
        if len(distinct) > best_count:
            best_first, best_count = first_start, len(distinct)
    start = max(0, best_first - width // _LEAD_SHARE)
    start = min(start, max(0, len(flat) - width))
    if start > 0 and not flat[start - 1].isspace():
        # Open at the next word start (never inside a word), and not past the match.
        space = flat.find(" ", start, best_first)
        start = space + 1 if space >= 0 else best_first
    return start


def _window_end(flat: str, start: int, width: int) -> int:
    """The window's end: at most ``width`` characters on, cut after a whole word."""
    end = start + width
    if end >= len(flat):
        return len(flat)
    if flat[end].isspace() or flat[end - 1].isspace():
        return end
    space = flat.rfind(" ", start, end)
    return space if space > start else end  # one word longer than the window: cut it
