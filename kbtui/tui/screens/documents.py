"""The Documents screen: every document of the active collection, live.

Rows come from the database: a thread worker reads them when the poller sees
a change, only the rows updated since the newest one shown while the set of
documents stays the same (ingestion), everything otherwise. Between reads,
pipeline events buffered by the app update the status cells in place. The
table is keyed by document id, so a read changes only the cells that differ.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable, Footer, Static
from textual.widgets.data_table import CellDoesNotExist, RowDoesNotExist

from actors.events import DocumentStatusChanged
from kbtui.node import Node
from kbtui.printable import printable
from kbtui.reads import DocumentRow, Status, is_interrupted
from kbtui.reasons import INTERRUPTED, explain_reason
from kbtui.tui.messages import AddRequested, DeleteRequested, FailuresRequested, OpenDocument, ReindexRequested
from kbtui.tui.screens.base import KbtuiScreen
from kbtui.tui.widgets.cells import human_size, short_time, status_cell
from kbtui.tui.widgets.ingest_header import IngestHeader

FILTERS: tuple[str | None, ...] = (None, *(s.value for s in Status))
# Reasons are explained below the table (and in the failures view), so the
# status column stays narrow and the name gets the room.
FIXED_COLUMNS = (("status", "Status", 15), ("size", "Size", 9), ("chunks", "Chunks", 6), ("updated", "Upd.", 5))
# Cell padding (2 per column), the vertical scrollbar (1) and a spare column.
TABLE_CHROME = 2 * (len(FIXED_COLUMNS) + 1) + 2
MIN_NAME_WIDTH = 12
EMPTY = "No documents yet. Press a to add a folder, a file or a repository, i for sources."


def fit(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, the ellipsis in the middle: names
    that share a long beginning still differ where they end (``report-2024…-03.pdf``)."""
    if len(text) <= width:
        return text
    if width < 8:
        return text[: max(0, width - 1)] + "…"
    tail = (width - 1) // 2
    return text[: width - 1 - tail] + "…" + text[len(text) - tail :]


