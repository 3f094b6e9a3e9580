"""The Textual application: documents, search, detail, sources, collections.

One app with a default screen (Documents). It runs as the node (the actor
pipeline in this process, its events arriving through :class:`TuiBridge`, and
the node's local API served to other clients) when no node runs for the data
directory, otherwise as a client that follows the running node's event
stream, reads the database and adds documents as Pending rows for the node.

Screens are given what they show and answer with messages (``messages.py``)
or ``dismiss``; the app keeps navigation and the node's lifecycle, and does
its catalog work through the node's use cases.

Nothing blocks the UI loop: database, search, file and pipeline work runs in
thread workers (``exit_on_error=False``) that report back by message, and
one handler, :meth:`KbtuiApp.on_worker_state_changed`, turns their failures
into notifications that carry an error type or a content-free message only.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pykka
from textual import work
from textual.app import App
from textual.binding import Binding
from textual.events import DescendantFocus
from textual.filter import LineFilter
from textual.screen import ModalScreen, Screen
from textual.timer import Timer
from textual.widgets import Input
from textual.worker import Worker, WorkerState

from actors.events import AdmissionChanged, DocumentStatusChanged, SweepPending
from actors.runtime import NodeAlreadyRunning, Runtime
from kbtui.collections import DEFAULT_COLLECTION, canonical_collection_id
from kbtui.config import Config
from kbtui.errors import OPERATOR_ERRORS, InvalidCollection, PipelineHeldElsewhere
from kbtui.logs import LogLine, LogLineHandler, configure_logging
from kbtui.node import Node
from kbtui.printable import printable
from kbtui.rates import duration_text
from kbtui.reads import Status
from kbtui.tui.ascii import AsciiFilter, wants_ascii
from kbtui.tui.batch import WAITING, BatchTracker
from kbtui.tui.bridge import NodeEventsEnded, NodeEventsOpened, TuiBridge, follow_node_events
from kbtui.tui.commands import KbtuiCommands, find_colon_command
from kbtui.tui.messages import (
    AddRefused,
    AddRequested,
    AddsSkipped,
    AdmissionUpdated,
    CatalogPolled,
    DeleteRequested,
    DocumentsChanged,
    DocumentStatusUpdated,
    FailuresRequested,
    NodeLogged,
    NodeModeDecided,
    NodeStopped,
    OpenDocument,
    OpenHit,
    OpenReader,
    ReindexRequested,
    WorkFailed,
)
from kbtui.tui.preferences import Preferences, load_preferences, save_preferences
from kbtui.tui.screens.add_files import AddFilesScreen
from kbtui.tui.screens.ask import AskScreen
from kbtui.tui.screens.collections import CollectionsScreen
from kbtui.tui.screens.command_line import CommandLineScreen
from kbtui.tui.screens.confirm import ConfirmScreen
from kbtui.tui.screens.document import DocumentScreen
from kbtui.tui.screens.documents import DocumentsScreen
from kbtui.tui.screens.failures import FailuresScreen
from kbtui.tui.screens.help import HelpScreen
from kbtui.tui.screens.nodes import NodesScreen
from kbtui.tui.screens.preview import HitPreviewScreen
from kbtui.tui.screens.reader import ReaderScreen
from kbtui.tui.screens.search import SearchScreen
from kbtui.tui.screens.sources import SourcesScreen
from kbtui.tui.theming import DEFAULT_THEME, load_themes, theme_dirs
from kbtui.tui.widgets.ingest_header import IngestHeader, IngestView, Throughput

if TYPE_CHECKING:
    from kbtui.api.server import ApiServer
    from kbtui.api.transport import EventStream

log = logging.getLogger(__name__)

TERMINAL = (Status.INDEXED.value, Status.FAILED.value)
IN_STAGES = (Status.EXTRACTING.value, Status.CHUNKING.value, Status.EMBEDDING.value)
# After the second q: how long the app waits for the stop before it leaves anyway.
LEAVE_NOW_BOUND_S = 1.0
SEARCH_SCREEN = "search"
# At exit, how long the node may take to stop before the process leaves without it.
DETACH_AFTER_S = 1.0
# Worker groups whose screens report their own failures.
SELF_REPORTING_GROUPS = ("ask", "ask-search", "ask-probe")
# App-wide keys a dialog keeps to itself (the palette stays available).
_KEYS_A_DIALOG_KEEPS = frozenset(
    {"quit", "focus_search", "help", "switch_collection", "sources", "nodes", "ask", "change_theme", "show_documents",
     "command_line", "copy"}
)
# Log lines the app keeps for the events pane (it shows them when opened).
KEPT_LOG_LINES = 500


@dataclass(frozen=True)
class TuiOptions:
    """How the app behaves; tests use a deterministic set (no node, no blink, fixed clock)."""

    run_node: bool = True  # run the pipeline here when no node runs for the data dir
    poll_interval_s: float = 1.0
    flush_interval_s: float = 0.5  # live status is applied to the table at most this often
    # Short: a search takes tens of milliseconds, and results within 150 ms of the last key
    # is the aim (benchmarks/tui_latency.py); older answers are dropped by generation.
    search_debounce_s: float = 0.06
    cursor_blink: bool = True
    show_timings: bool = True
    remember_preferences: bool = True
    clock: Callable[[], float] = time.time
    ascii_only: bool = False  # draw with ASCII only (kbtui.tui.ascii)


class KbtuiApp(App[int]):
    """The kbtui terminal UI over one opened node."""

    TITLE = "kbtui"
    COMMANDS = App.COMMANDS | {KbtuiCommands}
    # Notifications at the top right, under the header and the lines below it, narrow: they
    # cover the ends of the first rows, never the Status column, the hint or status line
    # at the bottom, or the footer (at 80 columns they covered all of those).
    CSS = """
    ToastRack { dock: top; align: right top; margin-top: 3; margin-bottom: 0; }
    Toast { width: auto; max-width: 34%; min-width: 20; padding: 0 1; margin-top: 0; margin-bottom: 1; }
    """
    BINDINGS = [
        Binding("q", "quit", "Quit", id="app.quit"),
        Binding("slash", "focus_search", "Search", id="app.search", tooltip="Search from anywhere"),
        Binding("question_mark", "help", "Keys", id="app.help"),
        Binding("colon", "command_line", "Command", id="app.command_line", show=False,
                tooltip=":sources, :failures, :events, :q ... (Tab completes)"),
        Binding("y", "copy('id')", "Copy id", id="app.copy_id", show=False, tooltip="Copy the id (OSC 52: over SSH too)"),
        Binding("Y", "copy('path')", "Copy path", id="app.copy_path", show=False),
        Binding("c", "switch_collection", "Collection", id="app.collections", show=False),
        Binding("i", "sources", "Sources", id="app.sources", show=False, tooltip="Folders, files and repositories"),
        Binding("M", "nodes", "Nodes", id="app.nodes", show=False, tooltip="Every node of the knowledge base"),
        Binding("A", "ask", "Ask", id="app.ask", show=False),
        Binding("t", "change_theme", "Theme", id="app.theme", show=False),
        Binding("D", "show_documents", "Documents", id="app.documents", show=False),
    ]

    def __init__(self, node: Node, *, options: TuiOptions | None = None) -> None:
        super().__init__()
        self.node = node
        self.options = options or TuiOptions()
        self.clock = self.options.clock
        self.preferences = load_preferences(node.config.home) if self.options.remember_preferences else Preferences()
        self.collection_id = self.preferences.collection_id or DEFAULT_COLLECTION
        self.known_collections: tuple[str, ...] = ()
        self.mode = "starting"
        self.runtime: Runtime | None = None
        self.bridge: pykka.ActorRef | None = None
        self.api: ApiServer | None = None  # the node's API while this app runs the node
        self.events_live = False  # client mode: the running node's event stream is open
        self._event_stream: EventStream | None = None
        self.queue: AdmissionChanged | None = None
        self.throughput = Throughput()
        self.chunk_throughput = Throughput()
        self.ocr_pages_per_min = 0
        self.batches = BatchTracker()
        self.waiting = 0
        self.rate = 0.0
        self.finished_total = 0
        self.last_stamp: tuple[int, float] | None = None
        self._live: dict[str, DocumentStatusChanged] = {}
        self._stopping = False
        self._stopping_runtime: Runtime | None = None
        self._quit_deadline = 0.0
        self._quit_ticker: Timer | None = None
        self._header_stale = False
        self.log_lines: deque[LogLine] = deque(maxlen=KEPT_LOG_LINES)
        self._log_handler = LogLineHandler(lambda line: self.post_message(NodeLogged(line)))
        self._ascii = AsciiFilter() if self.options.ascii_only else None
        self.documents_screen = DocumentsScreen(node, self.collection_id, clock=self.clock)
        themes, self.theme_problems = load_themes(theme_dirs(node.config.home))
        for theme in themes:
            self.register_theme(theme)

    def get_default_screen(self) -> Screen:
        return self.documents_screen

    def get_line_filters(self) -> Sequence[LineFilter]:
        filters = super().get_line_filters()
        return [*filters, self._ascii] if self._ascii is not None else filters

    def on_mount(self) -> None:
        wanted = self.preferences.theme
        self.theme = wanted if wanted in self.available_themes else (
            DEFAULT_THEME if DEFAULT_THEME in self.available_themes else "textual-dark"
        )
        self.theme_changed_signal.subscribe(self, self._remember_theme)
        for problem in self.theme_problems:
            self.notify(f"Theme file {problem.file_name} skipped: {problem.reason}", severity="warning", timeout=10)
        self._log_handler.attach()  # this process's log lines (the node's, when it runs here)
        self.install_screen(SearchScreen(self.node, self.collection_id, self.options), name=SEARCH_SCREEN)
        self._show_header()
        self.set_interval(self.options.poll_interval_s, self._poll_tick)
        self.set_interval(self.options.flush_interval_s, self._flush_live)
        self._start_node()
        self._poll_tick()

    def on_descendant_focus(self, event: DescendantFocus) -> None:
        if isinstance(event.widget, Input) and not self.options.cursor_blink:
            event.widget.cursor_blink = False

    # ------------------------------------------------------------ node or client

    @work(thread=True, exclusive=True, group="node", exit_on_error=False)
    def _start_node(self) -> None:
        if self.node.pipeline_running():
            self.post_message(NodeModeDecided("client"))
            return
        if not self.options.run_node:
            self.post_message(NodeModeDecided("viewer"))
            return
        from kbtui.api.server import ApiServer

        bridge = TuiBridge.start(self.post_message)
        api = ApiServer(self.node)
        runtime = self.node.pipeline(listeners=[bridge, api.relay], watch=True)
        try:
            runtime.start()
        except NodeAlreadyRunning:
            bridge.stop()
            api.stop()
            self.post_message(NodeModeDecided("client"))
            return
        except PipelineHeldElsewhere as exc:
            # A node of another data directory indexes this shared database: browse and search it.
            bridge.stop()
            api.stop()
            self.call_from_thread(self.notify, exc.message, severity="warning", timeout=15)
            self.post_message(NodeModeDecided("viewer"))
            return
        except BaseException:
            bridge.stop()
            api.stop()
            raise
        self.runtime, self.bridge = runtime, bridge
        try:
            api.start(runtime)  # other clients (the CLI, a second TUI) now use this node
        except BaseException:
            api.stop()
            raise
        self.api = api
        self.post_message(NodeModeDecided("node"))

    def on_node_mode_decided(self, message: NodeModeDecided) -> None:
        self.mode = message.mode
        if message.mode != "node":
            self.queue = None
        if message.mode == "client":
            self._follow_node()
        self._show_header()
        log.info("terminal UI running as %s", message.mode)

    # ------------------------------------------------------------ client mode: the node's events

    def _follow_node(self) -> None:
        if not any(w.group == "events" and w.is_running for w in self.workers):
            self._follow_node_events()

    @work(thread=True, group="events", exit_on_error=False)
    def _follow_node_events(self) -> None:
        follow_node_events(self.node.config.home, self.post_message, self._keep_stream)

    def _keep_stream(self, stream: EventStream) -> None:
        self._event_stream = stream

    def on_node_events_opened(self, message: NodeEventsOpened) -> None:
        self.events_live = True

    def on_node_events_ended(self, message: NodeEventsEnded) -> None:
        was_live, self.events_live = self.events_live, False
        self._event_stream = None
        if was_live and self.mode == "client":
            self._poll_tick()  # the node may have stopped: look now, take over if so

    def _close_event_stream(self) -> None:
        stream, self._event_stream = self._event_stream, None
        if stream is not None:
            stream.close()

    def stop_node(self, *, drain_timeout_s: float | None = None) -> None:
        """Stop the API, the pipeline (if this process runs it) and the bridge. Blocks: call off the UI loop."""
        runtime, bridge, api = self.runtime, self.bridge, self.api
        self.runtime = self.bridge = self.api = None
        # Known as stopping from the start, so a second q while the API stops can hurry the drain.
        self._stopping_runtime = runtime
        try:
            self._close_event_stream()
            if api is not None:
                api.stop()  # first: clients fall back to the catalog while the pipeline drains
            if runtime is not None:
                runtime.stop(drain_timeout_s=drain_timeout_s)
        finally:
            self._stopping_runtime = None
        if bridge is not None:
            with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout):
                bridge.stop(timeout=5)

    async def action_quit(self) -> None:
        """First ``q``: stop the node, showing what drains and for how long.
        Second ``q`` (or nothing left to drain): leave now. Never blocks the UI loop."""
        if self._stopping:
            self.leave_now()
            return
        if self.runtime is None:
            self.exit(0)
            return
        self._stopping = True
        self._quit_deadline = time.monotonic() + self.node.config.shutdown_drain_timeout_s
        self._show_quit_notice()
        self._quit_ticker = self.set_interval(1.0, self._show_quit_notice)
        self._stop_then_exit()

    @work(thread=True, exclusive=True, group="quit", exit_on_error=False)
    def _stop_then_exit(self) -> None:
        try:
            self.stop_node()
        finally:
            self.post_message(NodeStopped())

    def on_node_stopped(self, message: NodeStopped) -> None:
        self.exit(0)

    def leave_now(self) -> None:
        """Stop waiting for in-flight documents (they resume at the next start) and leave."""
        runtime = self._stopping_runtime or self.runtime
        if runtime is not None:
            runtime.hurry()
        # The stop finishes within a second or so (inference is interrupted);
        # leave regardless after a bound, run_app detaches what is left.
        self.set_timer(LEAVE_NOW_BOUND_S, lambda: self.exit(0))
        self.clear_notifications()
        self.notify("Leaving now; unfinished documents resume at the next start.", timeout=5)

    def _show_quit_notice(self) -> None:
        left = max(0.0, self._quit_deadline - time.monotonic())
        counts = self.documents_screen.counts
        in_flight = self.queue.in_flight if self.queue is not None else 0
        self.clear_notifications()
        self.notify(quit_notice(in_flight, counts, left), title="Quitting", timeout=2)

    def stop_in_progress(self) -> bool:
        """A stop of this app's pipeline has not finished (e.g. its thread is stuck)."""
        return self._stopping_runtime is not None

    def on_unmount(self) -> None:
        self._log_handler.detach()
        # Left without q (a test, an error): stop at once; unfinished documents stay queued.
        self.stop_node(drain_timeout_s=0)

    # ------------------------------------------------------------ live state

    def on_document_status_updated(self, message: DocumentStatusUpdated) -> None:
        event = message.event
        self._live[event.document_id] = event
        if event.status in TERMINAL:
            self.finished_total += 1

    def on_node_logged(self, message: NodeLogged) -> None:
        self.log_lines.append(message.line)
        if self.documents_screen.ready:
            self.documents_screen.show_log_lines([message.line])

    def show_events(self) -> None:
        """The documents list with the events pane open."""
        self.action_show_documents()
        self.documents_screen.show_events(list(self.log_lines), shown=True)

    def toggle_events(self) -> None:
        self.documents_screen.show_events(list(self.log_lines), shown=not self.documents_screen.events_shown)

    def on_admission_updated(self, message: AdmissionUpdated) -> None:
        self.queue = message.event
        self._header_stale = True  # shown at the next flush: admission changes come in bursts

    def _flush_live(self) -> None:
        if not self.documents_screen.ready:
            return
        if self._header_stale:
            self._show_header()
        if not self._live:
            return
        events = list(self._live.values())
        self._live.clear()
        self.documents_screen.apply_live(events)
        if isinstance(self.screen, DocumentScreen) and any(e.document_id == self.screen.document_id for e in events):
            self.screen.reload()

    def _poll_tick(self) -> None:
        if not any(w.group == "poll" and w.is_running for w in self.workers):
            self._poll(self.collection_id, self.mode)

    @work(thread=True, group="poll", exit_on_error=False)
    def _poll(self, collection_id: str, mode: str) -> None:
        # A client reads the queue from the node's event stream; from the status
        # file only while it has none (a node that serves no API, e.g. `kbtui add`'s).
        with_queue = mode == "client" and not self.events_live
        self.post_message(CatalogPolled(self.node.snapshot(collection_id, with_queue=with_queue)))

    def on_catalog_polled(self, message: CatalogPolled) -> None:
        snapshot = message.snapshot
        if snapshot.collection_id != self.collection_id or not self.documents_screen.ready:
            return
        self.known_collections = snapshot.collections
        counts = dict(snapshot.status_counts)
        now = self.clock()
        finished = self.finished_total
        if self.mode == "client" and not self.events_live:
            self.queue = snapshot.queue
            finished = counts.get(Status.INDEXED.value, 0) + counts.get(Status.FAILED.value, 0)
        was_running = self.batches.running
        ended = self.batches.observe(now, counts, finished)
        if self.batches.running and not was_running:
            # A batch starts: rates from here, not diluted by the idle time before it.
            self.throughput.start(now, finished)
            self.chunk_throughput.start(now, snapshot.indexed_chunks)
        else:
            self.throughput.record(now, finished)
            self.chunk_throughput.record(now, snapshot.indexed_chunks)
        self.ocr_pages_per_min = snapshot.ocr_pages_last_minute
        self.rate = self.throughput.per_second()
        self.waiting = sum(counts.get(status, 0) for status in WAITING)
        self.documents_screen.show_counts(counts, node_running=snapshot.node_running)
        self.documents_screen.show_batch(self._batch_line())
        if ended is not None and (ended.added or ended.updated or ended.failed):
            self.notify(f"Batch done: {ended.text()}" + (" (x: failures)" if ended.failed else ""),
                        title="Ingestion", severity="warning" if ended.failed else "information", timeout=15)
        header = self.documents_screen.query_one(IngestHeader)
        header.record_depth(self.queue.queue_depth if self.queue else 0,
                            self.queue.queue_capacity if self.queue else None)
        self._show_header()
        if snapshot.stamp != self.last_stamp:
            self.last_stamp = snapshot.stamp
            self.documents_screen.catch_up(snapshot.stamp[0])
        if self.mode == "client" and not snapshot.node_running and self.options.run_node:
            self.mode = "starting"  # the other node stopped: take over
            self._start_node()
        elif self.mode == "viewer" and snapshot.node_running:
            self.mode = "client"
            self._follow_node()
            self._show_header()
        elif self.mode == "client" and not self.events_live:
            self._follow_node()  # a node that serves its API now (or again)

    def _batch_line(self) -> str:
        started = self.batches.started_at()
        if started is not None:
            return f"batch running for {duration_text(self.clock() - started)}"
        if self.batches.last is not None:
            return f"last batch: {self.batches.last.text()}"
        return ""

    def ingest_view(self) -> IngestView:
        """What the header shows now."""
        return IngestView(
            self.mode, self.collection_id, self.queue, documents_per_s=self.rate,
            chunks_per_s=self.chunk_throughput.per_second(), eta_s=self.throughput.eta(self.waiting),
            waiting=self.waiting, ocr_pages_per_min=self.ocr_pages_per_min,
        )

    def _show_header(self) -> None:
        self._header_stale = False
        if self.documents_screen.ready:
            self.documents_screen.query_one(IngestHeader).show(self.ingest_view())

    # ------------------------------------------------------------ navigation

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # A dialog keeps the keyboard to itself (the palette stays available).
        if action == "quit" and self._stopping:
            return True  # the second q leaves from anywhere
        return not (isinstance(self.screen, ModalScreen) and action in _KEYS_A_DIALOG_KEEPS)

    def _raise_or_push(self, screen: str | Screen) -> None:
        target = self.get_screen(screen) if isinstance(screen, str) else screen
        if target in self.screen_stack:
            while self.screen is not target:
                self.pop_screen()
        else:
            self.push_screen(screen)

    def action_focus_search(self) -> None:
        self._raise_or_push(SEARCH_SCREEN)
        search = self.get_screen(SEARCH_SCREEN)
        assert isinstance(search, SearchScreen)
        self.call_after_refresh(search.focus_input)

    def action_show_documents(self) -> None:
        while len(self.screen_stack) > 1:
            self.pop_screen()

    def action_toggle_explain(self) -> None:
        self.action_focus_search()
        search = self.get_screen(SEARCH_SCREEN)
        assert isinstance(search, SearchScreen)
        search.action_toggle_explain()

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.screen))

    def action_command_line(self) -> None:
        """``:``: a command line at the bottom (``:sources``, ``:failures``, ``:q``, Tab completes)."""

        def entered(line: str | None) -> None:
            found = find_colon_command(line or "")
            if found is not None:
                command, argument = found
                command.run(self, argument)

        self.push_screen(CommandLineScreen(), entered)

    def action_copy(self, what: str) -> None:
        """``y``/``Y``: copy the selected document's id or path to the clipboard
        (OSC 52, which a terminal over SSH receives too)."""
        target = getattr(self.screen, "copy_target", lambda: None)()
        if target is None:
            self.notify("Nothing selected to copy here.", severity="warning", timeout=3)
            return
        document_id, path = target
        value = document_id if what == "id" else path
        self.copy_to_clipboard(value)
        self.notify(f"Copied {what}: {printable(value)}", timeout=3)

    def search_for(self, text: str) -> None:
        """Search ``text`` (the search screen is shown with it typed)."""
        search = self.get_screen(SEARCH_SCREEN)
        assert isinstance(search, SearchScreen)
        search.search_text(text)

    def switch_collection_named(self, name: str) -> None:
        try:
            collection_id = canonical_collection_id(name)
        except InvalidCollection as problem:
            self.notify(problem.message, severity="error", timeout=5)
            return
        if collection_id != self.collection_id:
            self.switch_collection(collection_id)

    def action_ask(self) -> None:
        self.push_screen(AskScreen.for_node(self.node, self.collection_id))

    def action_sources(self) -> None:
        if not isinstance(self.screen, SourcesScreen):
            self.push_screen(SourcesScreen(self.node, self.collection_id, self.mode))

    def action_nodes(self) -> None:
        if not isinstance(self.screen, NodesScreen):
            self.push_screen(NodesScreen(self.node))

    def open_document(self, document_id: str) -> None:
        self.push_screen(DocumentScreen(self.node, document_id))

    def on_open_document(self, message: OpenDocument) -> None:
        self.open_document(message.document_id)

    def on_open_hit(self, message: OpenHit) -> None:
        self.push_screen(HitPreviewScreen(self.node, message.hit, message.query, message.fallback_name, message.fusion))

    def on_failures_requested(self, message: FailuresRequested) -> None:
        self.show_failures()

    def show_failures(self) -> None:
        """The failed documents of the active collection, why, and retry."""
        if not isinstance(self.screen, FailuresScreen):
            self.push_screen(FailuresScreen(self.node, self.collection_id))

    def on_open_reader(self, message: OpenReader) -> None:
        self.push_screen(ReaderScreen(
            self.node, message.document_id, message.collection_id, title=message.title, query=message.query,
            chunk_id=message.chunk_id,
        ))

    def focused_document(self) -> tuple[str, str] | None:
        """(id, name) of the document the operator is looking at, if any."""
        for screen in reversed(self.screen_stack):
            if isinstance(screen, DocumentScreen) and screen.detail is not None:
                return screen.document_id, printable(screen.detail.name)
            if isinstance(screen, DocumentsScreen):
                row = screen.selected_row()
                return (row.document_id, printable(row.name)) if row else None
        return None

    def filter_documents(self, status: str | None) -> None:
        self.action_show_documents()
        self.documents_screen.set_filter(status)

    # ------------------------------------------------------------ collections and preferences

    def action_switch_collection(self) -> None:
        def chosen(collection_id: str | None) -> None:
            if collection_id and collection_id != self.collection_id:
                self.switch_collection(collection_id)

        self.push_screen(CollectionsScreen(list(self.known_collections), self.collection_id), chosen)

    def switch_collection(self, collection_id: str) -> None:
        """Make ``collection_id`` the active collection everywhere."""
        self.collection_id = collection_id
        self.last_stamp = None
        self._live.clear()
        self.documents_screen.show_collection(collection_id)
        self.documents_screen.show_counts({})
        search = self.get_screen(SEARCH_SCREEN)
        if isinstance(search, SearchScreen):
            search.show_collection(collection_id)
        self._show_header()
        self._poll_tick()
        self._save_preferences(Preferences(theme=self.theme, collection_id=collection_id))

    def _remember_theme(self, theme: object) -> None:
        self._save_preferences(Preferences(theme=self.theme, collection_id=self.collection_id))

    def _save_preferences(self, preferences: Preferences) -> None:
        if self.options.remember_preferences and preferences != self.preferences:
            self.preferences = preferences
            self._write_preferences(preferences)

    @work(thread=True, group="preferences", exit_on_error=False)
    def _write_preferences(self, preferences: Preferences) -> None:
        save_preferences(self.node.config.home, preferences)

    # ------------------------------------------------------------ catalog changes

    def action_add_files(self) -> None:
        def chosen(path: str | None) -> None:
            if path:
                self.documents_screen.following = True  # watch the new documents arrive
                self.add_path(path, self.collection_id)

        self.push_screen(AddFilesScreen(), chosen)

    def on_add_requested(self, message: AddRequested) -> None:
        self.action_add_files()

    @work(thread=True, group="catalog", exit_on_error=False)
    def add_path(self, raw: str, collection_id: str) -> None:
        """Add a folder, a file or a Git repository as a source (as ``kbtui add``) and scan it.

        Every file the scan skips is counted by reason (vanished, not a
        regular file, sensitive, ...); the rest are added as Pending documents.
        """
        try:
            synced = self.node.add_source(Path(os.path.expanduser(raw)), collection_id)
        except OPERATOR_ERRORS as problem:
            # Said with the path as typed (on this screen only; never logged).
            self.post_message(AddRefused(raw, problem.message))
            return
        self.post_message(AddsSkipped(synced.report.unchanged.count + synced.report.skipped_count))
        self._sweep_now()
        self.post_message(DocumentsChanged(collection_id, synced.report.summary() + self._who_indexes()))

    def on_add_refused(self, message: AddRefused) -> None:
        self.notify(f"{printable(message.path)}: {message.reason}", title="Not added", severity="error", timeout=10)

    def on_adds_skipped(self, message: AddsSkipped) -> None:
        self.batches.note_skipped(message.count)

    def on_delete_requested(self, message: DeleteRequested) -> None:
        self.confirm_delete(message.document_id, message.name, leave_screen=message.leaving)

    def confirm_delete(self, document_id: str, name: str, *, leave_screen: object | None = None) -> None:
        """Ask, then delete the document: rows, index entries and encrypted source."""

        def answered(yes: bool | None) -> None:
            if yes:
                self._delete([document_id], self.collection_id)
                if leave_screen is not None and self.screen is leave_screen:
                    self.pop_screen()

        self.push_screen(
            ConfirmScreen(f"Delete “{name}”?\nIts chunks, vectors and encrypted source are removed for good.",
                          yes_label="Delete"),
            answered,
        )

    @work(thread=True, group="catalog", exit_on_error=False)
    def _delete(self, document_ids: list[str], collection_id: str) -> None:
        removed = self.node.remove(document_ids)
        self.post_message(DocumentsChanged(collection_id, f"{removed} document(s) deleted"))

    def on_reindex_requested(self, message: ReindexRequested) -> None:
        if message.document_ids is None:
            self.confirm_reindex_all()
        else:
            self.reindex_documents(list(message.document_ids))

    def confirm_reindex_all(self) -> None:
        def answered(yes: bool | None) -> None:
            if yes:
                self.reindex_documents(None)

        self.push_screen(
            ConfirmScreen(f"Re-index every document of {self.collection_id}?\n"
                          "They keep serving their current index until the new one commits.",
                          yes_label="Reindex all"),
            answered,
        )

    def reindex_documents(self, document_ids: list[str] | None) -> None:
        """Queue documents (None: the whole active collection) for ingestion again."""
        self._reindex(document_ids, self.collection_id)

    @work(thread=True, group="catalog", exit_on_error=False)
    def _reindex(self, document_ids: list[str] | None, collection_id: str) -> None:
        report = self.node.reindex(document_ids, collection_id=collection_id)
        self._sweep_now()
        summary = f"{len(report.queued)} queued for re-indexing"
        if report.damaged:
            summary += f", {len(report.damaged)} skipped (damaged source)"
        self.post_message(DocumentsChanged(collection_id, summary + self._who_indexes()))

    def _sweep_now(self) -> None:
        """Ask this node's admission to pick Pending rows up now (a tell: never waits)."""
        runtime = self.runtime
        if runtime is not None and runtime.admission is not None:
            with contextlib.suppress(pykka.ActorDeadError):
                runtime.admission.tell(SweepPending())

    def _who_indexes(self) -> str:
        if self.mode == "viewer":
            return "; no node is running, so they wait as Pending"
        return ""

    def on_documents_changed(self, message: DocumentsChanged) -> None:
        if message.summary:
            self.notify(message.summary)
        if not self.documents_screen.ready:
            return
        self.documents_changed(message.collection_id)

    def documents_changed(self, collection_id: str) -> None:
        """Something changed the catalog: show it now rather than at the next poll."""
        if collection_id == self.collection_id:
            self.documents_screen.reload()
            self._poll_tick()

    # ------------------------------------------------------------ failures

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self.report_failure(event.worker)

    def on_work_failed(self, message: WorkFailed) -> None:
        self.report_failure(message.worker)

    def report_failure(self, worker: Worker) -> None:
        """The one error handler: a failed worker (the app's or a screen's) becomes a notification."""
        if worker.group in SELF_REPORTING_GROUPS:
            return
        error = worker.error
        # Logs and notifications name the error type only (messages can carry text),
        # except our own errors, whose messages are content-free by contract.
        log.warning("%s work failed: %s", worker.group, type(error).__name__)
        if isinstance(error, OPERATOR_ERRORS):
            self.notify(error.message, title="Failed", severity="error", timeout=10)
        else:
            self.notify(f"{worker.group} failed ({type(error).__name__})", severity="error", timeout=10)


