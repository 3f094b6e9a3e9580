"""The bridge from pipeline events to the UI: an event listener actor that posts
Textual messages (when the TUI runs the node), or the running node's event
stream read into the same messages (when it is a client of another node).

Its handlers only hand off: ``post`` is ``App.post_message``, which is
thread-safe and never blocks, so the actor never waits on the UI (no
``call_from_thread``, no future awaited) and a flood of progress collapses in
the app's queue (see :mod:`kbtui.tui.messages`). The translation is a plain
function, :func:`message_for`, tested on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.message import Message

from actors.events import AdmissionChanged, DocumentStatusChanged, Event
from actors.listener import EventListener
from kbtui.api.client import follow_events, unix_endpoint
from kbtui.api.transport import EventStream, NodeUnavailable
from kbtui.logs import LogLine
from kbtui.tui.messages import AdmissionUpdated, DocumentStatusUpdated, NodeLogged

Post = Callable[[Message], object]


def message_for(event: Event | LogLine) -> Message | None:
    """The UI message for a pipeline event or a log line, or None when the UI does not show it."""
    if isinstance(event, LogLine):
        return NodeLogged(event)
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


# ---------------------------------------------------------------- client mode: the node's event stream


class NodeEventsOpened(Message):
    """A TUI in client mode is following the running node's event stream."""


class NodeEventsEnded(Message):
    """The running node's event stream ended: it stopped (or cut this client off)."""


def follow_node_events(home: Path, post: Post, on_open: Callable[[EventStream], None]) -> None:
    """Post the running node's events as the same messages the bridge posts, until
    the stream ends (blocks: run it in a thread). ``on_open`` gets the stream, so
    the app can close it when it quits. Posts nothing but the end when no node answers."""
    try:
        def opened(stream: EventStream) -> None:
            on_open(stream)
            post(NodeEventsOpened())

        for event in follow_events(unix_endpoint(home), on_open=opened):
            message = message_for(event)
            if message is not None:
                post(message)
    except NodeUnavailable:
        pass
    finally:
        post(NodeEventsEnded())
