"""Nodes: every node of the knowledge base, with its state and its work.

On a PostgreSQL store many nodes share, each that has joined it: alive,
stopped or lost (it stopped heartbeating without saying so), when it started,
its last heartbeat, documents in flight, chunks per second over the last
minute and its embedding model; on SQLite the one node of this data
directory. The same columns as ``kbtui nodes`` (:mod:`kbtui.api.nodes`).

The list is read again every two seconds by a thread worker (the store's
answer may take a moment on a slow server; the UI never waits for it).
"""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable, Static

from kbtui.api.nodes import COLUMNS, node_cells, node_state
from kbtui.errors import OPERATOR_ERRORS
from kbtui.node import Node
from kbtui.printable import printable
from kbtui.tui.screens.base import KbtuiScreen
from kbtui.tui.widgets.footer import KeysFooter
from kbtui.tui.widgets.lists import Table
from store.records import NodeRecord

REFRESH_S = 2.0
TITLES = ("ID", "Host", "Role", "State", "Started", "Heartbeat", "In flight", "Chunks/s", "Model")
assert len(TITLES) == len(COLUMNS)
_STATE_STYLE = {"alive": "green", "stopped": "dim", "lost": "bold red"}


class NodesScreen(KbtuiScreen):
    """The nodes of the knowledge base, refreshed live."""

    BINDINGS = [Binding("escape", "back", "Back", id="nodes.back")]

    DEFAULT_CSS = """
    NodesScreen #nodes-heading { height: 1; padding: 0 1; background: $panel; }
    NodesScreen #nodes-table { height: 1fr; }
    NodesScreen #nodes-problem { height: auto; padding: 0 1; }
    """

    class NodesLoaded(Message):
        def __init__(self, records: list[NodeRecord] | None, problem: str | None = None) -> None:
            super().__init__()
            self.records = records
            self.problem = problem

    def __init__(self, node: Node, *, refresh_s: float = REFRESH_S) -> None:
        super().__init__()
        self.title = "Nodes"
        self.node = node
        self.refresh_s = refresh_s
        self.records: list[NodeRecord] = []

    def compose(self) -> ComposeResult:
        yield Static(Text("Nodes", style="bold"), id="nodes-heading")
        yield Table(id="nodes-table", cursor_type="row", zebra_stripes=False)
        yield Static(id="nodes-problem")
        yield KeysFooter()

    def on_mount(self) -> None:
        table = self.query_one("#nodes-table", DataTable)
        table.add_columns(*TITLES)
        table.focus()
        self._load()
        self.set_interval(self.refresh_s, self._refresh)

    def _refresh(self) -> None:
        if not any(w.group == "nodes-list" and w.is_running for w in self.workers):
            self._load()

    @work(thread=True, exclusive=True, group="nodes-list", exit_on_error=False)
    def _load(self) -> None:
        try:
            records = self.node.nodes()
        except OPERATOR_ERRORS as problem:  # e.g. the server is down: say so, keep the last list
            self.post_message(self.NodesLoaded(None, problem.message))
            return
        self.post_message(self.NodesLoaded(records))

    def on_nodes_screen_nodes_loaded(self, message: NodesLoaded) -> None:
        problem = self.query_one("#nodes-problem", Static)
        if message.records is None:
            problem.update(Text(f"Cannot read the nodes now: {printable(message.problem or '')}", style="bold red"))
            return
        problem.update("")
        self.records = message.records
        table = self.query_one("#nodes-table", DataTable)
        selected = table.cursor_row
        table.clear()
        for record in self.records:
            table.add_row(*self._cells(record), key=record.id)
        if self.records:
            table.move_cursor(row=min(max(selected, 0), len(self.records) - 1))
        alive = sum(1 for r in self.records if r.alive)
        self.query_one("#nodes-heading", Static).update(
            Text.assemble(("Nodes", "bold"), f" · {len(self.records)} known, {alive} alive")
        )

    @staticmethod
    def _cells(record: NodeRecord) -> tuple[Text | str, ...]:
        cells = [printable(cell) for cell in node_cells(record)]
        state = node_state(record)
        return (*cells[:3], Text(state, style=_STATE_STYLE[state]), *cells[4:])
