"""Sources: register a folder, a file or a Git repository; see how each is kept
in sync and what its last scan changed; sync now; watch on or off; remove.

The list refreshes itself every second (a running node's watcher rescans in
the background). Scans run in thread workers; their progress posts
``ScanProgressed`` messages (they collapse in the queue) and their end a
``ScanFinished``. The documents a scan leaves Pending are indexed by the node
like any other.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.coordinate import Coordinate
from textual.message import Message
from textual.widgets import DataTable, ProgressBar, Static
from textual.worker import Worker, WorkerState

from kbtui.errors import OPERATOR_ERRORS
from kbtui.node import Node, SourceChanges, SourceRow
from kbtui.printable import printable
from kbtui.reads import Status
from kbtui.sources.sync import SyncFailed, SyncReport
from kbtui.tui.messages import DocumentsChanged, ScanFinished, ScanProgressed
from kbtui.tui.screens.base import KbtuiScreen
from kbtui.tui.screens.confirm import ConfirmScreen
from kbtui.tui.widgets.cells import full_time
from kbtui.tui.widgets.footer import KeysFooter
from kbtui.tui.widgets.lists import Table
from kbtui.tui.widgets.path_input import PathInput

NO_SOURCES = "No sources yet. Type a folder, a file or a Git repository above (Tab completes) and press Enter."
_STATUS_ORDER = {status.value: i for i, status in enumerate(Status)}
_OUTCOME_STYLE = {"added": "green", "updated": "yellow", "renamed": "cyan", "removed": "red", "skipped": "dim"}


def documents_cell(row: SourceRow) -> Text:
    if not row.counts:
        return Text("none")
    ordered = sorted(row.counts.items(), key=lambda item: _STATUS_ORDER.get(item[0], 99))
    cell = Text(", ".join(f"{n} {status.lower()}" for status, n in ordered))
    unseen = sum(row.unreachable.values())
    if unseen:
        cell.append(f", {unseen} unreachable", style="bold red")
    return cell


def last_scan_cell(row: SourceRow) -> Text:
    source = row.source
    if source.last_scan_at is None:
        return Text("never")
    cell = Text(f"{time.strftime('%m-%d %H:%M', time.localtime(source.last_scan_at))} {source.last_scan_status}")
    if source.unreachable_reason is not None:
        cell.append(f" · unreachable: {source.unreachable_reason}", style="bold red")
    return cell


def scan_summary(name: str, report: SyncReport, mode: str) -> Text:
    line = Text()
    line.append(printable(name), style="bold")
    line.append(f": {report.summary()}")
    pending = len(report.pending_document_ids)
    if pending:
        where = "the node is indexing them" if mode == "node" else (
            "the running node indexes them" if mode == "client" else "they wait for a node (kbtui serve)"
        )
        line.append(f" · {pending} queued: {where}")
    if not report.completed:
        line.append(f"\n{report.status}: nothing was removed", style="bold red")
    if report.unreachable.count:
        line.append(
            f"\n{report.unreachable.count} document(s) kept: their files cannot be seen "
            "(P prunes them once you know they are gone)", style="bold red",
        )
    return line


class SourcesScreen(KbtuiScreen):
    """Register sources and see each one's state and its last scan's changes."""

    BINDINGS = [
        Binding("escape", "back", "Back", id="sources.back"),
        Binding("a", "focus_path", "Add", id="sources.add", tooltip="Register a folder, file or repository"),
        Binding("s", "sync", "Sync now", id="sources.sync"),
        Binding("w", "toggle_watch", "Watch on/off", id="sources.watch"),
        Binding("x", "remove", "Remove", id="sources.remove", tooltip="Remove the source and its documents"),
        # Off the footer (it is for a rare, deliberate act): the scan summary names it when it applies.
        Binding("P", "prune", "Prune", id="sources.prune", show=False,
                tooltip="Remove the documents whose files cannot be seen (unreachable)"),
    ]

    DEFAULT_CSS = """
    SourcesScreen #sources-heading { height: 1; padding: 0 1; background: $panel; }
    SourcesScreen #sources-add { height: 1; margin: 0 1; border: none; padding: 0 1; }
    SourcesScreen #sources-table { height: auto; max-height: 9; }
    SourcesScreen #sources-progress { padding: 0 1; height: auto; }
    SourcesScreen #sources-summary { height: auto; padding: 0 1; }
    SourcesScreen #sources-changes-title { height: 1; padding: 0 1; color: $text-muted; }
    SourcesScreen #sources-changes { height: 1fr; }
    """

    class SourcesLoaded(Message):
        def __init__(self, rows: list[SourceRow]) -> None:
            super().__init__()
            self.rows = rows

    class ChangesLoaded(Message):
        def __init__(self, source_id: str, changes: SourceChanges | None) -> None:
            super().__init__()
            self.source_id = source_id
            self.changes = changes

    def __init__(self, node: Node, collection_id: str, mode: str, *, refresh_s: float = 1.0) -> None:
        super().__init__()
        self.title = "Sources"
        self.node = node
        self.collection_id = collection_id
        self.mode = mode
        self.refresh_s = refresh_s
        self.rows: dict[str, SourceRow] = {}
        self.changes: SourceChanges | None = None
        self.report: SyncReport | None = None
        self.scanning: str | None = None  # the source id (or path) being scanned
        self._shown_scan: tuple[str, float | None] | None = None

    def compose(self) -> ComposeResult:
        yield Static(
            Text.assemble(("Sources", "bold"), f" of every collection · new ones go to {self.collection_id}"),
            id="sources-heading",
        )
        yield PathInput(placeholder="Add a folder, file or Git repository (Tab completes, Enter adds)", id="sources-add")
        yield Table(id="sources-table", cursor_type="row", zebra_stripes=False)
        yield ProgressBar(id="sources-progress", show_eta=False)
        yield Static(id="sources-summary")
        yield Static("Last scan", id="sources-changes-title")
        yield Table(id="sources-changes", cursor_type="row", show_cursor=False)
        yield KeysFooter()

    def on_mount(self) -> None:
        table = self.query_one("#sources-table", DataTable)
        table.add_columns("Name", "Kind", "Collection", "Documents", "Last scan", "Watch")
        self.query_one("#sources-changes", DataTable).add_columns("Change", "File", "Why")
        self.query_one("#sources-progress").display = False
        table.focus()
        self._load()
        self.set_interval(self.refresh_s, self._refresh)

    # ------------------------------------------------------------ loading (live)

    def _refresh(self) -> None:
        if not any(w.group == "sources-list" and w.is_running for w in self.workers):
            self._load()

    @work(thread=True, exclusive=True, group="sources-list", exit_on_error=False)
    def _load(self) -> None:
        self.post_message(self.SourcesLoaded(self.node.sources()))

    def on_sources_screen_sources_loaded(self, message: SourcesLoaded) -> None:
        table = self.query_one("#sources-table", DataTable)
        selected = self.selected_id()
        rows = {row.source.id: row for row in message.rows}
        if list(rows) != list(self.rows):
            table.clear()
            for source_id, row in rows.items():
                table.add_row(*self._cells(row), key=source_id)
            if selected in rows:
                table.move_cursor(row=list(rows).index(selected))
        else:
            for source_id, row in rows.items():
                if row != self.rows.get(source_id):
                    for column, value in zip(table.columns, self._cells(row), strict=True):
                        table.update_cell(source_id, column, value)
        self.rows = rows
        if not rows and self.scanning is None:
            self.query_one("#sources-summary", Static).update(Text(NO_SOURCES))
        self._show_changes_of(self.selected_id())

    @staticmethod
    def _cells(row: SourceRow) -> tuple[Text | str, ...]:
        source = row.source
        watch = Text(row.watch, style="green" if row.watch in ("events", "polling") else "dim")
        return (
            Text(printable(source.name), style="bold"), source.kind, source.collection_id,
            documents_cell(row), last_scan_cell(row), watch,
        )

    def selected_id(self) -> str | None:
        table = self.query_one("#sources-table", DataTable)
        if not self.rows or table.cursor_row < 0 or table.cursor_row >= table.row_count:
            return None
        return str(table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key.value)

    @on(DataTable.RowHighlighted, "#sources-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_changes_of(self.selected_id())

    def _show_changes_of(self, source_id: str | None) -> None:
        row = self.rows.get(source_id) if source_id else None
        wanted = None if row is None else (row.source.id, row.source.last_scan_at)
        if wanted == self._shown_scan:
            return
        self._shown_scan = wanted
        if row is None:
            self._show_changes(None, None)
        else:
            self._load_changes(row.source.id)

    @work(thread=True, exclusive=True, group="sources-changes", exit_on_error=False)
    def _load_changes(self, source_id: str) -> None:
        self.post_message(self.ChangesLoaded(source_id, self.node.source_changes(source_id)))

    def on_sources_screen_changes_loaded(self, message: ChangesLoaded) -> None:
        if message.source_id == self.selected_id():
            self._show_changes(self.rows.get(message.source_id), message.changes)

    def _show_changes(self, row: SourceRow | None, changes: SourceChanges | None) -> None:
        self.changes = changes
        title = self.query_one("#sources-changes-title", Static)
        table = self.query_one("#sources-changes", DataTable)
        table.clear()
        if row is None:
            title.update("Last scan")
            return
        if changes is None:
            title.update(Text(f"Last scan of {printable(row.source.name)}: none yet", style="dim"))
            return
        counts = ", ".join(f"{n} {name}" for name, n in changes.counts.items() if n) or "nothing changed"
        skipped = sum(changes.skipped.values())
        title.update(Text(
            f"Last scan of {printable(row.source.name)} ({full_time(changes.finished_at)}, {changes.status}): "
            f"{counts}{f', {skipped} skipped' if skipped else ''}"
        ))
        for entry in changes.files:
            change = Text(entry.outcome, style=_OUTCOME_STYLE.get(entry.outcome, ""))
            path = printable(entry.path) + (f" (was {printable(entry.previous_path)})" if entry.previous_path else "")
            table.add_row(change, path, entry.reason or "")

    # ------------------------------------------------------------ actions

    def action_focus_path(self) -> None:
        self.query_one("#sources-add", PathInput).focus()

    @on(PathInput.Submitted, "#sources-add")
    def _add_submitted(self, event: PathInput.Submitted) -> None:
        raw = event.value.strip()
        if not raw:
            return
        if self._busy():
            return
        self._start_scan(raw)
        self._add(os.path.expanduser(raw), self.collection_id)
        event.input.value = ""
        self.query_one("#sources-table", DataTable).focus()

    def action_sync(self) -> None:
        source_id = self.selected_id()
        if source_id is None or self._busy():
            return
        self._start_scan(source_id)
        self._sync(source_id)

    def action_prune(self) -> None:
        """Sync, removing what cannot be seen - only after the operator says so."""
        source_id = self.selected_id()
        if source_id is None:
            return
        row = self.rows[source_id]
        unseen = sum(row.unreachable.values())
        if not unseen and row.source.unreachable_reason is None:
            self.notify("Every file of this source can be seen: nothing to prune.")
            return

        def answered(yes: bool | None) -> None:
            if yes and not self._busy():
                self._start_scan(source_id)
                self._sync(source_id, prune=True)

        self.app.push_screen(
            ConfirmScreen(
                f"Prune the source “{printable(row.source.name)}”?\n"
                f"Its {unseen or 'unseen'} document(s) whose files cannot be seen are deleted from the knowledge base. "
                "Do this only when the files are gone for good, not when a disk is merely not mounted.",
                yes_label="Prune",
            ),
            answered,
        )

    def _busy(self) -> bool:
        if self.scanning is not None:
            self.notify("A scan is already running.", severity="warning")
            return True
        return False

    def _start_scan(self, what: str) -> None:
        self.scanning = what
        progress = self.query_one("#sources-progress", ProgressBar)
        progress.update(total=None, progress=0)
        progress.display = True
        self.query_one("#sources-summary", Static).update(Text("Scanning…"))

    def _progress(self, done: int, total: int) -> None:
        self.post_message(ScanProgressed(done, total))

    @work(thread=True, exclusive=True, group="sources-scan", exit_on_error=False)
    def _add(self, path: str, collection_id: str) -> None:
        try:
            synced = self.node.add_source(Path(path), collection_id, on_progress=self._progress)
        except SyncFailed as failure:
            self.post_message(ScanFinished("", failure.report, failure.message))
            return
        except OPERATOR_ERRORS as problem:
            self.post_message(ScanFinished("", None, problem.message))
            return
        self.post_message(ScanFinished(synced.row.source.name, synced.report))

    @work(thread=True, exclusive=True, group="sources-scan", exit_on_error=False)
    def _sync(self, source_id: str, *, prune: bool = False) -> None:
        name = self.rows[source_id].source.name if source_id in self.rows else ""
        try:
            report = self.node.sync_source(source_id, prune=prune, on_progress=self._progress)
        except SyncFailed as failure:
            self.post_message(ScanFinished(name, failure.report, failure.message))
            return
        except OPERATOR_ERRORS as problem:
            self.post_message(ScanFinished(name, None, problem.message))
            return
        self.post_message(ScanFinished(name, report))

    def on_scan_progressed(self, message: ScanProgressed) -> None:
        self.query_one("#sources-progress", ProgressBar).update(total=max(1, message.total), progress=message.done)
        self.query_one("#sources-summary", Static).update(Text(f"Scanning… {message.done}/{message.total} files"))

    def on_scan_finished(self, message: ScanFinished) -> None:
        self.scanning = None
        self.report = message.report
        self.query_one("#sources-progress").display = False
        summary = self.query_one("#sources-summary", Static)
        if message.report is None:
            summary.update(Text(f"Not added: {message.problem}", style="bold red"))
            return
        text = scan_summary(message.name, message.report, self.mode)
        if message.problem:
            text.append(f"\n{message.problem}", style="bold red")
        summary.update(text)
        self._shown_scan = None  # show this scan's changes
        self.post_message(DocumentsChanged(message.report.collection_id))
        self._load()

    def action_toggle_watch(self) -> None:
        source_id = self.selected_id()
        if source_id is not None:
            self._set_watching(source_id, not self.rows[source_id].source.watching)

    @work(thread=True, group="sources-edit", exit_on_error=False)
    def _set_watching(self, source_id: str, watching: bool) -> None:
        row = self.node.set_source_watching(source_id, watching)
        self.post_message(self.SourcesLoaded(self.node.sources()))
        state = "on" if row.source.watching else "off"
        self.post_message(DocumentsChanged(row.source.collection_id, f"Watching {printable(row.source.name)}: {state}"))

    def action_remove(self) -> None:
        source_id = self.selected_id()
        if source_id is None:
            return
        row = self.rows[source_id]

        def answered(yes: bool | None) -> None:
            if yes:
                self._remove(source_id, row.source.collection_id)

        self.app.push_screen(
            ConfirmScreen(
                f"Remove the source “{printable(row.source.name)}”?\n"
                f"Its {row.document_count} document(s) are deleted from the knowledge base "
                "(the files themselves stay where they are).",
                yes_label="Remove",
            ),
            answered,
        )

    @work(thread=True, group="sources-edit", exit_on_error=False)
    def _remove(self, source_id: str, collection_id: str) -> None:
        purged = self.node.remove_source(source_id)
        self.post_message(DocumentsChanged(collection_id, f"Source removed, {purged} document(s) deleted"))
        self.post_message(self.SourcesLoaded(self.node.sources()))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "sources-scan" and event.state == WorkerState.ERROR:
            self.scanning = None
            self.query_one("#sources-progress").display = False
        super().on_worker_state_changed(event)
