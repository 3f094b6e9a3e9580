"""Import a registered Git repository into a collection and watch the scan.

The import runs in a thread worker; its progress callback posts
``ImportProgressed`` messages (they collapse in the queue), and the report
shows added / updated / unchanged / removed / skipped (with reasons). The
documents it leaves Pending are indexed by the node like any other.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Footer, Input, OptionList, ProgressBar, Static
from textual.widgets.option_list import Option
from textual.worker import Worker, WorkerState

from kbtui.collections import canonical_collection_id
from kbtui.errors import OPERATOR_ERRORS, InvalidCollection
from kbtui.node import Node, SourceRow as RepositoryRow
from kbtui.printable import printable
from kbtui.sources.sync import SyncFailed as ImportFailed, SyncReport as ImportReport
from kbtui.tui.messages import DocumentsChanged, ImportFinished, ImportProgressed
from kbtui.tui.screens.base import KbtuiScreen
from kbtui.tui.widgets.cells import full_time, human_size

NO_REPOSITORIES = "No repositories are registered. Register one with `kbtui repo add PATH`, then come back."


def report_table(report: ImportReport) -> Table:
    """The outcome counts and sizes, skipped ones by reason."""
    table = Table(box=None, header_style="bold", pad_edge=False, expand=False)
    table.add_column("Outcome")
    table.add_column("Files", justify="right")
    table.add_column("Size", justify="right")
    for label, tally in (("added", report.added), ("updated", report.updated),
                         ("unchanged", report.unchanged), ("removed", report.removed)):
        table.add_row(label, str(tally.count), human_size(tally.bytes))
    skipped = report.skipped
    table.add_row("skipped", str(sum(t.count for t in skipped.values())), human_size(sum(t.bytes for t in skipped.values())))
    for reason, tally in sorted(skipped.items()):
        table.add_row(Text(f"  {reason}", style="dim"), str(tally.count), human_size(tally.bytes))
    return table


def report_summary(report: ImportReport, mode: str) -> Text:
    line = Text()
    line.append(f"{report.status}", style="bold" if report.completed else "bold red")
    line.append(f" · {report.listed} files listed into {report.collection_id}")
    pending = len(report.pending_document_ids)
    if pending:
        where = "the node is indexing them" if mode == "node" else (
            "the running node indexes them" if mode == "client" else "they wait for a node (kbtui serve)"
        )
        line.append(f" · {pending} queued: {where}")
    if report.status == "incomplete":
        line.append("\nStopped at the aggregate byte limit: nothing was removed.", style="bold")
    return line


class ImportScreen(KbtuiScreen):
    """Pick a registered repository and a collection; watch the scan."""

    BINDINGS = [Binding("escape", "back", "Back", id="import.back")]

    DEFAULT_CSS = """
    ImportScreen #import-heading { height: 1; padding: 0 1; background: $panel; }
    ImportScreen #import-repositories { height: auto; max-height: 8; }
    ImportScreen #import-collection-row { height: auto; padding: 0 1; }
    ImportScreen #import-collection { width: 40; margin: 0 1; }
    ImportScreen #import-progress { padding: 0 1; height: auto; }
    ImportScreen #import-summary { height: auto; padding: 0 1; }
    ImportScreen #import-report { height: auto; padding: 0 1; }
    """

    class RepositoriesLoaded(Message):
        def __init__(self, registered: list[RepositoryRow]) -> None:
            super().__init__()
            self.registered = registered

    def __init__(self, node: Node, collection_id: str, mode: str) -> None:
        super().__init__()
        self.title = "Import"
        self.node = node
        self.collection_id = collection_id
        self.mode = mode
        self.registered: list[RepositoryRow] = []
        self.running = False
        self.report: ImportReport | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text.assemble(("Import a repository", "bold"), "  ·  Enter on a repository starts it"), id="import-heading")
        yield OptionList(id="import-repositories")
        yield Static(Text("Collection (Tab to edit):"), id="import-collection-row")
        yield Input(self.collection_id, id="import-collection", compact=True)
        yield ProgressBar(id="import-progress", show_eta=False)
        yield Static(id="import-summary")
        yield Static(id="import-report")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#import-progress").display = False
        self.query_one("#import-repositories", OptionList).focus()
        self._load_repositories()

    @work(thread=True, exclusive=True, group="import-list", exit_on_error=False)
    def _load_repositories(self) -> None:
        self.post_message(self.RepositoriesLoaded(self.node.repositories()))

    def on_import_screen_repositories_loaded(self, message: RepositoriesLoaded) -> None:
        self.registered = message.registered
        options = self.query_one("#import-repositories", OptionList)
        options.clear_options()
        if not self.registered:
            self.query_one("#import-summary", Static).update(Text(NO_REPOSITORIES))
            return
        for row in self.registered:
            repository = row.repository
            label = Text(printable(repository.name), style="bold")
            label.append(f"  {printable(repository.root)}", style="dim")
            last = "never imported" if repository.last_import_at is None else (
                f"last import {full_time(repository.last_import_at)} {repository.last_import_status}"
            )
            label.append(f"\n  {last}", style="dim")
            options.add_option(Option(label, id=repository.id))
        options.highlighted = 0

    @on(OptionList.OptionSelected, "#import-repositories")
    def start(self, event: OptionList.OptionSelected) -> None:
        if self.running:
            self.notify("An import is already running.", severity="warning")
            return
        try:
            collection_id = canonical_collection_id(self.query_one("#import-collection", Input).value)
        except InvalidCollection as problem:
            self.query_one("#import-summary", Static).update(Text(problem.message, style="bold red"))
            return
        self.running = True
        progress = self.query_one("#import-progress", ProgressBar)
        progress.update(total=None, progress=0)
        progress.display = True
        self.query_one("#import-summary", Static).update(Text("Scanning…"))
        self.query_one("#import-report", Static).update("")
        self._import(str(event.option.id), collection_id)

    @work(thread=True, exclusive=True, group="import", exit_on_error=False)
    def _import(self, repository_id: str, collection_id: str) -> None:
        try:
            report = self.node.import_repository(
                repository_id, collection_id,
                on_progress=lambda done, total: self.post_message(ImportProgressed(done, total)),
            )
        except ImportFailed as failure:
            self.post_message(ImportFinished(failure.report, failure.message))
            return
        except OPERATOR_ERRORS as problem:
            self.post_message(ImportFinished(None, problem.message))
            return
        self.post_message(ImportFinished(report))

    def on_import_progressed(self, message: ImportProgressed) -> None:
        self.query_one("#import-progress", ProgressBar).update(total=max(1, message.total), progress=message.done)
        self.query_one("#import-summary", Static).update(Text(f"Scanning… {message.done}/{message.total} files"))

    def on_import_finished(self, message: ImportFinished) -> None:
        self.running = False
        self.report = message.report
        self.query_one("#import-progress").display = False
        summary = self.query_one("#import-summary", Static)
        if message.report is None:
            summary.update(Text(f"Import failed: {message.problem}", style="bold red"))
            return
        text = report_summary(message.report, self.mode)
        if message.problem:
            text.append(f"\n{message.problem}", style="bold red")
        summary.update(text)
        self.query_one("#import-report", Static).update(report_table(message.report))
        self.post_message(DocumentsChanged(message.report.collection_id))
        self._load_repositories()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "import" and event.state == WorkerState.ERROR:
            self.running = False
            self.query_one("#import-progress").display = False
        super().on_worker_state_changed(event)
