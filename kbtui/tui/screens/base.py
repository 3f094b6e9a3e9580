"""What every kbtui screen shares."""

from __future__ import annotations

from textual.screen import Screen
from textual.worker import Worker, WorkerState

from kbtui.tui.messages import WorkFailed


class KbtuiScreen(Screen[None]):
    """A screen whose workers' failures go to the app's one error handler
    (worker state changes do not bubble on their own)."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self.post_message(WorkFailed(event.worker))

    def action_back(self) -> None:
        """Esc: back to the screen below."""
        self.dismiss()
