"""Events between nodes: this node's document status changes to every other
node of a shared store, and theirs to this node's listeners.

:class:`NodeEventRelay` is an event listener actor that the runtime starts
only on a store many nodes share (``store.coordination`` is not None). It

- announces each of this node's :class:`DocumentStatusChanged` events through
  :meth:`kbtui.ports.Coordination.announce` as compact JSON: ids, status,
  progress, reason code and this node's id, never a document's text or name.
  Sending happens on a thread of its own behind a bounded outbox: a slow or
  unreachable server never holds up the actor, let alone the pipeline; what
  cannot be sent is dropped (one debug line per run of failures). The catalog
  keeps every status, so a missed event costs a late update, never a wrong one;
- listens (:meth:`kbtui.ports.Coordination.listen`, on a daemon thread) and
  re-publishes the other nodes' events here with :func:`actors.listener.publish`,
  each carrying the id of the node that did the work. Its own announcements
  come back from the server too: they are skipped, as is anything that is not
  exactly an event of this shape.

Only document status changes travel: the admission figures
(:class:`AdmissionChanged`) are each node's own. The local admission counts
only the documents it holds (``in_flight``), so another node's events for other
documents change nothing there.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time

from actors.events import DocumentStatusChanged
from actors.listener import EventListener, publish
from kbtui.ports import Coordination
from store.records import Status

log = logging.getLogger(__name__)

OUTBOX_SIZE = 1024  # announcements waiting to be sent; more are dropped
STOP_TIMEOUT_S = 2.0  # how long stopping waits for the threads
DRAIN_S = 0.5  # at stop, how long what is still queued may take to go out
_STATUSES = frozenset(status.value for status in Status)
_FIELDS = frozenset({"v", "node", "document_id", "collection", "status", "progress", "reason"})
_MAX_ID = 128  # document ids, collection ids and node ids are short; anything longer is not ours
VERSION = 1


def encode(event: DocumentStatusChanged, node_id: str) -> str:
    """The announcement of ``event``, done by ``node_id`` (compact JSON, no text or names)."""
    return json.dumps(
        {"v": VERSION, "node": node_id, "document_id": event.document_id, "collection": event.collection_id,
         "status": event.status, "progress": event.progress, "reason": event.reason},
        separators=(",", ":"),
    )


def decode(payload: str) -> DocumentStatusChanged | None:
    """The event an announcement carries, or None for anything else (checked strictly:
    exactly these fields, of these types, a known status, a progress in 0..1)."""
    try:
        data = json.loads(payload, parse_constant=_refuse)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or set(data) != _FIELDS or data["v"] != VERSION:
        return None
    node, document_id, collection, status = data["node"], data["document_id"], data["collection"], data["status"]
    progress, reason = data["progress"], data["reason"]
    if not all(_short_text(value) for value in (node, document_id, collection)):
        return None
    if status not in _STATUSES:
        return None
    if isinstance(progress, bool) or not isinstance(progress, (int, float)) or not 0.0 <= progress <= 1.0:
        return None
    if reason is not None and not _short_text(reason):
        return None
    return DocumentStatusChanged(document_id, collection, status, float(progress), reason, node=node)


def _short_text(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= _MAX_ID and value.isprintable()


def _refuse(name: str) -> object:
    raise ValueError(f"{name} is not a number")


class NodeEventRelay(EventListener):
    """This node's status changes out to the other nodes, theirs in to this node's listeners."""

    def __init__(self, coordination: Coordination, *, outbox_size: int = OUTBOX_SIZE) -> None:
        super().__init__()
        self.coordination = coordination
        self.node_id = coordination.node_id
        self._outbox: queue.Queue[str] = queue.Queue(maxsize=outbox_size)
        self._stopping = threading.Event()
        self._sending_fails = False  # a run of failed sends is logged once
        self._threads: list[threading.Thread] = []

    def on_start(self) -> None:
        for name, target in (("kbtui-events-out", self._send), ("kbtui-events-in", self._listen)):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def on_stop(self) -> None:
        self._stopping.set()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        if any(thread.is_alive() for thread in self._threads):
            log.debug("an event relay thread is still busy at shutdown (a slow server); left behind")

    # ------------------------------------------------------------ out: this node's events

    def on_document_status_changed(self, event: DocumentStatusChanged) -> None:
        if event.node and event.node != self.node_id:
            return  # another node's event, re-published here: it has been announced already
        try:
            self._outbox.put_nowait(encode(event, self.node_id))
        except queue.Full:
            self._note_failure("the outbox is full")

    def _send(self) -> None:
        drain_until: float | None = None  # once stopping: what is queued still goes, for a moment
        while True:
            if self._stopping.is_set():
                drain_until = drain_until or time.monotonic() + DRAIN_S
                if self._outbox.empty() or time.monotonic() > drain_until:
                    return
            try:
                payload = self._outbox.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                self.coordination.announce(payload)
            except Exception as exc:  # noqa: BLE001 - a server that is slow or down: drop, never wait
                self._note_failure(type(exc).__name__)
            else:
                self._sending_fails = False

    def _note_failure(self, why: str) -> None:
        if not self._sending_fails:
            log.debug("could not send events to the other nodes (%s); dropped until it works again", why)
        self._sending_fails = True

    # ------------------------------------------------------------ in: the other nodes' events

    def _listen(self) -> None:
        try:
            self.coordination.listen(self._received, self._stopping.is_set)
        except Exception as exc:  # noqa: BLE001 - listen reconnects by itself; anything else ends the relay's ears
            log.warning("the event listener stopped (%s); other nodes' work shows at the next refresh",
                        type(exc).__name__)

    def _received(self, payload: str) -> None:
        event = decode(payload)
        if event is None or event.node == self.node_id:
            return  # not an event of ours to relay, or this node's own coming back
        publish(event)
