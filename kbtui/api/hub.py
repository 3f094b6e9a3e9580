"""Pipeline events to every event-stream client, without ever blocking the pipeline.

:class:`EventRelay` is an event listener actor like the TUI bridge: it is
told each event and hands it to the :class:`EventHub`, which encodes it once
and queues the frame for each subscriber on the server's event loop
(``call_soon_threadsafe``: a hand-off that never waits). Each subscriber's
queue is bounded: a client that falls behind by more than its buffer gets an
``overflow`` frame and its stream ends (it re-reads what it shows and
reconnects), so one slow or vanished client costs bounded memory and
never slows the node or the other clients. The node's log lines join the
stream through a :class:`kbtui.logs.LogLineHandler` that publishes here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import threading

from actors.events import AdmissionChanged, DocumentReleased, DocumentStatusChanged, Event
from actors.listener import EventListener
from kbtui.api.events import OVERFLOW, STOPPING, event_json, frame
from kbtui.logs import LogLine

log = logging.getLogger(__name__)

SUBSCRIBER_BUFFER = 1024  # frames a client may fall behind before it is cut off
MAX_SUBSCRIBERS = 32
END = b""  # queued after the last frame of a stream


class Subscription:
    """One client's bounded queue of frames, living on the server's loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, buffer: int) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[bytes] = asyncio.Queue(maxsize=buffer)
        self.ended = False

    def offer(self, data: bytes) -> None:
        """On the loop: queue a frame, or end the stream of a client that fell behind."""
        if self.ended:
            return
        try:
            self.queue.put_nowait(data)
        except asyncio.QueueFull:
            self._end_with(frame(OVERFLOW, {"missed": "events"}))
            log.info("api: an event-stream client fell behind and was cut off")

    def end(self, last: bytes) -> None:
        if not self.ended:
            self._end_with(last)

    def _end_with(self, last: bytes) -> None:
        self.ended = True
        while not self.queue.empty():
            self.queue.get_nowait()
        self.queue.put_nowait(last)
        self.queue.put_nowait(END)


class EventHub:
    def __init__(
        self, *, buffer: int = SUBSCRIBER_BUFFER, max_subscribers: int = MAX_SUBSCRIBERS, node_id: str = ""
    ) -> None:
        self.node_id = node_id  # named in this node's own document events (another node's carry theirs)
        self.buffer = buffer
        self.max_subscribers = max_subscribers
        self._subscribers: set[Subscription] = set()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.closed = False

    def subscribe(self, loop: asyncio.AbstractEventLoop) -> Subscription | None:
        """A new stream's queue, or None when the hub is full or closed."""
        with self._lock:
            if self.closed or len(self._subscribers) >= self.max_subscribers:
                return None
            subscription = Subscription(loop, self.buffer)
            self._subscribers.add(subscription)
            return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        with self._lock:
            self._subscribers.discard(subscription)

    @property
    def subscriber_count(self) -> int:
        with self._lock:
            return len(self._subscribers)

    def publish(self, event: Event | LogLine) -> None:
        """From any thread: queue ``event`` for every subscriber; never waits."""
        if isinstance(event, DocumentStatusChanged) and not event.node:
            event = dataclasses.replace(event, node=self.node_id)
        data = frame(event.name, event_json(event), event_id=next(self._ids))
        self._hand_to_all(lambda s: s.offer(data))

    def close(self) -> None:
        """End every stream (the node is stopping) and take no new subscribers."""
        with self._lock:
            self.closed = True
        last = frame(STOPPING, {})
        self._hand_to_all(lambda s: s.end(last))

    def _hand_to_all(self, action) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        for subscription in subscribers:
            try:
                subscription.loop.call_soon_threadsafe(action, subscription)
            except RuntimeError:  # its loop is closed: the server has stopped
                self.unsubscribe(subscription)


class EventRelay(EventListener):
    """Tells the hub about the events the API streams."""

    def __init__(self, hub: EventHub) -> None:
        super().__init__()
        self.hub = hub
        self._last_queue: AdmissionChanged | None = None

    def on_document_status_changed(self, event: DocumentStatusChanged) -> None:
        self.hub.publish(event)

    def on_document_released(self, event: DocumentReleased) -> None:
        self.hub.publish(event)

    def on_admission_changed(self, event: AdmissionChanged) -> None:
        # The drain sweep announces the queue on every tick: stream changes only.
        if event != self._last_queue:
            self._last_queue = event
            self.hub.publish(event)
