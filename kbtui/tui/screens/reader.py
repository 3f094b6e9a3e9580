"""The reader: a document's whole text, opened at the hit, its matches highlighted.

Modelled on toolong: the text is drawn line by line (:class:`ReaderView`),
``n``/``N`` step through the matches, ``]``/``[`` and ``h`` move by heading
(and by symbol in code), and follow mode (``F``) re-reads the document as it
is re-indexed and stays at its end, as ``tail -f`` does for a log.
"""

from __future__ import annotations

import re

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from kbtui.chunking import HEADING_SEPARATOR
from kbtui.node import Node
from kbtui.printable import printable
from kbtui.reads import ReaderMark, ReaderText
from kbtui.retrieval.fts_query import STOP_WORDS
from kbtui.tui.screens.base import KbtuiScreen
from kbtui.tui.widgets.footer import KeysFooter
from kbtui.tui.widgets.hit_list import TRAIL_SEPARATOR
from kbtui.tui.widgets.lists import Choices
from kbtui.tui.widgets.reader_view import ReaderView
from kbtui.tui.widgets.snippet import query_terms

FOLLOW_INTERVAL_S = 2.0


def match_pattern(query: str) -> re.Pattern[str] | None:
    """The query's words as whole words (with a plural or tense ending, as the
    stemmed search matches them), stop words left out; None: nothing to highlight."""
    terms = [t for t in query_terms(query) if t not in STOP_WORDS] or query_terms(query)
    if not terms:
        return None
    # Chinese, Japanese and Korean have no spaces between words: those match anywhere.
    spaced = [t for t in terms if not _UNSPACED.search(t)]
    unspaced = [t for t in terms if _UNSPACED.search(t)]
    parts = []
    if spaced:
        words = "|".join(re.escape(t) for t in spaced)
        parts.append(rf"(?<!\w)(?:{words})(?:s|es|ed|d|ing)?(?!\w)")
    parts += [re.escape(t) for t in unspaced]
    return re.compile("|".join(parts), re.IGNORECASE)


_UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def jump_targets(text: ReaderText) -> list[tuple[int, str]]:
    """(offset, label) of every heading and every code symbol, in document order."""
    targets = {mark.offset: _heading_label(mark) for mark in text.headings}
    for mark in text.chunks:
        if mark.symbol and mark.offset not in targets:
            targets[mark.offset] = f"ƒ {printable(mark.symbol)}"
    return sorted(targets.items())


def _heading_label(mark: ReaderMark) -> str:
    parts = mark.heading_path.split(HEADING_SEPARATOR)
    page = f"  p.{mark.page}" if mark.page is not None else ""
    return "  " * (len(parts) - 1) + printable(parts[-1]) + page


