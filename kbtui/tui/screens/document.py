"""Document detail: metadata (the decrypted name, for the operator only),
status history, the sections tree and the chunk list; reindex or delete."""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable, Static, TabbedContent, TabPane, Tree

from kbtui.chunking import HEADING_SEPARATOR
from kbtui.extract import DEFAULT_OCR
from kbtui.node import Node
from kbtui.printable import printable
from kbtui.reads import DocumentDetail, Status, ocr_summary
from kbtui.reasons import explain_reason
from kbtui.tui.messages import DeleteRequested, OpenReader, ReindexRequested
from kbtui.tui.screens.base import KbtuiScreen
from kbtui.tui.widgets.cells import full_time, human_size, status_cell
from kbtui.tui.widgets.footer import KeysFooter
from kbtui.tui.widgets.lists import Outline, Table


def metadata_text(detail: DocumentDetail, low_confidence: float = DEFAULT_OCR.low_confidence) -> Text:
    """The key facts, two to a line so they fit 80 columns."""
    row = detail.row
    status = status_cell(row.status, row.progress, row.reason)
    text = Text()
    text.append("name      ", style="dim")
    text.append(printable(row.name) + "\n", style="bold")
    text.append("id        ", style="dim")
    text.append(f"{row.document_id}  ({row.collection_id})\n")
    text.append("status    ", style="dim")
    text.append_text(status)
    text.append(f"   {row.chunk_count} chunks · {len(detail.sections)} sections · {human_size(row.size_bytes)} {row.format}\n")
    if row.status == Status.FAILED.value and row.reason:
        text.append("why       ", style="dim")
        text.append(f"{explain_reason(row.reason)} (r: retry)\n", style="red")
    if row.source_path:
        text.append("source    ", style="dim")
        text.append(printable(row.source_path) + "\n")
    if detail.ocr_pages:
        text.append("ocr       ", style="dim")
        low = any(page.low(low_confidence) for page in detail.ocr_pages)
        text.append(ocr_summary(detail.ocr_pages, low_confidence) + "\n", style="yellow" if low else "")
    if detail.source_problem:
        text.append("damaged   ", style="dim")
        text.append(f"{explain_reason(detail.source_problem)}\n", style="red")
    text.append("times     ", style="dim")
    text.append(f"added {full_time(row.created_at)} · indexed {full_time(row.indexed_at)}\n")
    text.append("index     ", style="dim")
    versions = (
        f"parser v{detail.parser_version} · chunker v{detail.chunker_version}" if detail.parser_version else "not indexed yet"
    )
    identity = f" · {row.vector_identity} ({detail.vector_dim} dims)" if row.vector_identity else ""
    text.append(versions + identity)
    return text


def build_section_tree(tree: Tree, detail: DocumentDetail) -> None:
    """Nest sections by heading level under the tree's root."""
    tree.clear()
    tree.root.label = Text(printable(detail.name))
    stack: list[tuple[int, object]] = [(0, tree.root)]
    for section in detail.sections:
        leaf = section.heading_path.split(HEADING_SEPARATOR)[-1] if section.heading_path else "(untitled)"
        page = f"  p.{section.page}" if section.page is not None else ""
        label = Text(leaf)
        label.append(f"{page}  {section.start_offset}–{section.end_offset}", style="dim")
        level = max(1, section.level)
        while len(stack) > 1 and stack[-1][0] >= level:
            stack.pop()
        node = stack[-1][1].add(label, expand=True)  # type: ignore[attr-defined]
        stack.append((level, node))
    for node in tree.root.children:
        _leaves_do_not_expand(node)
    tree.root.expand()


def _leaves_do_not_expand(node) -> None:  # noqa: ANN001 - a TreeNode
    node.allow_expand = bool(node.children)
    for child in node.children:
        _leaves_do_not_expand(child)


