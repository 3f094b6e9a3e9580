"""A search hit in context: the chunk and its neighbours, the hit's query words highlighted."""

from __future__ import annotations

import re

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Static

from kbtui.chunking import HEADING_SEPARATOR
from kbtui.node import Node
from kbtui.reads import chunk_overlap
from kbtui.retrieval.search import Hit
from kbtui.tui.messages import OpenDocument, OpenReader
from kbtui.tui.screens.base import KbtuiScreen
from kbtui.tui.widgets.cells import inert
from kbtui.tui.widgets.footer import KeysFooter
from kbtui.tui.widgets.hit_list import TRAIL_SEPARATOR, explain_text, hit_title
from kbtui.tui.widgets.snippet import HIGHLIGHT_STYLE, query_terms
from store.records import ChunkRecord

NEIGHBOUR_WINDOW = 1


def highlighted(text: str, query: str) -> Text:
    """``text`` with every query word highlighted."""
    rich = Text(inert(text))
    terms = query_terms(query)
    if terms:
        rich.highlight_regex(re.compile("|".join(re.escape(t) for t in terms), re.IGNORECASE), HIGHLIGHT_STYLE)
    return rich


_SOFT_BREAK = re.compile(r"(?<!\n)\n(?!\n)")


def reflow(text: str, kind: str) -> str:
    """Prose lines joined into paragraphs (the source's wrapping rarely fits the
    screen); code, tables and lists keep their lines."""
    if kind != "prose":
        return text
    return _SOFT_BREAK.sub(" ", text)


def chunk_caption(record: ChunkRecord, is_hit: bool) -> str:
    parts = [("this hit" if is_hit else "neighbour") + f" · chunk {record.ordinal}"]
    if record.symbol:
        parts.append(f"ƒ {inert(record.symbol)}")
    if record.heading_path:
        parts.append(inert(record.heading_path).replace(HEADING_SEPARATOR, TRAIL_SEPARATOR))
    if record.page is not None:
        parts.append(f"p.{record.page}")
    parts.append(f"{record.kind} · chars {record.start_offset}–{record.end_offset}")
    return " · ".join(parts)


class HitPreviewScreen(KbtuiScreen):
    """The hit's chunk between its neighbours; ``o`` opens the whole document's detail."""

    BINDINGS = [
        Binding("escape", "back", "Back", id="preview.back"),
        Binding("v", "read", "Read", id="preview.read", tooltip="The whole document, at this hit"),
        Binding("o", "open_document", "Document", id="preview.document"),
    ]

    DEFAULT_CSS = """
    HitPreviewScreen #preview-heading { height: auto; padding: 0 1; background: $panel; }
    HitPreviewScreen #preview-chunks { height: 1fr; padding: 0 1; }
    HitPreviewScreen .chunk { height: auto; margin-bottom: 1; padding: 0 1; border-left: tall $panel; color: $text-muted; }
    HitPreviewScreen .chunk.-hit { border-left: tall $accent; color: $text; }
    """

    class NeighboursLoaded(Message):
        def __init__(self, records: list[ChunkRecord]) -> None:
            super().__init__()
            self.records = records

    def copy_target(self) -> tuple[str, str] | None:
        """``y``/``Y``: the hit's document id and source path (or the operator's name for it)."""
        return self.hit.document_id, self.hit.source_path or self.fallback_name or self.hit.document_id

    def __init__(self, node: Node, hit: Hit, query: str, fallback_name: str | None, fusion: str | None = None) -> None:
        super().__init__()
        self.title = "Preview"
        self.node = node
        self.hit = hit
        self.search_query = query
        self.fallback_name = fallback_name
        self.fusion = fusion

    def compose(self) -> ComposeResult:
        heading = Text(hit_title(self.hit, self.fallback_name), style="bold")
        where = inert(self.hit.source_path) or self.fallback_name or self.hit.document_id[:12]
        page = f" · p.{self.hit.page}" if self.hit.page is not None else ""
        symbol = f" · ƒ {inert(self.hit.symbol)}" if self.hit.symbol else ""
        heading.append(f"\n{where}{symbol}{page} · {self.hit.score_kind} {self.hit.score:.4f} · ", style="dim")
        heading.append_text(explain_text(self.hit, self.fusion))
        yield Static(heading, id="preview-heading")
        yield VerticalScroll(Static(Text("Loading…")), id="preview-chunks")
        yield KeysFooter()

    def on_mount(self) -> None:
        self._load(self.hit.chunk_id, self.hit.collection_id)

    @work(thread=True, exclusive=True, group="preview", exit_on_error=False)
    def _load(self, chunk_id: str, collection_id: str) -> None:
        records = self.node.neighbours(chunk_id, collection_id, NEIGHBOUR_WINDOW)
        self.post_message(self.NeighboursLoaded(records))

    async def on_hit_preview_screen_neighbours_loaded(self, message: NeighboursLoaded) -> None:
        container = self.query_one("#preview-chunks", VerticalScroll)
        await container.remove_children()
        if not message.records:
            await container.mount(Static(Text("This chunk is no longer in the index (deleted or re-indexed).")))
            return
        widgets = []
        overlap_limit = self.node.config.chunking.overlap_chars
        previous: ChunkRecord | None = None
        for record in message.records:
            is_hit = record.chunk_id == self.hit.chunk_id
            body = Text(chunk_caption(record, is_hit) + "\n", style="bold" if is_hit else "dim")
            text = record.text
            if previous is not None and previous.section_key == record.section_key:
                # The chunker repeats the end of a chunk at the start of the next: show it once.
                text = text[chunk_overlap(previous.text, text, overlap_limit):].lstrip()
            text = reflow(text, record.kind)
            body.append_text(highlighted(text, self.search_query) if is_hit else Text(inert(text)))
            widgets.append(Static(body, classes="chunk -hit" if is_hit else "chunk"))
            previous = record
        await container.mount_all(widgets)
        target = next((w for w in widgets if w.has_class("-hit")), None)
        container.focus()
        if target is not None:
            # After the layout, or the scroll lands short (the hit low on screen, off it at 60x20).
            self.call_after_refresh(container.scroll_to_widget, target, animate=False, top=True)

    def action_open_document(self) -> None:
        self.post_message(OpenDocument(self.hit.document_id))

    def action_read(self) -> None:
        title = hit_title(self.hit, self.fallback_name)
        self.post_message(OpenReader(self.hit.document_id, self.hit.collection_id, title, self.search_query,
                                     self.hit.chunk_id))