class JumpScreen(ModalScreen[int | None]):
    """Pick a heading or symbol; dismisses with its offset."""

    BINDINGS = [Binding("escape", "cancel", "Back", id="jump.back")]

    DEFAULT_CSS = """
    JumpScreen { align: center middle; }
    JumpScreen > Vertical {
        width: 70; max-width: 100%; height: auto; max-height: 90%; border: thick $primary; background: $surface;
    }
    JumpScreen OptionList { height: auto; max-height: 20; border: none; }
    """

    def __init__(self, targets: list[tuple[int, str]], current: int) -> None:
        super().__init__()
        self.targets = targets
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Choices(*[Option(Text(label), id=str(offset)) for offset, label in self.targets])

    def on_mount(self) -> None:
        self.query_one(Vertical).border_title = "Headings and symbols"
        options = self.query_one(OptionList)
        before = [i for i, (offset, _) in enumerate(self.targets) if offset <= self.current]
        options.highlighted = before[-1] if before else 0
        options.focus()

    @on(OptionList.OptionSelected)
    def chose(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(int(event.option.id or 0))

    def action_cancel(self) -> None:
        self.dismiss(None)


class ReaderScreen(KbtuiScreen):
    """One document's whole text (as indexed), for reading."""

    BINDINGS = [
        Binding("escape", "back", "Back", id="reader.back"),
        Binding("n", "next_match", "Next match", id="reader.next_match"),
        Binding("N", "previous_match", "Prev match", id="reader.previous_match"),
        Binding("right_square_bracket", "next_heading", "Next heading", id="reader.next_heading", key_display="]"),
        Binding("left_square_bracket", "previous_heading", "Prev heading", id="reader.previous_heading",
                key_display="[", show=False),
        Binding("h", "headings", "Headings", id="reader.headings"),
        Binding("F", "toggle_follow", "Follow", id="reader.follow", tooltip="Re-read as it changes; stay at the end"),
        Binding("g", "top", "Top", id="reader.top", show=False),
        Binding("G", "bottom", "End", id="reader.bottom", show=False),
    ]

    DEFAULT_CSS = """
    ReaderScreen #reader-heading { height: 1; padding: 0 1; background: $panel; }
    ReaderScreen #reader-status { height: 1; padding: 0 1; color: $text-muted; }
    """

    class Loaded(Message):
        def __init__(self, text: ReaderText | None, *, refresh: bool) -> None:
            super().__init__()
            self.text = text
            self.refresh = refresh

    def __init__(
        self, node: Node, document_id: str, collection_id: str, *, title: str, query: str = "",
        chunk_id: str | None = None,
    ) -> None:
        super().__init__()
        self.title = "Reader"
        self.node = node
        self.document_id = document_id
        self.collection_id = collection_id
        self.document_title = title
        self.search_query = query
        self.chunk_id = chunk_id
        self.text: ReaderText | None = None
        self.following = False
        self._follow_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text(self.document_title, style="bold", no_wrap=True, overflow="ellipsis"), id="reader-heading")
        yield ReaderView(id="reader-text")
        yield Static(Text("Loading…"), id="reader-status")
        yield KeysFooter()

    def copy_target(self) -> tuple[str, str] | None:
        """``y``/``Y``: this document's id and its path (the title the reader shows when it has none)."""
        path = self.text.source_path if self.text is not None else None
        return self.document_id, path or self.document_title

    def on_mount(self) -> None:
        self.query_one(ReaderView).focus()
        self._load(refresh=False)

    @work(thread=True, exclusive=True, group="reader-load", exit_on_error=False)
    def _load(self, *, refresh: bool) -> None:
        self.post_message(self.Loaded(self.node.reader_text(self.document_id, self.collection_id), refresh=refresh))

    def on_reader_screen_loaded(self, message: Loaded) -> None:
        view = self.query_one(ReaderView)
        if message.text is None:
            self.text = None
            view.show("")
            self._set_status("This document has no text to read: it is not indexed (yet), failed, or was deleted.")
            return
        if message.refresh and self.text is not None and message.text.text == self.text.text:
            return
        self.text = message.text
        view.show(message.text.text, headings=[mark.offset for mark in message.text.headings],
                  pattern=match_pattern(self.search_query))
        # After the layout: until then the new height is unknown and a scroll stops at the top.
        if message.refresh or self.following:
            self.call_after_refresh(view.scroll_end, animate=False, immediate=True)
        else:
            self.call_after_refresh(self._open_at_hit, view, message.text)

    def _open_at_hit(self, view: ReaderView, text: ReaderText) -> None:
        start = text.offset_of(self.chunk_id) if self.chunk_id else None
        if start is None:
            view.jump_to(0)
            self._show_position()
            return
        view.jump_to(start)
        first = view.first_match_from(start)
        end = next((m.offset for m in text.chunks if m.offset > start), len(text.text))
        if first is not None and view.matches[first][0] < end:
            view.select_match(first)  # the hit's own first match, not one further on
        self._show_position()

    # ------------------------------------------------------------ moving

    def action_next_match(self) -> None:
        self._step_match(1)

    def action_previous_match(self) -> None:
        self._step_match(-1)

    def _step_match(self, step: int) -> None:
        view = self.query_one(ReaderView)
        if view.next_match(step) is None:
            self._set_status(
                "No matches to step through." if self.search_query else "Open from a search to step through its matches."
            )
            return
        self._show_position()

    def action_next_heading(self) -> None:
        self._to_heading(1)

    def action_previous_heading(self) -> None:
        self._to_heading(-1)

    def _to_heading(self, step: int) -> None:
        view = self.query_one(ReaderView)
        offset = view.heading_from(step)
        if offset is None:
            self._set_status("No further heading this way.")
            return
        view.jump_to(offset)
        self._show_position()

    def action_headings(self) -> None:
        if self.text is None:
            return
        targets = jump_targets(self.text)
        if not targets:
            self._set_status("This document has no headings or symbols.")
            return
        view = self.query_one(ReaderView)

        def chosen(offset: int | None) -> None:
            if offset is not None:
                view.jump_to(offset)
                self._show_position()

        self.app.push_screen(JumpScreen(targets, view.top_offset), chosen)

    def action_top(self) -> None:
        self.query_one(ReaderView).scroll_home(animate=False)

    def action_bottom(self) -> None:
        self.query_one(ReaderView).scroll_end(animate=False)

    def action_toggle_follow(self) -> None:
        self.following = not self.following
        if self.following:
            self._follow_timer = self.set_interval(FOLLOW_INTERVAL_S, lambda: self._load(refresh=True))
            self.query_one(ReaderView).scroll_end(animate=False)
        elif self._follow_timer is not None:
            self._follow_timer.stop()
            self._follow_timer = None
        self._show_position()

    # ------------------------------------------------------------ status

    def _show_position(self) -> None:
        view = self.query_one(ReaderView)
        parts = []
        if self.search_query:
            if view.matches:
                at = f"{view.current_match + 1}/" if view.current_match is not None else ""
                parts.append(f"match {at}{len(view.matches)} (n/N)")
            else:
                parts.append("no matches of the query here")
        if self.text is not None:
            # The section of the match being looked at (not of the first line on screen, which
            # is context above it), else of the top of the view.
            offset = view.matches[view.current_match][0] if view.current_match is not None else view.top_offset
            heading = self._heading_at(offset)
            if heading:
                parts.append(heading)
            if self.text.truncated:
                parts.append(f"cut at {len(self.text.text):,} characters")
        if self.following:
            parts.append("following (F to stop)")
        self._set_status(" · ".join(parts) or "h: headings · ]/[: next/previous heading · F: follow")

    def _heading_at(self, offset: int) -> str:
        if self.text is None:
            return ""
        current = [mark for mark in self.text.headings if mark.offset <= offset]
        if not current:
            return ""
        return printable(current[-1].heading_path).replace(HEADING_SEPARATOR, TRAIL_SEPARATOR)

    def _set_status(self, text: str) -> None:
        self.query_one("#reader-status", Static).update(Text(text, no_wrap=True, overflow="ellipsis"))
