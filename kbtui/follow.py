"""Follow documents to a terminal status, with a progress bar on a terminal.

Works the same whether the pipeline runs in this process or in another node:
the catalog is the source of truth, so progress is read from it (or from
the running node's event stream).
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn
from rich.table import Column

from kbtui.ports import Catalog
from kbtui.rates import SlidingRate, duration_text, eta_seconds, rate_text
from store.records import Status

STAGES = ("Pending", "Extracting", "Chunking", "Embedding", "Indexed", "Failed")


@dataclass(frozen=True)
class FollowResult:
    counts: dict[str, int]
    stalled: bool  # gave up waiting: documents are still queued (e.g. embedder down)

    @property
    def failed(self) -> int:
        return self.counts.get(Status.FAILED.value, 0)

    @property
    def unfinished(self) -> int:
        return sum(v for k, v in self.counts.items() if k not in (Status.INDEXED.value, Status.FAILED.value))


def counting_in(catalog: Catalog) -> Callable[[Sequence[str]], Counter[str]]:
    """How many of some documents are in each status, read from ``catalog``."""
    return lambda document_ids: Counter(catalog.statuses(document_ids).values())


def stage_summary(counts: Counter[str]) -> str:
    return " · ".join(f"{name.lower()} {counts.get(name, 0)}" for name in STAGES if counts.get(name))


def progress_text(done: int, total: int, per_second: float, counts: Counter[str]) -> str:
    """The progress line's words, most important first (the end is cut at narrow widths):
    ``12/47 · 0.25/s · ETA 2 min 20 s · embedding 6 · pending 29``."""
    eta = duration_text(eta_seconds(total - done, per_second))
    # The stages at work first, then what waits.
    stages = " · ".join(f"{name.lower()} {counts[name]}" for name in (*STAGES[1:4], STAGES[0]) if counts.get(name))
    failed = f" · failed {counts[Status.FAILED.value]}" if counts.get(Status.FAILED.value) else ""
    return f"{done}/{total} · {rate_text(per_second)} · ETA {eta}{failed}" + (f" · {stages}" if stages else "")


def progress_display(console: Console, *, disable: bool = False) -> Progress:
    """The progress line: a fixed-width bar and words that never wrap, so at 80
    columns the line is cut at its end, never squeezed column by column into
    ``3… 0…``. A task's ``line`` field holds the words (:func:`progress_text`)."""
    return Progress(
        TextColumn("[bold]indexing"), BarColumn(bar_width=12),
        TextColumn("{task.fields[line]}", table_column=Column(no_wrap=True, overflow="ellipsis", ratio=1)),
        console=console, disable=disable, transient=True, expand=True,
    )


def follow_documents(
    document_ids: Sequence[str],
    *,
    show_progress: bool | None = None,
    poll_s: float = 0.2,
    stall_timeout_s: float = 120.0,
    on_poll: Callable[[], None] | None = None,
    count: Callable[[Sequence[str]], Counter[str]],
) -> FollowResult:
    """Wait until every document is Indexed or Failed (or nothing moves for
    ``stall_timeout_s``), drawing per-stage counts and an ETA on stderr.

    Each document counts once, however often its id is given (two identical
    files, ``reindex X X``): a repeated id would otherwise wait for a row
    that can never be counted twice, until the stall timeout.

    ``count`` reads the statuses (:func:`counting_in` the catalog; a client of
    a running node counts what the node's event stream told it)."""
    ids = list(dict.fromkeys(document_ids))
    show = sys.stderr.isatty() if show_progress is None else show_progress
    # Reading the statuses of a large batch costs: look less often, up to once a second.
    poll_s = min(max(poll_s, len(ids) / 10_000), 1.0)
    progress = progress_display(Console(stderr=True), disable=not show)
    rate = SlidingRate()
    last_change = time.monotonic()
    previous: Counter[str] | None = None
    with progress:
        task = progress.add_task("indexing", total=len(ids), line="")
        while True:
            counts = count(ids)
            done = counts[Status.INDEXED.value] + counts[Status.FAILED.value]
            rate.record(time.monotonic(), done)
            progress.update(task, completed=done, line=progress_text(done, len(ids), rate.per_second(), counts))
            if counts != previous:
                previous, last_change = counts, time.monotonic()
            if done >= len(ids):
                return FollowResult(dict(counts), stalled=False)
            if time.monotonic() - last_change > stall_timeout_s:
                return FollowResult(dict(counts), stalled=True)
            if on_poll is not None:
                on_poll()
            time.sleep(poll_s)