def quit_notice(in_flight: int, counts: dict[str, int], seconds_left: float) -> str:
    """What the first ``q`` says: what is draining, how long it may take, how to leave now."""
    stages = ", ".join(f"{status} {counts[status]}" for status in IN_STAGES if counts.get(status))
    if in_flight:
        what = f"{in_flight} document{'s' if in_flight != 1 else ''} in flight" + (f" ({stages})" if stages else "")
    else:
        what = "nothing in flight"
    return (
        f"Stopping the node: {what}, up to {seconds_left:.0f} s more.\n"
        "q again: leave now (they resume at the next start)."
    )


def run_app(config: Config, *, ascii_only: bool | None = None) -> int:
    """Open the node for ``config.home`` and run the terminal UI until the operator quits.

    The node is opened before anything is drawn: a data directory that cannot
    be used raises here, and ``kbtui``'s entry point prints it as one line.
    ``ascii_only`` None: decided by the locale and TERM (:func:`wants_ascii`).
    """
    node = Node.open(config)
    # Log lines must not land on the screen the UI draws.
    configure_logging(
        config.home, to_stderr_level=None,
        file_level=logging.getLevelName(os.environ.get("KBTUI_LOG_LEVEL", "INFO").upper()),
    )
    app = KbtuiApp(node, options=TuiOptions(ascii_only=wants_ascii(os.environ) if ascii_only is None else ascii_only))
    try:
        code = app.run() or 0
    finally:
        stopper = threading.Thread(target=app.stop_node, kwargs={"drain_timeout_s": 0}, daemon=True)
        stopper.start()
        deadline = time.monotonic() + DETACH_AFTER_S
        stopper.join(DETACH_AFTER_S)
        while app.stop_in_progress() and time.monotonic() < deadline:
            time.sleep(0.05)
    if stopper.is_alive() or app.stop_in_progress():
        # A pipeline thread is stuck (a hung provider): leave without running
        # native destructors under it, which could abort the process.
        log.warning("the node did not stop in time; leaving (its documents resume at the next start)")
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    node.close()
    return code
