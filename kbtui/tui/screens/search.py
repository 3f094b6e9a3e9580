"""The Search screen: results as you type (debounced), Enter opens a preview.

Results are documents (each document's best chunk, and how many more of its
chunks ranked); ``ctrl+o`` widens the search to every collection and back.
When no query word matched, the status line says so: related passages only,
or nothing matched at all.

Each keystroke bumps a generation number and restarts a short timer; when it
fires, a thread worker searches and posts the answer back with its
generation, and only the newest generation is shown. A slow search never
blocks typing, and a stale one never overwrites a newer answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.timer import Timer
from textual.widgets import Input, OptionList, Static
from textual.worker import Worker, WorkerState

from kbtui.node import Node
from kbtui.printable import printable
from kbtui.retrieval.matching import NONE, RELATED
from kbtui.retrieval.search import ALL_COLLECTIONS, SearchResponse
from kbtui.tui.messages import OpenHit, OpenReader, SearchFinished
from kbtui.tui.screens.base import KbtuiScreen
from kbtui.tui.widgets.footer import KeysFooter
from kbtui.tui.widgets.hit_list import HitList, degradation_text, hit_title

if TYPE_CHECKING:
    from kbtui.tui.app import TuiOptions


# The list's padding and scrollbar: a hit's lines are cut to what is left.
HIT_LIST_CHROME = 3


class SearchScreen(KbtuiScreen):
    """Type-ahead hybrid search over the active collection."""

    BINDINGS = [
        Binding("escape", "back", "Back", id="search.back"),
        Binding("ctrl+r", "toggle_explain", "Explain", id="search.explain", tooltip="Show why each hit ranked"),
        Binding("e", "toggle_explain", "Explain", id="search.explain_results", show=False),
        Binding(
            "ctrl+o", "toggle_everywhere", "All collections", id="search.everywhere",
            tooltip="Search every collection, or only the active one",
        ),
        Binding("down", "focus_results", "Results", id="search.results", show=False),
        Binding("v", "read_hit", "Read", id="search.read", tooltip="The whole document at this hit"),
    ]

    DEFAULT_CSS = """
    SearchScreen #search-heading { height: 1; padding: 0 1; background: $panel; }
    SearchScreen #search-input { margin: 0 1; }
    SearchScreen #search-status { height: auto; padding: 0 1; color: $text-muted; }
    SearchScreen #search-status.-degraded { color: $warning; text-style: bold; }
    SearchScreen #search-results { height: 1fr; border: none; }
    """

    def __init__(self, node: Node, collection_id: str, options: TuiOptions) -> None:
        super().__init__(id="search-screen")
        self.title = "Search"
        self.node = node
        self.collection_id = collection_id
        self.options = options
        self.generation = 0
        self.explain = False
        self.everywhere = False  # search every collection instead of ``collection_id``
        self.query_text = ""
        self.response: SearchResponse | None = None
        self.answered_query = ""  # the text ``response`` answers
        self.names: dict[str, str] = {}
        self._debounce: Timer | None = None
        self._open_first_when_answered = False
        self.answered_generation = -1

    def compose(self) -> ComposeResult:
        yield Static(id="search-heading")
        yield Input(placeholder="Search: type words or a question", id="search-input", compact=True)
        yield Static(id="search-status")
        yield HitList(id="search-results")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#search-input", Input).cursor_blink = self.options.cursor_blink
        self._show_heading()
        self._set_status("Type to search. Down moves to the results, Enter opens one.")

    def on_screen_resume(self) -> None:
        self._show_heading()

    def focus_input(self) -> None:
        """Into the box with the old query selected: typing replaces it (``/`` again starts afresh)."""
        box = self.query_one("#search-input", Input)
        box.focus()
        box.select_all()

    def search_text(self, text: str) -> None:
        """Search ``text`` as if it had been typed (``:search WORDS``)."""
        box = self.query_one("#search-input", Input)
        box.value = text
        box.cursor_position = len(text)

    def copy_target(self) -> tuple[str, str] | None:
        """``y``/``Y``: the highlighted hit's document id and source path (or name)."""
        results = self.query_one(HitList)
        if self.response is None or results.highlighted is None or not self.response.hits:
            return None
        hit = self.response.hits[results.highlighted]
        return hit.document_id, hit.source_path or self.names.get(hit.document_id) or hit.document_id

    @property
    def scope_name(self) -> str:
        """What is being searched, for the operator."""
        return "all collections" if self.everywhere else self.collection_id

    def _show_heading(self) -> None:
        explain = "on" if self.explain else "off"
        self.query_one("#search-heading", Static).update(
            Text.assemble(("Search ", "bold"), self.scope_name, f"  ·  explain {explain} (ctrl+r)")
        )

    # ------------------------------------------------------------ typing

    @on(Input.Changed, "#search-input")
    def typed(self, event: Input.Changed) -> None:
        self.query_text = event.value
        self.generation += 1
        self._open_first_when_answered = False  # Enter was for what was typed before
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(self.options.search_debounce_s, self._search_now)

    @on(Input.Submitted, "#search-input")
    def submitted(self) -> None:
        """Enter in the box opens the first hit (once the search for what is typed answers)."""
        if self.response is not None and self.answered_generation == self.generation:
            self._open_first()
            return
        if self._debounce is not None:
            self._debounce.stop()
        self._open_first_when_answered = True
        self._search_now()

    def _open_first(self) -> None:
        self._open_first_when_answered = False
        if self.response is not None and self.response.hits:
            self.query_one(HitList).highlighted = 0
            self._post_open(0)

    def show_collection(self, collection_id: str) -> None:
        """Search another collection (again, if a query is typed)."""
        self.collection_id = collection_id
        if self.is_mounted:
            self.generation += 1
            self._show_heading()
            self._search_now()

    def _search_now(self) -> None:
        query = self.query_text.strip()
        if not query:
            self._open_first_when_answered = False
            self.response = None
            self.query_one(HitList).clear_options()
            self._set_status("Type to search.")
            return
        self._set_status("Searching…")
        self._search(self.generation, query, ALL_COLLECTIONS if self.everywhere else self.collection_id)

    @work(thread=True, exclusive=True, group="search", exit_on_error=False)
    def _search(self, generation: int, query: str, collection_id: str) -> None:
        response = self.node.search(query, collection_id, per_document=True)
        # The operator's own file names, for uploaded documents (no source path) among the hits.
        unnamed = [h.document_id for h in response.hits if not h.source_path and h.document_id not in self.names]
        if unnamed:
            named = self.node.display_names(unnamed)
            self.names = {**self.names, **{d: printable(name) for d, name in named.items()}}
        self.post_message(SearchFinished(generation, query, collection_id, response))

    def on_search_finished(self, message: SearchFinished) -> None:
        if message.generation != self.generation:
            return  # an older keystroke's answer
        self.response = message.response
        self.answered_query = message.query
        self.answered_generation = message.generation
        self._render_results()
        if self._open_first_when_answered:
            self._open_first()

    def _render_results(self) -> None:
        response = self.response
        if response is None:
            return
        results = self.query_one(HitList)
        results.show(
            response.hits, self.query_text, explain=self.explain, names=self.names,
            width=(results.size.width or self.app.size.width) - HIT_LIST_CHROME,
            fusion=response.explain.fusion if response.explain is not None else None,
            show_collection=self.everywhere,
        )
        count = len(response.hits)
        summary = f"{count} hit{'s' if count != 1 else ''} in {self.scope_name}"
        if response.hidden:
            summary += f" · {response.hidden} unrelated hidden (below the similarity floor)"
        if self.options.show_timings:
            summary += f" · {response.elapsed_ms:.0f} ms"
        verdict = response.match.verdict if response.match is not None else None
        if verdict == RELATED:
            summary = f"No exact matches, showing related passages. {summary}"
        if response.degraded:
            self._set_status(f"{degradation_text(response.degraded)} {summary}", degraded=True)
        elif verdict == NONE:
            self._set_status(f"Nothing matched in {self.scope_name}.")
        elif count == 0:
            self._set_status(f"No matches in {self.scope_name}.")
        else:
            self._set_status(summary)

    def _set_status(self, text: str, *, degraded: bool = False) -> None:
        status = self.query_one("#search-status", Static)
        status.update(Text(text))
        status.set_class(degraded, "-degraded")

    # ------------------------------------------------------------ results

    @on(OptionList.OptionSelected, "#search-results")
    def open_hit(self, event: OptionList.OptionSelected) -> None:
        if self.response is None or event.option.id is None:
            return
        self._post_open(int(event.option.id))

    def _post_open(self, index: int) -> None:
        assert self.response is not None
        hit = self.response.hits[index]
        fusion = self.response.explain.fusion if self.response.explain is not None else None
        self.post_message(OpenHit(hit, self.query_text, self.names.get(hit.document_id), fusion))

    def action_read_hit(self) -> None:
        """``v``: the highlighted hit's whole document, at the hit."""
        results = self.query_one(HitList)
        if self.response is None or results.highlighted is None or not self.response.hits:
            return
        hit = self.response.hits[results.highlighted]
        title = hit_title(hit, self.names.get(hit.document_id))
        self.post_message(OpenReader(hit.document_id, hit.collection_id, title, self.query_text, hit.chunk_id))

    def action_focus_results(self) -> None:
        results = self.query_one(HitList)
        if results.option_count and not results.has_focus:
            results.focus()
            if results.highlighted is None:
                results.highlighted = 0

    def action_toggle_everywhere(self) -> None:
        self.everywhere = not self.everywhere
        self.generation += 1
        self._show_heading()
        self._search_now()

    def action_toggle_explain(self) -> None:
        self.explain = not self.explain
        self._show_heading()
        self._render_results()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "search" and event.state == WorkerState.ERROR:
            # The type only: an exception's message may quote the query.
            self._set_status(f"Search failed ({type(event.worker.error).__name__}).", degraded=True)
        super().on_worker_state_changed(event)
