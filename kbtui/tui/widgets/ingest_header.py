"""The ingestion header: who indexes, the queue, counters, throughput and a
sparkline of queue depth."""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Sparkline, Static

from actors.events import AdmissionChanged

SPARKLINE_SAMPLES = 60
THROUGHPUT_WINDOW_S = 10.0

MODE_LABELS = {
    "starting": ("…", "starting"),
    "node": ("●", "node"),
    "client": ("○", "client"),
    "viewer": ("○", "no node"),
}


class Throughput:
    """Documents finished per second over a sliding window, from a running total."""

    def __init__(self, window_s: float = THROUGHPUT_WINDOW_S) -> None:
        self.window_s = window_s
        self._samples: deque[tuple[float, int]] = deque()

    def record(self, at: float, finished_total: int) -> None:
        self._samples.append((at, finished_total))
        while len(self._samples) > 2 and at - self._samples[1][0] >= self.window_s:
            self._samples.popleft()

    def per_second(self) -> float:
        if len(self._samples) < 2:
            return 0.0
        (t0, n0), (t1, n1) = self._samples[0], self._samples[-1]
        if t1 <= t0:
            return 0.0
        return max(0, n1 - n0) / (t1 - t0)


def header_text(mode: str, collection_id: str, queue: AdmissionChanged | None, rate: float, *, wide: bool) -> Text:
    """One line, e.g. ``● node DEFAULT │ queue 12/256 · in flight 8 │ accepted 120 · rejected 0 │ 4.2 doc/s``
    (``queue 12/256 run 8 │ acc 120 rej 0 │ 4.2/s`` when not ``wide``, to fit 80 columns)."""
    mark, label = MODE_LABELS.get(mode, ("?", mode))
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"{mark} {label} ", style="bold")
    text.append(collection_id, style="bold")
    text.append(" │ ")
    if queue is None:
        text.append("added documents wait as Pending" if mode == "viewer" else "queue –", style="dim")
    else:
        if wide:
            text.append(f"queue {queue.queue_depth}/{queue.queue_capacity} · in flight {queue.in_flight}")
            text.append(f" │ accepted {queue.accepted} · rejected {queue.rejected}")
        else:
            text.append(f"queue {queue.queue_depth}/{queue.queue_capacity} run {queue.in_flight}")
            text.append(f" │ acc {queue.accepted} rej {queue.rejected}")
        if queue.paused_for_s > 0:
            text.append(f" · paused {queue.paused_for_s:.0f}s", style="bold")
    text.append(f" │ {rate:.1f} doc/s" if wide else f" │ {rate:.1f}/s")
    return text


class IngestHeader(Horizontal):
    """Shows the node's ingestion state; fed by the app, never reads anything itself."""

    DEFAULT_CSS = """
    IngestHeader { height: 1; background: $panel; }
    IngestHeader #ingest-summary { width: 1fr; height: 1; padding: 0 1; }
    IngestHeader #queue-sparkline { width: 12; height: 1; margin-right: 1; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._depths: deque[float] = deque([0.0] * SPARKLINE_SAMPLES, maxlen=SPARKLINE_SAMPLES)
        self._shown: tuple[str, str, AdmissionChanged | None, float] | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="ingest-summary")
        yield Sparkline(list(self._depths), id="queue-sparkline", summary_function=max)

    def show(self, mode: str, collection_id: str, queue: AdmissionChanged | None, rate: float) -> None:
        self._shown = (mode, collection_id, queue, rate)
        wide = self.size.width >= 110
        self.query_one("#ingest-summary", Static).update(header_text(mode, collection_id, queue, rate, wide=wide))

    def on_resize(self) -> None:
        # The wording depends on the width: say it again once the width is known or changes.
        if self._shown is not None:
            self.show(*self._shown)

    def record_depth(self, depth: int) -> None:
        self._depths.append(float(depth))
        self.query_one("#queue-sparkline", Sparkline).data = list(self._depths)