class DocumentScreen(KbtuiScreen):
    """Everything about one document."""

    BINDINGS = [
        Binding("escape", "back", "Back", id="document.back"),
        Binding("v", "read", "Read", id="document.read", tooltip="The whole text (Enter on a chunk: from there)"),
        Binding("r", "reindex", "Reindex", id="document.reindex"),
        Binding("d", "delete", "Delete", id="document.delete"),
        Binding("1", "show_tab('history')", "History", id="document.history", show=False),
        Binding("2", "show_tab('sections')", "Sections", id="document.sections", show=False),
        Binding("3", "show_tab('chunks')", "Chunks", id="document.chunks", show=False),
    ]

    DEFAULT_CSS = """
    DocumentScreen #document-meta { height: auto; padding: 0 1; background: $panel; }
    DocumentScreen TabbedContent { height: 1fr; }
    DocumentScreen TabPane { padding: 0; }
    DocumentScreen DataTable, DocumentScreen Tree { height: 1fr; }
    """

    class Loaded(Message):
        def __init__(self, detail: DocumentDetail | None) -> None:
            super().__init__()
            self.detail = detail

    def copy_target(self) -> tuple[str, str] | None:
        """``y``/``Y``: this document's id and its path (its name when it has none)."""
        if self.detail is None:
            return None
        return self.document_id, self.detail.row.source_path or self.detail.name

    def __init__(self, node: Node, document_id: str) -> None:
        super().__init__()
        self.title = "Document"
        self.node = node
        self.document_id = document_id
        self.detail: DocumentDetail | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text("Loading…"), id="document-meta")
        with TabbedContent(initial="history"):
            with TabPane("1 History", id="history"):
                yield Table(id="document-history", cursor_type="row", zebra_stripes=True)
            with TabPane("2 Sections", id="sections"):
                yield Outline("sections", id="document-sections")
            with TabPane("3 Chunks", id="chunks"):
                yield Table(id="document-chunks", cursor_type="row", zebra_stripes=True)
        yield KeysFooter()

    def on_mount(self) -> None:
        self.reload()

    def reload(self) -> None:
        self._load(self.document_id)

    @work(thread=True, exclusive=True, group="document-load", exit_on_error=False)
    def _load(self, document_id: str) -> None:
        self.post_message(self.Loaded(self.node.detail(document_id)))

    def on_document_screen_loaded(self, message: Loaded) -> None:
        detail = message.detail
        self.detail = detail
        if detail is None:
            self.query_one("#document-meta", Static).update(Text("This document no longer exists."))
            return
        self.query_one("#document-meta", Static).update(metadata_text(detail, self.node.config.ocr.low_confidence))
        history = self.query_one("#document-history", DataTable)
        history.clear(columns=True)
        history.add_columns("When", "Status", "Reason")
        for entry in detail.history:
            history.add_row(Text(full_time(entry.at)), status_cell(entry.status, 0.0, None, bar=False), Text(entry.reason or ""))
        build_section_tree(self.query_one("#document-sections", Tree), detail)
        chunks = self.query_one("#document-chunks", DataTable)
        chunks.clear(columns=True)
        chunks.add_columns("#", "Kind", "Page", "Offsets", "Tok")
        # The text column takes what the screen has left; Enter reads the whole chunk in place.
        chunks.add_column("Text (Enter: read)", width=max(20, self.app.size.width - 37))
        for chunk in detail.chunks:
            chunks.add_row(
                Text(str(chunk.ordinal), justify="right"), Text(chunk.kind),
                Text("" if chunk.page is None else str(chunk.page), justify="right"),
                Text(f"{chunk.start_offset}–{chunk.end_offset}"), Text(str(chunk.token_estimate), justify="right"),
                Text(chunk.preview),
                key=chunk.chunk_id,
            )

    def action_read(self, chunk_id: str | None = None) -> None:
        if self.detail is None:
            return
        row = self.detail.row
        self.post_message(OpenReader(row.document_id, row.collection_id, printable(row.name), chunk_id=chunk_id))

    @on(DataTable.RowSelected, "#document-chunks")
    def read_chunk(self, event: DataTable.RowSelected) -> None:
        self.action_read(event.row_key.value)

    def action_show_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab
        pane = self.query_one(f"#{tab}", TabPane)
        focusable = pane.query("DataTable, Tree").first()
        focusable.focus()

    def action_reindex(self) -> None:
        self.post_message(ReindexRequested((self.document_id,)))

    def action_delete(self) -> None:
        name = printable(self.detail.name) if self.detail else self.document_id[:12]
        self.post_message(DeleteRequested(self.document_id, name, leaving=self))
