"""Failed documents of the active collection: why each failed, in words, and retry."""

from __future__ import annotations

from collections import Counter

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable, Static

from kbtui.node import Node
from kbtui.printable import printable
from kbtui.reads import DocumentRow, Status
from kbtui.reasons import explain_reason
from kbtui.tui.messages import OpenDocument, ReindexRequested
from kbtui.tui.screens.base import KbtuiScreen
from kbtui.tui.widgets.cells import fit
from kbtui.tui.widgets.footer import KeysFooter
from kbtui.tui.widgets.lists import Table

RELOAD_AFTER_RETRY_S = 0.5


def reasons_text(rows: list[DocumentRow]) -> Text:
    """One line per reason code: how many, and what it means."""
    counts = Counter(row.reason or "unknown" for row in rows)
    text = Text(no_wrap=True, overflow="ellipsis")
    for index, (reason, count) in enumerate(counts.most_common()):
        if index:
            text.append("\n")
        text.append(f"{reason} ×{count}", style="bold red")
        text.append(f"  {explain_reason(reason)}")
    return text


class FailuresScreen(KbtuiScreen):
    """Every Failed document with its reason; ``r`` retries one, ``R`` all of them."""

    BINDINGS = [
        Binding("escape", "back", "Back", id="failures.back"),
        Binding("r", "retry_selected", "Retry", id="failures.retry", tooltip="Queue the selected document again"),
        Binding("R", "retry_all", "Retry all", id="failures.retry_all"),
    ]

    DEFAULT_CSS = """
    FailuresScreen #failures-heading { height: 1; padding: 0 1; background: $panel; }
    FailuresScreen #failures-reasons { height: auto; max-height: 8; padding: 0 1; }
    FailuresScreen #failures { height: 1fr; }
    FailuresScreen #failures-why { height: 1; padding: 0 1; color: $text-muted; }
    """

    class Loaded(Message):
        def __init__(self, rows: list[DocumentRow]) -> None:
            super().__init__()
            self.rows = rows

    def __init__(self, node: Node, collection_id: str) -> None:
        super().__init__()
        self.title = "Failures"
        self.node = node
        self.collection_id = collection_id
        self.rows: list[DocumentRow] = []

    def compose(self) -> ComposeResult:
        yield Static(Text.assemble(("Failed documents ", "bold"), self.collection_id), id="failures-heading")
        yield Static(id="failures-reasons")
        yield Table(id="failures", cursor_type="row", zebra_stripes=True)
        yield Static(id="failures-why")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()
        self.reload()

    def reload(self) -> None:
        self._load(self.collection_id)

    @work(thread=True, exclusive=True, group="failures-load", exit_on_error=False)
    def _load(self, collection_id: str) -> None:
        self.post_message(self.Loaded(self.node.documents(collection_id, Status.FAILED.value)))

    def on_failures_screen_loaded(self, message: Loaded) -> None:
        self.rows = message.rows
        table = self.query_one(DataTable)
        table.clear(columns=True)
        reason_width = max((len(row.reason or "") for row in self.rows), default=8)
        name_width = max(12, self.size.width - reason_width - 8)
        table.add_column("Name", width=name_width, key="name")
        table.add_column("Reason", width=reason_width, key="reason")
        for row in self.rows:
            table.add_row(Text(fit(printable(row.name), name_width)), Text(row.reason or "", style="red"),
                          key=row.document_id)
        if self.rows:
            self.query_one("#failures-reasons", Static).update(reasons_text(self.rows))
        else:
            self.query_one("#failures-reasons", Static).update(Text("No failed documents in this collection."))
        self._show_why()

    @on(DataTable.RowHighlighted, "#failures")
    def _highlighted(self) -> None:
        self._show_why()

    @on(DataTable.RowSelected, "#failures")
    def _open(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value:
            self.post_message(OpenDocument(event.row_key.value))

    def _selected(self) -> DocumentRow | None:
        table = self.query_one(DataTable)
        if not self.rows or table.cursor_row >= len(self.rows):
            return None
        return self.rows[table.cursor_row]

    def copy_target(self) -> tuple[str, str] | None:
        """``y``/``Y``: the selected failed document's id and path (or name)."""
        row = self._selected()
        return None if row is None else (row.document_id, row.source_path or row.name)

    def _show_why(self) -> None:
        row = self._selected()
        why = "" if row is None else (
            f"{printable(row.source_path or row.name)}: {row.reason}: {explain_reason(row.reason)} · r: retry · Enter: details"
        )
        self.query_one("#failures-why", Static).update(Text(why, no_wrap=True, overflow="ellipsis"))

    def action_retry_selected(self) -> None:
        row = self._selected()
        if row is not None:
            self._retry((row.document_id,))

    def action_retry_all(self) -> None:
        if self.rows:
            self._retry(tuple(row.document_id for row in self.rows))

    def _retry(self, document_ids: tuple[str, ...]) -> None:
        self.post_message(ReindexRequested(document_ids))
        self.set_timer(RELOAD_AFTER_RETRY_S, self.reload)
