"""The Documents screen: every document of the active collection, live.

Rows come from the database: a thread worker reads them when the poller sees
a change, only the rows updated since the newest one shown while the set of
documents stays the same (ingestion), everything otherwise. Between reads,
pipeline events buffered by the app update the status cells in place. The
table is keyed by document id, so a read changes only the cells that differ.

``f`` filters the list by name as you type, ``N``/``S``/``Z``/``C``/``U`` sort
it by a column (again: the other way), k9s's way. A filtered or sorted list is
redrawn whole when rows change; the plain list keeps updating in place.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable, Input, Static
from textual.widgets.data_table import CellDoesNotExist, RowDoesNotExist

from actors.events import DocumentStatusChanged
from kbtui.logs import LogLine
from kbtui.node import Node
from kbtui.printable import printable
from kbtui.reads import DocumentRow, Status, is_interrupted, serves_previous_index
from kbtui.reasons import INTERRUPTED, explain_reason
from kbtui.tui.messages import AddRequested, DeleteRequested, FailuresRequested, OpenDocument, ReindexRequested
from kbtui.tui.screens.base import KbtuiScreen
from kbtui.tui.widgets.cells import fit, human_size, short_time, status_cell
from kbtui.tui.widgets.events_pane import EventsPane
from kbtui.tui.widgets.footer import KeysFooter
from kbtui.tui.widgets.ingest_header import IngestHeader
from kbtui.tui.widgets.lists import Table

FILTERS: tuple[str | None, ...] = (None, *(s.value for s in Status))
# Reasons are explained below the table (and in the failures view), so the
# status column stays narrow and the name gets the room. On a narrow terminal
# the fixed columns give way from the last (update time, then chunks, then
# size) before the name is cut below NAME_ROOM.
FIXED_COLUMNS = (("status", "Status", 15), ("size", "Size", 9), ("chunks", "Chunks", 6), ("updated", "Upd.", 5))
COLUMN_KEYS = ("name", *(key for key, _, _ in FIXED_COLUMNS))
# Per column: its cell padding (2); for the table: the vertical scrollbar (1) and a spare column.
COLUMN_CHROME = 2
TABLE_CHROME = COLUMN_CHROME + 2
NAME_ROOM = 24
MIN_NAME_WIDTH = 12
EMPTY = "No documents yet. Press a to add a folder, a file or a repository, i for sources."
# Sort keys: (key, column, label); pressing the key again sorts the other way.
SORTS = (("N", "name", "Name"), ("S", "status", "Status"), ("Z", "size", "Size"), ("C", "chunks", "Chunks"),
         ("U", "updated", "Updated"))
_STATUS_ORDER = {status.value: index for index, status in enumerate(Status)}
SERVING_OLD = "re-indexing (serving the old index)"


def columns_for(width: int) -> tuple[tuple[str, ...], int]:
    """The fixed columns that fit beside a readable name at ``width``, and the name's width."""
    keys = [key for key, _, _ in FIXED_COLUMNS]
    widths = {key: w for key, _, w in FIXED_COLUMNS}

    def name_width(shown: list[str]) -> int:
        return width - TABLE_CHROME - sum(widths[k] + COLUMN_CHROME for k in shown)

    while len(keys) > 1 and name_width(keys) < NAME_ROOM:
        keys.pop()  # the last fixed column gives way first
    return tuple(keys), max(MIN_NAME_WIDTH, name_width(keys))


def sort_value(row: DocumentRow, column: str) -> tuple:
    """What ``column`` sorts ``row`` by (names ignoring case, statuses in pipeline order)."""
    if column == "status":
        return (_STATUS_ORDER.get(row.status, 99), serves_previous_index(row))
    if column == "size":
        return (row.size_bytes,)
    if column == "chunks":
        return (row.chunk_count,)
    if column == "updated":
        return (row.updated_at,)
    return (printable(row.name).casefold(),)


def name_matches(row: DocumentRow, words: str) -> bool:
    """Every word of ``words`` is in the name or source path (ignoring case)."""
    haystack = f"{row.name}\n{row.source_path or ''}".casefold()
    return all(word in haystack for word in words.casefold().split())


