"""What every kbtui screen shares."""

from __future__ import annotations

from textual.screen import Screen
from textual.worker import Worker


class KbtuiScreen(Screen[None]):
    """A screen whose workers' failures go to the app's one error handler
    (worker state changes do not bubble on their own)."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        self.app.report_worker_state(event)  # type: ignore[attr-defined]
