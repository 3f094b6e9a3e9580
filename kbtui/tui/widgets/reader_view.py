"""A whole document, wrapped to the width, drawn line by line (toolong's way).

Only the rows on screen are rendered (Textual's line API over a
:class:`ScrollView`), so a document of megabytes scrolls as fast as a page.
Positions are character offsets into the text: the text is made safe to show
once, character for character (control, BiDi and zero-width characters
become ``�``, a tab a space), so offsets of chunks, headings and matches stay
valid on screen.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Sequence
from typing import ClassVar

from rich.cells import get_character_cell_size
from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

MATCH_STYLE = Style(bold=True, reverse=True)
CURRENT_MATCH_STYLE = Style(bold=True, color="black", bgcolor="yellow")
HEADING_STYLE = Style(bold=True, underline=True)
_UNSAFE = {"Cc", "Cf", "Cs", "Co", "Zl", "Zp"}
# Rows kept above a target when jumping to it: the context just before it shows.
CONTEXT_ROWS = 2


def safe_for_screen(text: str) -> str:
    """``text`` with each character that could move the cursor, reorder or hide
    text replaced one for one (so offsets still hold); line breaks kept."""
    if text.isascii() and text.isprintable():
        return text
    out = []
    for char in text:
        if char == "\n":
            out.append(char)
        elif char == "\t":
            out.append(" ")
        elif unicodedata.category(char) in _UNSAFE:
            out.append("\N{REPLACEMENT CHARACTER}")
        else:
            out.append(char)
    return "".join(out)


def wrap_rows(text: str, width: int) -> list[tuple[int, int]]:
    """(start, end) offsets of each screen row: lines broken at the last space
    that fits ``width`` cells (or mid-word when none does)."""
    width = max(8, width)
    rows: list[tuple[int, int]] = []
    position = 0
    for line in text.split("\n"):
        end_of_line = position + len(line)
        if len(line) <= width and line.isascii():
            rows.append((position, end_of_line))
        else:
            start = position
            while start < end_of_line:
                cut = _fit(text, start, end_of_line, width)
                if cut < end_of_line:
                    space = text.rfind(" ", start + 1, cut + 1)
                    if space > start:
                        cut = space + 1
                rows.append((start, cut))
                start = cut
            if not line:
                rows.append((position, position))
        position = end_of_line + 1
    return rows


def _fit(text: str, start: int, end: int, width: int) -> int:
    """The first offset after ``start`` that no longer fits ``width`` cells."""
    if text[start:end].isascii():
        return min(end, start + width)
    used = 0
    for index in range(start, end):
        used += get_character_cell_size(text[index])
        if used > width:
            return max(index, start + 1)
    return end


class ReaderView(ScrollView, can_focus=True):
    """The text, its query matches highlighted (the current one stands out), heading lines bold."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "scroll_down", "Down", show=False),
        Binding("k", "scroll_up", "Up", show=False),
        Binding("ctrl+d,space", "page_down", "Page down", show=False),
        Binding("ctrl+u", "page_up", "Page up", show=False),
    ]

    DEFAULT_CSS = """
    ReaderView { height: 1fr; padding: 0 1; scrollbar-size-vertical: 1; scrollbar-gutter: stable; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.text = ""
        self.rows: list[tuple[int, int]] = []
        self._row_starts: list[int] = []
        self.matches: list[tuple[int, int]] = []
        self._match_starts: list[int] = []
        self.current_match: int | None = None
        self._headings: list[tuple[int, int]] = []  # (start, end) of heading lines
        self._heading_starts: list[int] = []
        self._wrapped_width = 0

    # ------------------------------------------------------------ content

    def show(self, text: str, *, headings: Sequence[int] = (), pattern: re.Pattern[str] | None = None) -> None:
        """Show ``text`` (made safe here) with heading lines starting at ``headings``
        and every match of ``pattern`` highlighted."""
        self.text = safe_for_screen(text)
        self.matches = [m.span() for m in pattern.finditer(self.text)] if pattern is not None else []
        self._match_starts = [start for start, _ in self.matches]
        self.current_match = None
        spans = []
        for start in sorted(headings):
            end = self.text.find("\n", start)
            spans.append((start, len(self.text) if end < 0 else end))
        self._headings = spans
        self._heading_starts = [start for start, _ in spans]
        self._wrapped_width = 0
        self._rewrap()

    def _content_width(self) -> int:
        return max(8, self.scrollable_content_region.width or (self.app.size.width - 4))

    def _rewrap(self) -> None:
        width = self._content_width()
        if width == self._wrapped_width and self.rows:
            return
        top = self.offset_at_row(self.scroll_offset.y) if self.rows else 0
        self._wrapped_width = width
        self.rows = wrap_rows(self.text, width)
        self._row_starts = [start for start, _ in self.rows]
        self.virtual_size = Size(width, len(self.rows))
        if top:
            # Keep the same text at the top; after the layout knows the new height.
            self.call_after_refresh(self.scroll_to, y=self.row_of(top), animate=False, immediate=True)
        self.refresh()

    def on_resize(self) -> None:
        if self.text:
            self._rewrap()

    # ------------------------------------------------------------ positions

    def row_of(self, offset: int) -> int:
        """The screen row holding character ``offset``."""
        if not self.rows:
            return 0
        return max(0, bisect.bisect_right(self._row_starts, offset) - 1)

    def offset_at_row(self, row: int) -> int:
        if not self.rows:
            return 0
        return self.rows[min(max(0, row), len(self.rows) - 1)][0]

    @property
    def top_offset(self) -> int:
        """The character offset at the top of the view."""
        return self.offset_at_row(self.scroll_offset.y)

    def jump_to(self, offset: int) -> None:
        """Scroll so ``offset`` is near the top, with a little context above it."""
        self._rewrap()
        self.scroll_to(y=max(0, self.row_of(offset) - CONTEXT_ROWS), animate=False, immediate=True)

    def select_match(self, index: int) -> tuple[int, int] | None:
        """Make match ``index`` (wrapping around) the current one and bring it into view."""
        if not self.matches:
            return None
        self.current_match = index % len(self.matches)
        start, _ = self.matches[self.current_match]
        row = self.row_of(start)
        top, height = self.scroll_offset.y, self.scrollable_content_region.height
        if not top + CONTEXT_ROWS <= row < top + max(1, height - CONTEXT_ROWS):
            self.jump_to(start)
        self.refresh()
        return self.current_match + 1, len(self.matches)

    def first_match_from(self, offset: int) -> int | None:
        """The index of the first match at or after ``offset`` (None: no match)."""
        if not self.matches:
            return None
        return bisect.bisect_left(self._match_starts, offset) % len(self.matches)

    def next_match(self, step: int) -> tuple[int, int] | None:
        """The next (``step`` 1) or previous (-1) match from the current one or the view."""
        if not self.matches:
            return None
        if self.current_match is None:
            first = self.first_match_from(self.top_offset)
            if first is None:
                return None
            return self.select_match(first if step > 0 else first - 1)
        return self.select_match(self.current_match + step)

    def heading_from(self, step: int) -> int | None:
        """The offset of the next (1) or previous (-1) heading line from the top of the view."""
        if not self._heading_starts:
            return None
        top = self.top_offset
        if step > 0:
            index = bisect.bisect_right(self._heading_starts, top + 1)
            return self._heading_starts[index] if index < len(self._heading_starts) else None
        index = bisect.bisect_left(self._heading_starts, top) - 1
        return self._heading_starts[index] if index >= 0 else None

    # ------------------------------------------------------------ drawing

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        style = self.rich_style
        index = scroll_y + y
        if index >= len(self.rows):
            return Strip.blank(width, style)
        start, end = self.rows[index]
        line = Text(self.text[start:end], no_wrap=True, end="")
        line.stylize(style)
        heading = bisect.bisect_right(self._heading_starts, start) - 1
        if heading >= 0 and self._headings[heading][1] >= end > self._headings[heading][0]:
            line.stylize(HEADING_STYLE)
        first = max(0, bisect.bisect_left(self._match_starts, start) - 1)
        for number in range(first, len(self.matches)):
            m_start, m_end = self.matches[number]
            if m_start >= end:
                break
            if m_end <= start:
                continue
            line.stylize(CURRENT_MATCH_STYLE if number == self.current_match else MATCH_STYLE,
                         max(0, m_start - start), min(end, m_end) - start)
        segments = list(line.render(self.app.console))
        strip = Strip(segments).crop_extend(scroll_x, scroll_x + width, style)
        return strip.apply_offsets(scroll_x, index)

