"""The bridge from pipeline events to the UI: an event listener actor that posts
Textual messages.

Its handlers only hand off: ``post`` is ``App.post_message``, which is
thread-safe and never blocks, so the actor never waits on the UI (no
``call_from_thread``, no future awaited) and a flood of progress collapses in
the app's queue (see :mod:`kbtui.tui.messages`). The translation is a plain
function, :func:`message_for`, tested on its own.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.message import Message

from actors.events import AdmissionChanged, DocumentStatusChanged, Event
from actors.listener import EventListener
from kbtui.tui.messages import AdmissionUpdated, DocumentStatusUpdated

Post = Callable[[Message], object]


def message_for(event: Event) -> Message | None:
    """The UI message for a pipeline event, or None when the UI does not show it."""
    if isinstance(event, DocumentStatusChanged):
        return DocumentStatusUpdated(event)
    if isinstance(event, AdmissionChanged):
        return AdmissionUpdated(event)
    return None


class TuiBridge(EventListener):
    """Tells the UI about document status and admission changes."""

    def __init__(self, post: Post) -> None:
        super().__init__()
        self._post = post

    def on_document_status_changed(self, event: DocumentStatusChanged) -> None:
        self._hand_off(event)

    def on_admission_changed(self, event: AdmissionChanged) -> None:
        self._hand_off(event)

    def _hand_off(self, event: Event) -> None:
        message = message_for(event)
        if message is not None:
            self._post(message)
