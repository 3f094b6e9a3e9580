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
from kbtui.rates import SlidingRate, duration_text, rate_text

SPARKLINE_SAMPLES = 8
SPARK_BLOCKS = " ▁▂▃▄▅▆▇█"
THROUGHPUT_WINDOW_S = 30.0

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


def header_text(view: IngestView, *, wide: bool) -> Text:
    """One line: ``● node DEFAULT │ queue 39/256 run 8 │ 0.25 doc/s 3.1 chunk/s │ ETA 2:40``
    (shorter words when not ``wide``, to fit 80 columns beside the sparkline)."""
    mark, label = MODE_LABELS.get(view.mode, ("?", view.mode))
    queue = view.queue
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"{mark} {label} ", style="bold")
    text.append(view.collection_id, style="bold")
    text.append(" │ ")
    if queue is None:
        text.append("added documents wait as Pending" if view.mode == "viewer" else "queue –", style="dim")
    else:
        if wide:
            text.append(f"queue {queue.queue_depth}/{queue.queue_capacity} · in flight {queue.in_flight}")
            text.append(f" │ accepted {queue.accepted} · rejected {queue.rejected}")
        else:
            text.append(f"queue {queue.queue_depth}/{queue.queue_capacity} run {queue.in_flight}")
        if queue.paused_for_s > 0:
            text.append(f" · paused {queue.paused_for_s:.0f}s", style="bold")
    if view.mode == "viewer":
        return text
    docs, chunks = rate_text(view.documents_per_s), rate_text(view.chunks_per_s)
    narrow = f" │ {docs.replace('/', ' doc/')} {chunks.replace('/', ' ch/')}"
    text.append(f" │ documents {docs} · chunks {chunks}" if wide else narrow)
    if view.ocr_pages_per_min:
        text.append(f" · OCR {view.ocr_pages_per_min} pages/min" if wide else f" ocr {view.ocr_pages_per_min}/min")
    if view.waiting:
        eta = duration_text(view.eta_s) if wide else clock_text(view.eta_s)
        text.append(f" │ ETA {eta}", style="bold")
    return text


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
        wide = self.size.width >= 110
        self.query_one("#ingest-summary", Static).update(header_text(view, wide=wide))

    def on_resize(self) -> None:
        # The wording depends on the width: say it again once the width is known or changes.
        if self._shown is not None:
            self.show(self._shown)

    def record_depth(self, depth: int, capacity: int | None) -> None:
        self._depths.append(float(depth))
        # The queue's capacity when known, else the largest depth seen (never shrinking).
        self._scale = float(capacity) if capacity else max(self._scale, float(depth))
        self.query_one("#queue-sparkline", Static).update(Text(spark_text(list(self._depths), self._scale)))