class DocumentsScreen(KbtuiScreen):
    """Documents with status, stage progress, size, chunks, update time and failure reason."""

    BINDINGS = [
        Binding("a", "add_files", "Add", id="documents.add", tooltip="Add a file or a directory"),
        Binding("d", "delete_selected", "Delete", id="documents.delete", tooltip="Delete the selected document"),
        Binding("r", "reindex_selected", "Reindex", id="documents.reindex"),
        Binding("R", "reindex_all", "Reindex all", id="documents.reindex_all", show=False),
        Binding("f", "cycle_filter", "Filter", id="documents.filter",
                tooltip="Next status that has documents (0-6: All, Pending ... Failed)"),
        Binding("x", "failures", "Failures", id="documents.failures", tooltip="Failed documents, why, and retry"),
        Binding("escape", "clear_filter", "All", id="documents.clear_filter", show=False),
        *[Binding(str(key), f"filter_key({key})", label, id=f"documents.filter_{key}", show=False)
          for key, label in enumerate(("All", *(s.value for s in Status)))],
    ]

    DEFAULT_CSS = """
    DocumentsScreen #documents-filter { height: 1; padding: 0 1; color: $text-muted; }
    DocumentsScreen #documents { height: 1fr; scrollbar-size-vertical: 1; }
    DocumentsScreen #documents-empty { height: auto; padding: 1 2; color: $text-muted; display: none; }
    DocumentsScreen #documents-hint { height: 1; padding: 0 1; color: $text-muted; }
    DocumentsScreen #documents-hint.-failed { color: $error; }
    """

    class RowsLoaded(Message):
        def __init__(self, collection_id: str, status_filter: str | None, rows: list[DocumentRow], partial: bool) -> None:
            super().__init__()
            self.collection_id = collection_id
            self.status_filter = status_filter
            self.rows = rows
            self.partial = partial

    def __init__(self, node: Node, collection_id: str, *, clock: Callable[[], float]) -> None:
        super().__init__(id="documents-screen")
        self.title = "Documents"
        self.node = node
        self.collection_id = collection_id
        self.clock = clock
        self.status_filter: str | None = None
        self.rows: dict[str, DocumentRow] = {}
        self.counts: dict[str, int] = {}
        self.name_width = 0
        self.node_running = True
        self.following = True  # the cursor follows new rows until the operator moves it
        self.batch_line = ""
        self._reload_wanted = False
        self._ready = False

    def compose(self) -> ComposeResult:
        yield IngestHeader(id="ingest-header")
        yield Static(id="documents-filter")
        yield Static(Text(EMPTY), id="documents-empty")
        yield DataTable(id="documents", cursor_type="row", zebra_stripes=True)
        yield Static(id="documents-hint")
        yield Footer()

    def on_mount(self) -> None:
        self._ready = True
        self._build_columns()
        self.show_counts(self.counts)
        self.reload()

    def on_resize(self) -> None:
        if self._name_width_for(self.size.width) != self.name_width:
            self._build_columns()
            self._fill(list(self.rows.values()))

    @property
    def ready(self) -> bool:
        """Mounted with its widgets (messages can arrive before mount or during teardown).

        The app stops running before shutdown removes this screen's children, while its
        message loop may still hand over a poll result; that window counts as not ready.
        """
        return self._ready and self.app.is_running

    def on_unmount(self) -> None:
        self._ready = False

    # ------------------------------------------------------------ loading

    def reload(self) -> None:
        """Read every row again (coalesced: one read at a time, one more if asked meanwhile)."""
        if any(w.group == "documents-load" and w.is_running for w in self.workers):
            self._reload_wanted = True
            return
        self._reload_wanted = False
        self._load(self.collection_id, self.status_filter, None)

    def catch_up(self, document_count: int) -> None:
        """The poller saw a change: read only what changed while the same documents
        are shown (a status filter, an addition or a deletion means everything)."""
        if self.status_filter is not None or document_count != len(self.rows) or not self.rows:
            self.reload()
        elif any(w.group == "documents-load" and w.is_running for w in self.workers):
            self._reload_wanted = True
        else:
            self._load(self.collection_id, None, max(row.updated_at for row in self.rows.values()))

    @work(thread=True, exclusive=True, group="documents-load", exit_on_error=False)
    def _load(self, collection_id: str, status_filter: str | None, since: float | None) -> None:
        rows = self.node.documents(collection_id, status_filter, updated_since=since)
        self.post_message(self.RowsLoaded(collection_id, status_filter, rows, partial=since is not None))

    def on_documents_screen_rows_loaded(self, message: RowsLoaded) -> None:
        if not self.ready:
            return
        if message.collection_id == self.collection_id and message.status_filter == self.status_filter:
            if message.partial:
                self._apply_changes(message.rows)
            else:
                self._apply(message.rows)
        if self._reload_wanted:
            self.reload()

    def _apply_changes(self, rows: list[DocumentRow]) -> None:
        table = self.query_one("#documents", DataTable)
        now = self.clock()
        for row in rows:
            old = self.rows.get(row.document_id)
            if old is None:
                self._reload_wanted = True  # a document the table does not have yet
            elif old != row:
                self._update_row(table, old, row, now)
                self.rows[row.document_id] = row

    def _apply(self, rows: list[DocumentRow]) -> None:
        table = self.query_one("#documents", DataTable)
        wanted = [row.document_id for row in rows]
        if list(self.rows) != wanted[: len(self.rows)]:
            # Something was removed or reordered: rebuild, keeping the cursor on its document.
            self._fill(rows)
            return
        now = self.clock()
        added = False
        had_rows = bool(self.rows)
        for row in rows:
            old = self.rows.get(row.document_id)
            if old is None:
                table.add_row(*self._cells(row, now), key=row.document_id)
                added = True
            elif old != row:
                self._update_row(table, old, row, now)
            self.rows[row.document_id] = row
        self._show_empty(not rows)
        if added and had_rows and self.following and table.row_count:
            self._move_cursor(table, table.row_count - 1)
        self._show_hint()

    def _fill(self, rows: list[DocumentRow]) -> None:
        table = self.query_one("#documents", DataTable)
        selected = self.selected_document_id()
        table.clear()
        now = self.clock()
        self.rows = {}
        for row in rows:
            table.add_row(*self._cells(row, now), key=row.document_id)
            self.rows[row.document_id] = row
        if selected in self.rows:
            self._move_cursor(table, table.get_row_index(selected))
        self._show_empty(not rows)
        self._show_hint()

    def _show_empty(self, empty: bool) -> None:
        notice = self.query_one("#documents-empty", Static)
        notice.display = empty
        if empty:
            filtered = f"No {self.status_filter} documents. f: next status, 0: all."
            notice.update(Text(EMPTY if self.status_filter is None else filtered))

    def _cells(self, row: DocumentRow, now: float) -> tuple[Text, ...]:
        if is_interrupted(row.status, self.node_running):
            status = Text("interrupted", style="yellow")
        else:
            status = status_cell(row.status, row.progress, None)
        return (
            Text(fit(printable(row.name), self.name_width)),
            status,
            Text(human_size(row.size_bytes), justify="right"),
            Text(str(row.chunk_count), justify="right"),
            Text(short_time(row.updated_at, now)),
        )

    def _update_row(self, table: DataTable, old: DocumentRow, new: DocumentRow, now: float) -> None:
        cells = dict(zip(("name", "status", "size", "chunks", "updated"), self._cells(new, now), strict=True))
        changed = {
            "status": (old.status, old.progress, old.reason) != (new.status, new.progress, new.reason),
            "size": old.size_bytes != new.size_bytes,
            "chunks": old.chunk_count != new.chunk_count,
            "updated": old.updated_at != new.updated_at,
        }
        for column, differs in changed.items():
            if differs:
                try:
                    table.update_cell(new.document_id, column, cells[column])
                except (CellDoesNotExist, RowDoesNotExist):
                    return

    def _name_width_for(self, width: int) -> int:
        return max(MIN_NAME_WIDTH, width - sum(w for _, _, w in FIXED_COLUMNS) - TABLE_CHROME)

    def _build_columns(self) -> None:
        table = self.query_one("#documents", DataTable)
        self.name_width = self._name_width_for(self.size.width or self.app.size.width)
        table.clear(columns=True)
        table.add_column("Name", width=self.name_width, key="name")
        for key, label, width in FIXED_COLUMNS:
            table.add_column(label, width=width, key=key)

    # ------------------------------------------------------------ live updates

    def apply_live(self, events: list[DocumentStatusChanged]) -> None:
        """Show buffered pipeline events in place. What they cannot show (a new
        document, chunk counts, a row leaving a filtered view) the next poll reads."""
        table = self.query_one("#documents", DataTable)
        now = self.clock()
        for event in events:
            if event.collection_id != self.collection_id:
                continue
            old = self.rows.get(event.document_id)
            if old is None or (self.status_filter is not None and event.status != self.status_filter):
                continue
            new = dataclasses.replace(old, status=event.status, progress=event.progress, reason=event.reason)
            self._update_row(table, old, new, now)
            self.rows[event.document_id] = new

    def show_counts(self, counts: dict[str, int], *, node_running: bool | None = None) -> None:
        """The status line: how many documents are in each status, the filter marked."""
        self.counts = counts
        if node_running is not None and node_running != self.node_running:
            self.node_running = node_running
            self._fill(list(self.rows.values()))  # in-stage rows now read "interrupted", or no longer
        line = Text(no_wrap=True, overflow="ellipsis")
        entries = [(None, "All", sum(counts.values()))] + [
            (s.value, s.value, counts.get(s.value, 0)) for s in Status if counts.get(s.value) or s.value == self.status_filter
        ]
        for index, (value, label, count) in enumerate(entries):
            if index:
                line.append(" · ")
            style = "bold reverse" if value == self.status_filter else ""
            line.append(f"{label} {count}", style=style)
        interrupted = sum(n for status, n in counts.items() if is_interrupted(status, self.node_running))
        if interrupted:
            line.append(f"   {interrupted} {INTERRUPTED}", style="yellow")
        else:
            line.append("   f/0-6: filter", style="dim")
        self.query_one("#documents-filter", Static).update(line)

    def show_batch(self, line: str) -> None:
        """The batch line (running, or what the last one did), below the table."""
        self.batch_line = line
        self._show_hint()

    def _show_hint(self) -> None:
        """Below the table: why the selected document failed, else how the batch goes."""
        hint = self.query_one("#documents-hint", Static)
        row = self.selected_row()
        failed = row is not None and row.status == Status.FAILED.value
        if row is not None and failed:
            text = f"{row.reason or 'failed'}: {explain_reason(row.reason)} · r: retry · x: all failures"
        else:
            text = self.batch_line
        hint.set_class(failed, "-failed")
        hint.update(Text(text, no_wrap=True, overflow="ellipsis"))

    @on(DataTable.RowHighlighted, "#documents")
    def highlighted(self, event: DataTable.RowHighlighted) -> None:
        # On the last row the list follows new documents (as tail -f does); anywhere else it stays put.
        self.following = event.cursor_row >= event.data_table.row_count - 1
        self._show_hint()

    def _move_cursor(self, table: DataTable, row: int) -> None:
        table.move_cursor(row=row, animate=False)

    # ------------------------------------------------------------ actions

    def selected_document_id(self) -> str | None:
        table = self.query_one("#documents", DataTable)
        if table.row_count == 0:
            return None
        try:
            key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        except CellDoesNotExist:
            return None
        return key.value

    def selected_row(self) -> DocumentRow | None:
        document_id = self.selected_document_id()
        return None if document_id is None else self.rows.get(document_id)

    @on(DataTable.RowSelected, "#documents")
    def open_row(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.post_message(OpenDocument(event.row_key.value))

    def action_add_files(self) -> None:
        self.post_message(AddRequested())

    def action_delete_selected(self) -> None:
        row = self.selected_row()
        if row is None:
            self.notify("No document selected.", severity="warning")
            return
        self.post_message(DeleteRequested(row.document_id, printable(row.name)))

    def action_reindex_selected(self) -> None:
        row = self.selected_row()
        if row is None:
            self.notify("No document selected.", severity="warning")
            return
        self.post_message(ReindexRequested((row.document_id,)))

    def action_reindex_all(self) -> None:
        self.post_message(ReindexRequested(None))

    def action_cycle_filter(self) -> None:
        """The next status that has documents (empty ones are skipped), then All."""
        index = FILTERS.index(self.status_filter)
        for step in range(1, len(FILTERS) + 1):
            candidate = FILTERS[(index + step) % len(FILTERS)]
            if candidate is None or self.counts.get(candidate):
                self.set_filter(candidate)
                return

    def action_filter_key(self, key: int) -> None:
        """0: all, 1-6: Pending, Extracting, Chunking, Embedding, Indexed, Failed."""
        self.set_filter(FILTERS[key])

    def action_failures(self) -> None:
        self.post_message(FailuresRequested())

    def action_clear_filter(self) -> None:
        if self.status_filter is not None:
            self.set_filter(None)

    def show_collection(self, collection_id: str) -> None:
        """Show another collection's documents (the filter stays)."""
        self.collection_id = collection_id
        self.set_filter(self.status_filter)

    def set_filter(self, status: str | None) -> None:
        """Show only documents of ``status`` (None: all)."""
        self.status_filter = status
        self.show_counts(self.counts)
        self.rows = {}
        self.query_one("#documents", DataTable).clear()
        self.query_one("#documents-empty").display = False
        self.reload()