class DocumentsScreen(KbtuiScreen):
    """Documents with status, stage progress, size, chunks, update time and failure reason."""

    BINDINGS = [
        Binding("a", "add_files", "Add", id="documents.add", tooltip="Add a file or a directory"),
        Binding("d", "delete_selected", "Delete", id="documents.delete", tooltip="Delete the selected document"),
        Binding("r", "reindex_selected", "Reindex", id="documents.reindex"),
        Binding("R", "reindex_all", "Reindex all", id="documents.reindex_all", show=False),
        Binding("f", "filter_names", "Filter", id="documents.filter", tooltip="Filter by name as you type"),
        Binding("s", "cycle_filter", "Status", id="documents.status",
                tooltip="Next status that has documents (0-6: All, Pending ... Failed)"),
        Binding("x", "failures", "Failures", id="documents.failures", tooltip="Failed documents, why, and retry"),
        Binding("l", "toggle_events", "Events", id="documents.events", tooltip="The node's log lines, live"),
        Binding("escape", "clear_filter", "All", id="documents.clear_filter", show=False),
        *[Binding(str(key), f"filter_key({key})", label, id=f"documents.filter_{key}", show=False)
          for key, label in enumerate(("All", *(s.value for s in Status)))],
        *[Binding(key, f"sort_by('{column}')", f"Sort by {label.lower()}", id=f"documents.sort_{column}", show=False)
          for key, column, label in SORTS],
    ]

    DEFAULT_CSS = """
    DocumentsScreen #documents-filter { height: 1; padding: 0 1; color: $text-muted; }
    DocumentsScreen #documents-names { height: 1; margin: 0 1; display: none; }
    DocumentsScreen #documents-names.-shown { display: block; }
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
        self.name_filter = ""
        self.sort: tuple[str, bool] | None = None  # (column, descending)
        self.loaded: dict[str, DocumentRow] = {}  # every row read (for the status filter), in catalog order
        self.rows: dict[str, DocumentRow] = {}  # the rows shown, in table order
        self.columns: tuple[str, ...] = COLUMN_KEYS
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
        yield Input(placeholder="filter names: type words (Enter keeps, Esc clears)", id="documents-names",
                    compact=True)
        yield Static(Text(EMPTY), id="documents-empty")
        yield Table(id="documents", cursor_type="row", zebra_stripes=True)
        yield EventsPane(id="documents-events")
        yield Static(id="documents-hint")
        yield KeysFooter()

    def on_mount(self) -> None:
        self._ready = True
        self.query_one("#documents", DataTable).focus()  # not the name filter's box: it shows only after f
        self._build_columns()
        self.show_counts(self.counts)
        self.reload()

    def on_resize(self) -> None:
        if columns_for(self.size.width) != (self.columns[1:], self.name_width):
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
        if self.status_filter is not None or document_count != len(self.loaded) or not self.loaded:
            self.reload()
        elif any(w.group == "documents-load" and w.is_running for w in self.workers):
            self._reload_wanted = True
        else:
            self._load(self.collection_id, None, max(row.updated_at for row in self.loaded.values()))

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

    @property
    def arranged(self) -> bool:
        """Filtered by name or sorted: the table is not the catalog's order."""
        return bool(self.name_filter) or self.sort is not None

    def _apply_changes(self, rows: list[DocumentRow]) -> None:
        table = self.query_one("#documents", DataTable)
        now = self.clock()
        changed = False
        for row in rows:
            old = self.loaded.get(row.document_id)
            if old is None:
                self._reload_wanted = True  # a document the table does not have yet
            elif old != row:
                changed = True
                self.loaded[row.document_id] = row
                if not self.arranged:
                    self._update_row(table, old, row, now)
                    self.rows[row.document_id] = row
        if changed and self.arranged:
            self._fill(self._shown())
        self.show_counts(self.counts)
        self._show_hint()

    def _shown(self) -> list[DocumentRow]:
        """The loaded rows the name filter keeps, in the chosen order."""
        rows = [row for row in self.loaded.values() if not self.name_filter or name_matches(row, self.name_filter)]
        if self.sort is not None:
            column, descending = self.sort
            rows.sort(key=lambda row: sort_value(row, column), reverse=descending)
        return rows

    def _apply(self, rows: list[DocumentRow]) -> None:
        self.loaded = {row.document_id: row for row in rows}
        self.show_counts(self.counts)
        if self.arranged:
            self._fill(self._shown())
            return
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
            if self.name_filter:
                notice.update(Text(f"No document's name holds {self.name_filter!r}. Esc: clear the filter."))
            elif self.status_filter is not None:
                notice.update(Text(f"No {self.status_filter} documents. s: next status, 0: all."))
            else:
                notice.update(Text(EMPTY))

    def _cell_values(self, row: DocumentRow, now: float) -> dict[str, Text]:
        if is_interrupted(row.status, self.node_running):
            status = Text("interrupted", style="yellow")
        elif serves_previous_index(row):
            # Still searchable as it was: never shown as a plain Pending, which reads as a lost index.
            status = status_cell(row.status, row.progress, None, reindexing=True)
        else:
            status = status_cell(row.status, row.progress, None)
        return {
            "name": Text(fit(printable(row.name), self.name_width)),
            "status": status,
            "size": Text(human_size(row.size_bytes), justify="right"),
            "chunks": Text(str(row.chunk_count), justify="right"),
            "updated": Text(short_time(row.updated_at, now)),
        }

    def _cells(self, row: DocumentRow, now: float) -> tuple[Text, ...]:
        values = self._cell_values(row, now)
        return tuple(values[key] for key in self.columns)

    def _update_row(self, table: DataTable, old: DocumentRow, new: DocumentRow, now: float) -> None:
        cells = self._cell_values(new, now)
        changed = {
            "status": (old.status, old.progress, old.reason) != (new.status, new.progress, new.reason),
            "size": old.size_bytes != new.size_bytes,
            "chunks": old.chunk_count != new.chunk_count,
            "updated": old.updated_at != new.updated_at,
        }
        for column, differs in changed.items():
            if differs and column in self.columns:
                try:
                    table.update_cell(new.document_id, column, cells[column])
                except (CellDoesNotExist, RowDoesNotExist):
                    return

    def _build_columns(self) -> None:
        table = self.query_one("#documents", DataTable)
        fixed, self.name_width = columns_for(self.size.width or self.app.size.width)
        self.columns = ("name", *fixed)
        table.clear(columns=True)
        table.add_column(self._label("name", "Name"), width=self.name_width, key="name")
        for key, label, width in FIXED_COLUMNS:
            if key in fixed:
                table.add_column(self._label(key, label), width=width, key=key)

    def _label(self, column: str, label: str) -> Text:
        """The column's title, with ▲/▼ when the list is sorted by it."""
        if self.sort is None or self.sort[0] != column:
            return Text(label)
        return Text(f"{label} {'▼' if self.sort[1] else '▲'}", style="bold")

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
            self.loaded[event.document_id] = new
        self._show_hint()  # the selected document may have just failed

    def show_counts(self, counts: dict[str, int], *, node_running: bool | None = None) -> None:
        """The status line: how many documents are in each status, the filter marked."""
        self.counts = counts
        if node_running is not None and node_running != self.node_running:
            self.node_running = node_running
            self._fill(list(self.rows.values()))  # in-stage rows now read "interrupted", or no longer
        line = Text(no_wrap=True, overflow="ellipsis")
        reindexing = self.reindexing_counts()
        entries = [(None, "All", sum(counts.values()))] + [
            (s.value, s.value, counts.get(s.value, 0) - reindexing.get(s.value, 0))
            for s in Status
            if counts.get(s.value, 0) - reindexing.get(s.value, 0) > 0 or s.value == self.status_filter
        ]
        for index, (value, label, count) in enumerate(entries):
            if index:
                line.append(" · ")
            style = "bold reverse" if value == self.status_filter else ""
            line.append(f"{label} {count}", style=style)
        if reindexing:
            line.append(f" · {sum(reindexing.values())} {SERVING_OLD}", style="cyan")
        interrupted = sum(n for status, n in counts.items() if is_interrupted(status, self.node_running))
        if interrupted:
            line.append(f"   {interrupted} {INTERRUPTED}", style="yellow")
        elif self.name_filter:
            line.append(f"   names: {printable(self.name_filter)} ({len(self.rows)} shown; Esc clears)", style="bold")
        else:
            line.append("   f: filter · s/0-6: status", style="dim")
        self.query_one("#documents-filter", Static).update(line)

    def reindexing_counts(self) -> dict[str, int]:
        """Per waiting status, how many of the loaded documents still serve their previous index."""
        found: dict[str, int] = {}
        for row in self.loaded.values():
            if serves_previous_index(row):
                found[row.status] = found.get(row.status, 0) + 1
        return found

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
            text = (f"{printable(row.source_path or row.name)}: {row.reason or 'failed'}: {explain_reason(row.reason)}"
                    " · r: retry · x: all failures")
        elif row is not None and serves_previous_index(row) and not is_interrupted(row.status, self.node_running):
            text = f"{SERVING_OLD}: search still finds it as it was · {self.batch_line}".rstrip(" ·")
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
        """Esc: the name filter first, then the status filter."""
        if self.name_filter:
            self.filter_names("")
        elif self.status_filter is not None:
            self.set_filter(None)

    def action_filter_names(self) -> None:
        """``f``: type to filter the list by name (Enter keeps the filter, Esc clears it)."""
        box = self.query_one("#documents-names", Input)
        box.add_class("-shown")
        box.value = self.name_filter
        box.focus()

    @on(Input.Changed, "#documents-names")
    def _names_typed(self, event: Input.Changed) -> None:
        if event.input.has_class("-shown"):
            self.filter_names(event.value, keep_box=True)

    @on(Input.Submitted, "#documents-names")
    def _names_kept(self, event: Input.Submitted) -> None:
        self.filter_names(event.value)

    def on_key(self, event: events.Key) -> None:
        box = self.query_one("#documents-names", Input)
        if box.has_focus and event.key in ("escape", "down", "up"):
            event.stop()
            self.filter_names("" if event.key == "escape" else box.value)

    def filter_names(self, words: str, *, keep_box: bool = False) -> None:
        """Show only documents whose name (or source path) holds every word of ``words``."""
        self.name_filter = words.strip()
        box = self.query_one("#documents-names", Input)
        if not keep_box:
            box.set_class(bool(self.name_filter), "-shown")
            if box.value != self.name_filter:
                box.value = self.name_filter
            self.query_one("#documents", DataTable).focus()
        self._fill(self._shown())
        self.show_counts(self.counts)

    def action_sort_by(self, column: str) -> None:
        """Sort by ``column``; the same key again sorts the other way, a third time back to the catalog's order."""
        if self.sort is None or self.sort[0] != column:
            self.sort = (column, False)
        elif not self.sort[1]:
            self.sort = (column, True)
        else:
            self.sort = None
        self._build_columns()
        self._fill(self._shown())

    def action_toggle_events(self) -> None:
        self.app.toggle_events()  # type: ignore[attr-defined]

    @property
    def events_shown(self) -> bool:
        return self.query_one(EventsPane).has_class("-shown")

    def show_events(self, lines: list[LogLine], *, shown: bool) -> None:
        """Open the events pane with ``lines`` (the ones kept so far), or close it."""
        pane = self.query_one(EventsPane)
        pane.set_class(shown, "-shown")
        pane.clear()
        if shown:
            pane.add_lines(lines)

    def show_log_lines(self, lines: list[LogLine]) -> None:
        """New log lines, shown at once when the pane is open."""
        if self.events_shown:
            self.query_one(EventsPane).add_lines(lines)

    def copy_target(self) -> tuple[str, str] | None:
        """``y``/``Y``: the selected document's id and its path (its name for an upload)."""
        row = self.selected_row()
        return None if row is None else (row.document_id, row.source_path or row.name)

    def show_collection(self, collection_id: str) -> None:
        """Show another collection's documents (the filter stays)."""
        self.collection_id = collection_id
        self.set_filter(self.status_filter)

    def set_filter(self, status: str | None) -> None:
        """Show only documents of ``status`` (None: all)."""
        self.status_filter = status
        self.show_counts(self.counts)
        self.rows = {}
        self.loaded = {}
        self.query_one("#documents", DataTable).clear()
        self.query_one("#documents-empty").display = False
        self.reload()
