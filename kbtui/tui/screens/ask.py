"""The Ask screen: a question answered from the knowledge base by a local chat model.

Self-contained: the screen is given its collaborators (an ``ask`` callable
and a ``search`` callable) so any app can push it. Both run in a thread
worker and report back by message; the UI loop never waits on them.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from urllib.parse import urlsplit

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Button, DataTable, Input, Static
from textual.worker import Worker, WorkerState

from kbtui.config import Config
from kbtui.node import Node
from kbtui.printable import printable
from kbtui.retrieval.search import SearchResponse
from kbtui.tools.ask import STATUS_MESSAGES, AskOutcome, answer_question, search_instead
from kbtui.tools.locality import decide, effective_chat_model
from kbtui.tui.widgets.footer import KeysFooter
from kbtui.tui.widgets.lists import Table

PROBE_TIMEOUT_S = 2.0


def chat_model_problem(config: Config, model: str | None = None) -> str | None:
    """Why no chat model would answer, found before anything is typed (None: it may).

    Checks the configuration and whether the chat host accepts a connection
    (nothing is sent: no question, no document text), with a short timeout;
    a model missing on a reachable server is still found by the first question.
    """
    endpoint = effective_chat_model(config, pinned_model=model)
    if not endpoint.model:
        return STATUS_MESSAGES["no_chat_model"]
    decision = decide(endpoint, allow_cloud_model_access=config.allow_cloud_model_access is True)
    if not decision.tools_allowed:
        return decision.notice()
    address = urlsplit(endpoint.host if "://" in endpoint.host else f"http://{endpoint.host}")
    try:
        port = address.port or (443 if address.scheme == "https" else 80)
        with socket.create_connection((address.hostname or "127.0.0.1", port), timeout=PROBE_TIMEOUT_S):
            return None
    except (OSError, ValueError):
        return STATUS_MESSAGES["chat_model_unreachable"]


class AskScreen(Screen[None]):
    """Type a question, get an answer with its cited sources; search when no model answers."""

    BINDINGS = [
        Binding("escape", "dismiss_screen", "Back", id="ask.back"),
        # Not ctrl+s: that is XOFF over many SSH sessions and terminals, and freezes the output.
        Binding("ctrl+g", "search_instead", "Search instead", id="ask.search_instead"),
    ]

    DEFAULT_CSS = """
    AskScreen #ask-heading { padding: 0 1; color: $text-muted; }
    AskScreen #ask-status { padding: 0 1; color: $warning; }
    AskScreen #ask-answer-box { height: 1fr; min-height: 5; border: round $primary; padding: 0 1; }
    AskScreen #ask-results { height: 1fr; }
    AskScreen #ask-actions { height: auto; padding: 0 1; }
    """

    class Answered(Message):
        """The ask worker finished."""

        def __init__(self, outcome: AskOutcome) -> None:
            super().__init__()
            self.outcome = outcome

    class Searched(Message):
        """The search-instead worker finished."""

        def __init__(self, response: SearchResponse) -> None:
            super().__init__()
            self.response = response

    def __init__(
        self,
        ask: Callable[[str], AskOutcome],
        search: Callable[[str], SearchResponse],
        *,
        collection_id: str,
        model_label: str,
        probe: Callable[[], str | None] | None = None,
        name: str | None = None,
        id: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id)
        self._ask = ask
        self._search = search
        self._probe = probe
        self.collection_id = collection_id
        self.model_label = model_label
        self.question = ""
        self.outcome: AskOutcome | None = None
        self.no_model = False  # the probe found no chat model: Enter searches instead

    @classmethod
    def for_node(cls, node: Node, collection_id: str, *, model: str | None = None) -> AskScreen:
        """An Ask screen wired to ``node``: its search, its config's chat model (or ``model``)."""
        config = node.config
        return cls(
            lambda question: answer_question(
                question, collection_id=collection_id, knowledge=node, config=config, model=model
            ),
            lambda question: search_instead(node, question, collection_id, limit=config.search_limit),
            collection_id=collection_id,
            model_label=model or config.chat_model,
            probe=lambda: chat_model_problem(config, model),
        )

    def compose(self) -> ComposeResult:
        yield Static(Text(f"Ask · collection {self.collection_id} · model {self.model_label}"), id="ask-heading")
        yield Input(placeholder="Ask a question about your documents…", id="ask-question")
        yield Static("", id="ask-status")
        with VerticalScroll(id="ask-answer-box"):
            yield Static("", id="ask-answer")
        with Horizontal(id="ask-actions"):
            yield Button("Search instead", id="ask-search-instead", variant="primary")
        yield Table(id="ask-results", cursor_type="row", zebra_stripes=True)
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#ask-actions").display = False
        self.query_one("#ask-question", Input).focus()
        if self._probe is not None:
            self._run_probe()

    class Probed(Message):
        """Whether a chat model would answer, found when the screen opened."""

        def __init__(self, problem: str | None) -> None:
            super().__init__()
            self.problem = problem

    @work(thread=True, exclusive=True, exit_on_error=False, group="ask-probe")
    def _run_probe(self) -> None:
        assert self._probe is not None
        self.post_message(self.Probed(self._probe()))

    def on_ask_screen_probed(self, message: Probed) -> None:
        if message.problem and not self.question:
            # Said before anything is typed, with the way round it.
            self.no_model = True
            self._set_status(f"{message.problem} Type your question; Enter searches instead.")
            self.query_one("#ask-actions").display = True

    # ------------------------------------------------------------ asking

    @on(Input.Submitted, "#ask-question")
    def submit_question(self, event: Input.Submitted) -> None:
        question = event.value.strip()
        if not question:
            return
        if self.no_model:
            self.action_search_instead()
            return
        self.question = question
        self.outcome = None
        self._set_status("Asking…")
        self.query_one("#ask-answer", Static).update("")
        self.query_one("#ask-actions").display = False
        self.query_one("#ask-results", DataTable).clear(columns=True)
        self._run_ask(question)

    @work(thread=True, exclusive=True, exit_on_error=False, group="ask")
    def _run_ask(self, question: str) -> None:
        self.post_message(self.Answered(self._ask(question)))

    def on_ask_screen_answered(self, message: Answered) -> None:
        outcome = message.outcome
        self.outcome = outcome
        if not outcome.answered:
            self._set_status(f"{outcome.notice or 'No answer.'} You can search instead (ctrl+g).")
            self.query_one("#ask-actions").display = True
            self.query_one("#ask-search-instead", Button).focus()
            return
        self._set_status("")
        self.query_one("#ask-answer", Static).update(Text(outcome.answer))
        listed = outcome.cited or outcome.consulted
        table = self.query_one("#ask-results", DataTable)
        table.clear(columns=True)
        table.add_columns("Ref", "Title", "Section", "Page", "Document")
        for source in listed:
            table.add_row(
                Text(source.ref or "-"), Text(source.title), Text(source.section),
                Text("" if source.page is None else str(source.page)), Text(source.document_id[:12]),
            )
        table.border_title = "Sources" if outcome.cited else "Consulted (not cited)"

    # ------------------------------------------------------------ search instead

    @on(Button.Pressed, "#ask-search-instead")
    def action_search_instead(self) -> None:
        # What is in the box (typed but not yet asked) or the last question asked.
        self.question = self.query_one("#ask-question", Input).value.strip() or self.question
        if not self.question:
            return
        self._set_status("Searching…")
        self._run_search(self.question)

    @work(thread=True, exclusive=True, exit_on_error=False, group="ask-search")
    def _run_search(self, question: str) -> None:
        self.post_message(self.Searched(self._search(question)))

    def on_ask_screen_searched(self, message: Searched) -> None:
        response = message.response
        degraded = f" (degraded: {', '.join(response.degraded)})" if response.degraded else ""
        self._set_status(f"{len(response.hits)} search result(s){degraded}")
        table = self.query_one("#ask-results", DataTable)
        table.clear(columns=True)
        # Fixed widths: the text gets what title and source leave, not a squeezed 20 columns.
        width = max(60, table.size.width or self.app.size.width)
        title_width = min(28, width // 4)
        source_width = min(20, width // 6)
        text_width = max(30, width - title_width - source_width - 3 - 10)
        table.add_column("#", width=3)
        table.add_column("Title", width=title_width)
        table.add_column("Source", width=source_width)
        table.add_column("Text", width=text_width)
        for rank, hit in enumerate(response.hits, start=1):
            title = printable(hit.heading_path or hit.source_path or hit.document_id[:12])
            snippet = printable(" ".join(hit.text.split())[: text_width * 2])
            table.add_row(Text(str(rank)), Text(title, no_wrap=True, overflow="ellipsis"),
                          Text(printable(hit.source_path), no_wrap=True, overflow="ellipsis"),
                          Text(snippet, no_wrap=True, overflow="ellipsis"))
        table.border_title = "Search results"

    # ------------------------------------------------------------ plumbing

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and event.worker.group == "ask-probe":
            return  # a failed probe says nothing; asking will
        if event.state == WorkerState.ERROR and event.worker.group in ("ask", "ask-search"):
            error = event.worker.error
            # The exception type only: messages can carry document or query text.
            self._set_status(f"Failed: {type(error).__name__}")
            self.query_one("#ask-actions").display = True

    def action_dismiss_screen(self) -> None:
        self.dismiss(None)

    def _set_status(self, text: str) -> None:
        self.query_one("#ask-status", Static).update(Text(text))
