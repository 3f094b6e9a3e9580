"""The ingestion header: who indexes, the queue, documents/s and chunks/s over a
sliding window, the time left, and a queue-depth sparkline on a steady scale."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Static

from actors.events import AdmissionChanged
from kbtui.rates import ESTIMATING, SlidingRate, rate_text

SPARKLINE_SAMPLES = 8
SPARK_BLOCKS = " ▁▂▃▄▅▆▇█"
THROUGHPUT_WINDOW_S = 30.0
NARROW_WIDTH = 70
SUMMARY_PADDING = 2
SPARKLINE_ROOM = SPARKLINE_SAMPLES + 1  # its width and margin

MODE_LABELS = {
    "starting": ("…", "starting"),
    "node": ("●", "node"),
    "client": ("○", "client"),
    "viewer": ("○", "no node"),
}


class Throughput(SlidingRate):
    """Documents (or chunks) finished per second over a sliding window, from a running total."""

    def __init__(self, window_s: float = THROUGHPUT_WINDOW_S) -> None:
        super().__init__(window_s)


@dataclass(frozen=True)
class IngestView:
    """What the header says; the app computes it from the queue and the polls."""

    mode: str
    collection_id: str
    queue: AdmissionChanged | None
    documents_per_s: float = 0.0
    chunks_per_s: float = 0.0
    eta_s: float | None = None
    waiting: int = 0  # documents pending or in a stage, in the collection
    ocr_pages_per_min: int = 0  # OCR is slow on a CPU: its own rate, shown while it works


def clock_text(seconds: float | None) -> str:
    """``2:40``, ``1:02:03``, or ``–`` when unknown (the narrow header's ETA)."""
    if seconds is None:
        return "–"
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def header_text(view: IngestView, *, width: int) -> Text:
    """One line that fits ``width``: ``● node DEFAULT │ queue 39/256 run 8 │ 0.25 doc/s
    3.1 ch/s │ ETA 2:40``, in more words when there is room. As the line narrows,
    words go first, then the chunk rate, then the collection's name is cut:
    the queue, the document rate and the ETA stay."""
    variants = _header_variants(view)
    for parts in variants:
        if sum(len(text) for text, _ in parts) <= width:
            return _assemble(parts)
    parts = variants[-1]
    # The barest form still does not fit: cut the collection's name (the second part).
    others = sum(len(text) for index, (text, _) in enumerate(parts) if index != 1)
    room = max(3, width - others)
    name = parts[1][0]
    cut = name if len(name) <= room else name[: max(1, room - 1)] + "…"
    return _assemble([parts[0], (cut, parts[1][1]), *parts[2:]])


def _assemble(parts: list[tuple[str, str]]) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    for words, style in parts:
        text.append(words, style=style)
    return text


def _header_variants(view: IngestView) -> list[list[tuple[str, str]]]:
    """The header's forms, from the widest to the barest; each is (text, style) parts,
    the collection's name always the second."""
    mark, label = MODE_LABELS.get(view.mode, ("?", view.mode))
    queue = view.queue
    paused = f" · paused {queue.paused_for_s:.0f}s" if queue is not None and queue.paused_for_s > 0 else ""
    if queue is None:
        long_queue = short_queue = bare_queue = "queue –"
        if view.mode == "viewer":
            long_queue, short_queue, bare_queue = "added documents wait as Pending", "adds wait as Pending", "adds wait"
        wide_queue = long_queue
    else:
        depth = f"{queue.queue_depth}/{queue.queue_capacity}"
        wide_queue = (f"queue {depth} · in flight {queue.in_flight} · {queue.accepted} accepted, "
                      f"{queue.rejected} rejected{paused}")
        long_queue = f"queue {depth} run {queue.in_flight}{paused}"
        short_queue = bare_queue = f"{depth} run {queue.in_flight}{paused}"
    docs, chunks = rate_text(view.documents_per_s), rate_text(view.chunks_per_s)
    if view.mode == "viewer":
        rates_long = rates_bare = ""
    else:
        rates_long = f" │ {docs.replace('/', ' doc/')} {chunks.replace('/', ' ch/')}"
        if view.ocr_pages_per_min:  # OCR is slow on a CPU: its own rate while it runs
            rates_long += f" OCR {view.ocr_pages_per_min} pages/min"
        rates_bare = f" │ {docs.replace('/', ' doc/')}"
    eta_short = ""
    if view.waiting and view.mode != "viewer":
        eta_short = f" │ ETA {ESTIMATING if view.eta_s is None else clock_text(view.eta_s)}"
    collection = view.collection_id

    def form(head: str, queue_words: str, rates: str, eta: str) -> list[tuple[str, str]]:
        return [(head, "bold"), (collection, "bold"), (f" │ {queue_words}", ""), (rates, ""), (eta, "bold")]

    return [
        form(f"{mark} {label} ", wide_queue, rates_long, eta_short),
        form(f"{mark} {label} ", long_queue, rates_long, eta_short),
        form(f"{mark} ", short_queue, rates_long, eta_short),
        form(f"{mark} ", bare_queue, rates_bare, eta_short),
    ]


def spark_text(depths: list[float], scale: float) -> str:
    """Queue depths as blocks on a fixed ``scale`` (the queue's capacity), so a
    steady queue looks steady and a full one looks full."""
    top = len(SPARK_BLOCKS) - 1
    scale = max(scale, 1.0)

    def level(depth: float) -> int:
        # Anything queued shows at least the lowest block: never an empty-looking line.
        return 0 if depth <= 0 else min(top, max(1, round(depth / scale * top)))

    return "".join(SPARK_BLOCKS[level(d)] for d in depths)


class IngestHeader(Horizontal):
    """Shows the node's ingestion state; fed by the app, never reads anything itself."""

    DEFAULT_CSS = """
    IngestHeader { height: 1; background: $panel; }
    IngestHeader #ingest-summary { width: 1fr; height: 1; padding: 0 1; }
    IngestHeader #queue-sparkline { width: 8; height: 1; margin-right: 1; color: $accent; }
    IngestHeader.-narrow #queue-sparkline { display: none; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._depths: deque[float] = deque([0.0] * SPARKLINE_SAMPLES, maxlen=SPARKLINE_SAMPLES)
        self._scale = 1.0
        self._shown: IngestView | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="ingest-summary")
        yield Static(spark_text(list(self._depths), self._scale), id="queue-sparkline")

    def show(self, view: IngestView) -> None:
        self._shown = view
        # Below 70 columns the sparkline gives its room to the words.
        width = self.size.width or self.app.size.width
        narrow = width < NARROW_WIDTH
        self.set_class(narrow, "-narrow")
        room = width - SUMMARY_PADDING - (0 if narrow else SPARKLINE_ROOM)
        self.query_one("#ingest-summary", Static).update(header_text(view, width=room))

    def on_resize(self) -> None:
        # The wording depends on the width: say it again once the width is known or changes.
        if self._shown is not None:
            self.show(self._shown)

    def record_depth(self, depth: int, capacity: int | None) -> None:
        self._depths.append(float(depth))
        # The queue's capacity when known, else the largest depth seen (never shrinking).
        self._scale = float(capacity) if capacity else max(self._scale, float(depth))
        self.query_one("#queue-sparkline", Static).update(Text(spark_text(list(self._depths), self._scale)))
