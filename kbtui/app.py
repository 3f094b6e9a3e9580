"""The Textual application (a first, minimal document list)."""

from __future__ import annotations

import time

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Header

from kbtui.config import Config
from kbtui.node import Node
from store import catalog


class KbtuiApp(App[int]):
    TITLE = "kbtui"
    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("r", "refresh", "Refresh", id="refresh"),
    ]

    def __init__(self, config: Config) -> None:
        super().__init__()
        self.config = config
        self.node: Node | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield DataTable(id="documents", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        self.node = Node.open(self.config)
        table = self.query_one(DataTable)
        table.add_columns("ID", "Name", "Collection", "Status", "Chunks", "Updated")
        self.action_refresh()

    def action_refresh(self) -> None:
        assert self.node is not None
        table = self.query_one(DataTable)
        table.clear()
        for d in catalog.list_documents():
            status = d.status if not d.failure_reason else f"{d.status} ({d.failure_reason})"
            table.add_row(
                d.id[:12], catalog.display_name(self.node.store, d), d.collection_id, status,
                str(d.chunk_count), time.strftime("%Y-%m-%d %H:%M", time.localtime(d.updated_at)),
                key=d.id,
            )
        self.sub_title = f"{table.row_count} documents"

    def on_unmount(self) -> None:
        if self.node is not None:
            self.node.close()


def run_app(config: Config) -> int:
    return KbtuiApp(config).run() or 0
