"""How values look in tables: status with stage progress, sizes, times.

Plain functions returning Rich ``Text`` (never markup strings: a file name
with brackets must show as typed, not be parsed).
"""

from __future__ import annotations

import math
import time

from rich.text import Text

from kbtui.printable import (
    human_size,  # noqa: F401 - one size format for the CLI and the UI
    printable,
)
from kbtui.reads import Status

STATUS_STYLES = {
    Status.PENDING.value: "dim",
    Status.EXTRACTING.value: "bold",
    Status.CHUNKING.value: "bold",
    Status.EMBEDDING.value: "bold",
    Status.INDEXED.value: "green",
    Status.FAILED.value: "bold red",
}
BAR_WIDTH = 5


def status_cell(status: str, progress: float, reason: str | None, *, bar: bool = True, reindexing: bool = False) -> Text:
    """``Embedding ▰▰▰▱▱`` while in a stage (``bar``), ``Failed extract_timeout`` on failure;
    ``re-indexing`` (``re-index ▰▰▱▱▱`` in a stage) for a document that still serves its old index."""
    if reindexing:
        in_stage = status in (Status.EXTRACTING.value, Status.CHUNKING.value, Status.EMBEDDING.value)
        text = Text("re-index" if in_stage and bar else "re-indexing", style="cyan")
        status = status if in_stage else ""
    else:
        text = Text(status, style=STATUS_STYLES.get(status, ""))
    if status == Status.FAILED.value and reason:
        text.append(" " + reason, style="red")
    elif bar and status in (Status.EXTRACTING.value, Status.CHUNKING.value, Status.EMBEDDING.value):
        filled = max(0, min(BAR_WIDTH, math.ceil(progress * BAR_WIDTH)))
        text.append(" " + "▰" * filled + "▱" * (BAR_WIDTH - filled), style="cyan")
    return text


def fit(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, the ellipsis in the middle: names
    that share a long beginning still differ where they end (``report-2024…-03.pdf``)."""
    if len(text) <= width:
        return text
    if width < 8:
        return text[: max(0, width - 1)] + "…"
    tail = (width - 1) // 2
    return text[: width - 1 - tail] + "…" + text[len(text) - tail :]


def short_time(at: float, now: float) -> str:
    """``14:02`` for today, ``03-14`` for an earlier day (local time)."""
    moment, today = time.localtime(at), time.localtime(now)
    if moment[:3] == today[:3]:
        return time.strftime("%H:%M", moment)
    return time.strftime("%m-%d", moment)


def full_time(at: float | None) -> str:
    """``2026-03-14 14:02:07`` (local time), or ``-``."""
    return "-" if at is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def inert(text: str) -> str:
    """Document-supplied text made safe to show: control, BiDi and zero-width
    characters escaped (so nothing can reorder or hide what is on screen),
    line breaks kept."""
    return "\n".join(printable(line) for line in text.split("\n"))
