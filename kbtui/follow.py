"""Follow documents to a terminal status, with a progress bar on a terminal.

Works the same whether the pipeline runs in this process or in another node:
the database is the source of truth, so progress is read from it.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)

from store.id_batches import id_batches
from store.models import Document, Status

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


def status_counts(document_ids: Sequence[str]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for part in id_batches(document_ids):
        for row in Document.select(Document.status).where(Document.id.in_(part)):
            counts[row.status] += 1
    return counts


def stage_summary(counts: Counter[str]) -> str:
    return " · ".join(f"{name.lower()} {counts.get(name, 0)}" for name in STAGES if counts.get(name))


def follow_documents(
    document_ids: Sequence[str],
    *,
    show_progress: bool | None = None,
    poll_s: float = 0.2,
    stall_timeout_s: float = 120.0,
    on_poll: Callable[[], None] | None = None,
    count: Callable[[Sequence[str]], Counter[str]] = status_counts,
) -> FollowResult:
    """Wait until every document is Indexed or Failed (or nothing moves for
    ``stall_timeout_s``), drawing per-stage counts and an ETA on stderr.

    ``count`` reads the statuses (the catalog by default; a client of a
    running node counts what the node's event stream told it)."""
    ids = list(document_ids)
    show = sys.stderr.isatty() if show_progress is None else show_progress
    # Reading the statuses of a large batch costs: look less often, up to once a second.
    poll_s = min(max(poll_s, len(ids) / 10_000), 1.0)
    progress = Progress(
        TextColumn("[bold]indexing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        TextColumn("{task.fields[stages]}"),
        console=Console(stderr=True), disable=not show, transient=True,
    )
    last_change = time.monotonic()
    previous: Counter[str] | None = None
    with progress:
        task = progress.add_task("indexing", total=len(ids), stages="")
        while True:
            counts = count(ids)
            done = counts[Status.INDEXED.value] + counts[Status.FAILED.value]
            progress.update(task, completed=done, stages=stage_summary(counts))
            if counts != previous:
                previous, last_change = counts, time.monotonic()
            if done >= len(ids):
                return FollowResult(dict(counts), stalled=False)
            if time.monotonic() - last_change > stall_timeout_s:
                return FollowResult(dict(counts), stalled=True)
            if on_poll is not None:
                on_poll()
            time.sleep(poll_s)
