"""Throughput over a sliding window and the time left at that pace.

Shared by the CLI's progress line and the terminal UI's ingestion view, so
both say the same rate and ETA for the same work.
"""

from __future__ import annotations

from collections import deque

DEFAULT_WINDOW_S = 30.0
# An ETA is shown once this many units finished over at least this long.
MIN_UNITS_FOR_ETA = 3
MIN_SECONDS_FOR_ETA = 5.0
ESTIMATING = "estimating…"


class SlidingRate:
    """Units finished per second over the last ``window_s`` seconds, from a running total.

    The total is sampled whenever it is looked at; the rate is the change
    between the oldest sample still inside the window and the newest, over
    the time between them: until the window is full (a batch just started,
    see :meth:`start`), over the time elapsed, never over the whole window.
    A pace of one document every few seconds reads as, say, 0.2/s, not
    0.0/s, because the window is longer than the gap between finishes.
    """

    def __init__(self, window_s: float = DEFAULT_WINDOW_S) -> None:
        self.window_s = window_s
        self._samples: deque[tuple[float, int]] = deque()

    def record(self, at: float, total: int) -> None:
        if self._samples and total < self._samples[-1][1]:
            self._samples.clear()  # the total went back (a new batch): start over
        self._samples.append((at, total))
        while len(self._samples) > 2 and at - self._samples[1][0] >= self.window_s:
            self._samples.popleft()

    def start(self, at: float, total: int) -> None:
        """Measure from now on (a batch starts): time spent idle before it must not
        dilute the rate, which would stretch the ETA many times over."""
        self._samples.clear()
        self._samples.append((at, total))

    def settled(self, *, min_units: int = MIN_UNITS_FOR_ETA, min_seconds: float = MIN_SECONDS_FOR_ETA) -> bool:
        """Enough has been seen for an ETA to mean something: ``min_units`` finished
        over at least ``min_seconds`` (a first document or two say little)."""
        if len(self._samples) < 2:
            return False
        (t0, n0), (t1, n1) = self._samples[0], self._samples[-1]
        return n1 - n0 >= min_units and t1 - t0 >= min_seconds

    def eta(self, remaining: int) -> float | None:
        """Seconds until ``remaining`` units are done at this pace; None until
        :meth:`settled` (show it as "estimating…")."""
        if remaining <= 0:
            return 0.0
        return eta_seconds(remaining, self.per_second()) if self.settled() else None

    def per_second(self) -> float:
        if len(self._samples) < 2:
            return 0.0
        (t0, n0), (t1, n1) = self._samples[0], self._samples[-1]
        if t1 <= t0:
            return 0.0
        return max(0, n1 - n0) / (t1 - t0)

    def reset(self) -> None:
        self._samples.clear()


def eta_seconds(remaining: int, per_second: float) -> float | None:
    """Seconds until ``remaining`` units are done at ``per_second`` (None: unknown)."""
    if remaining <= 0:
        return 0.0
    if per_second <= 0:
        return None
    return remaining / per_second


def duration_text(seconds: float | None) -> str:
    """``45 s``, ``3 min 20 s``, ``2 h 05 min``, or ``–`` when unknown."""
    if seconds is None:
        return "–"
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def rate_text(per_second: float) -> str:
    """``4.2/s``, ``0.25/s``, or ``12/min`` for slow paces (never a bare ``0.0/s`` while work finishes)."""
    if per_second <= 0:
        return "0/s"
    if per_second >= 1:
        return f"{per_second:.1f}/s"
    if per_second >= 0.1:
        return f"{per_second:.2f}/s"
    return f"{per_second * 60:.1f}/min"
