"""Ingestion batches as the operator sees them: from the moment documents wait
until none does, and what that batch did (added, updated, skipped, failed, time).

Plain logic fed by the app once a poll (status counts of the active
collection) and by its own adds; no Textual, tested alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbtui.rates import duration_text
from kbtui.reads import IN_STAGES, Status

WAITING = (Status.PENDING.value, *IN_STAGES)


@dataclass(frozen=True)
class BatchSummary:
    added: int
    updated: int
    skipped: int
    failed: int
    seconds: float

    def text(self) -> str:
        return (
            f"{self.added} added, {self.updated} updated, {self.skipped} skipped, {self.failed} failed "
            f"in {duration_text(self.seconds)}"
        )


@dataclass
class _Open:
    started_at: float
    documents: int
    failed: int
    finished_at_start: int
    skipped: int = 0


class BatchTracker:
    """Opens a batch when documents start waiting, closes it when none waits."""

    def __init__(self) -> None:
        self._open: _Open | None = None
        self._documents_before: int | None = None  # at the last look outside a batch
        self._skipped_before = 0  # skips reported just before the rows showed up
        self.last: BatchSummary | None = None

    @property
    def running(self) -> bool:
        return self._open is not None

    def started_at(self) -> float | None:
        return None if self._open is None else self._open.started_at

    def note_skipped(self, count: int) -> None:
        """Files an add of this UI did not store (already present, refused)."""
        if self._open is not None:
            self._open.skipped += count
        else:
            self._skipped_before += count

    def observe(self, at: float, counts: dict[str, int], finished_total: int) -> BatchSummary | None:
        """One look at the collection; returns the summary when a batch just ended.

        ``finished_total`` is a running count of documents that reached Indexed
        or Failed (it tells re-indexed documents, whose count does not change).
        """
        waiting = sum(counts.get(status, 0) for status in WAITING)
        documents = sum(counts.values())
        failed = counts.get(Status.FAILED.value, 0)
        if self._open is None:
            if waiting:
                before = documents - waiting if self._documents_before is None else self._documents_before
                self._open = _Open(at, before, failed, finished_total, skipped=self._skipped_before)
                self._skipped_before = 0
            else:
                self._documents_before = documents
            return None
        if waiting:
            return None
        batch, self._open = self._open, None
        self._documents_before = documents
        added = max(0, documents - batch.documents)
        failed_now = max(0, failed - batch.failed)
        finished = max(0, finished_total - batch.finished_at_start)
        updated = max(0, finished - added)
        self.last = BatchSummary(added, updated, batch.skipped, failed_now, max(0.0, at - batch.started_at))
        return self.last
