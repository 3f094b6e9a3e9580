"""The live event stream: pipeline events as server-sent events, both ways.

The node writes each event the actors publish as one SSE frame
(``event: <name>`` and a JSON ``data:`` line); a client reads the frames back
into the same :mod:`actors.events` values. The node's own log lines travel
the same way (``log_line``: time, level, logger, message; as content-free as
the log file they also go to). Two more frames exist only on the
wire: ``overflow`` (the client read too slowly and missed events: the stream
ends, reconnect and re-read what you show) and ``stopping`` (the node stops).

Light on purpose: a client imports this without the server library.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from actors.events import Event
    from kbtui.logs import LogLine

OVERFLOW = "overflow"
STOPPING = "stopping"


def event_json(event: Event | LogLine) -> dict[str, object]:
    """The ``data`` of an event's frame (no text: ids, statuses, counts, reason codes)."""
    from actors.events import DocumentReleased, DocumentStatusChanged
    from kbtui.logs import LogLine

    if isinstance(event, LogLine):
        return {"at": event.at, "level": event.level, "logger": event.logger, "message": event.message}
    if isinstance(event, DocumentStatusChanged):
        return {"document_id": event.document_id, "collection": event.collection_id, "status": event.status,
                "progress": event.progress, "reason": event.reason, "node": event.node}
    if isinstance(event, DocumentReleased):
        return {"document_id": event.document_id, "reason": event.reason, "retry_after_s": event.retry_after_s}
    return {"queue_depth": event.queue_depth, "queue_capacity": event.queue_capacity, "in_flight": event.in_flight,
            "accepted": event.accepted, "rejected": event.rejected, "paused_for_s": event.paused_for_s}


def event_from(name: str, data: dict) -> Event | LogLine | None:
    """The event a frame carries (None for frames that are not pipeline events or log lines)."""
    from actors.events import AdmissionChanged, DocumentReleased, DocumentStatusChanged
    from kbtui.logs import LogLine

    if name == LogLine.name:
        return LogLine(float(data["at"]), str(data["level"]), str(data["logger"]), str(data["message"]))
    if name == DocumentStatusChanged.name:
        node = data.get("node")  # the node that did the work (absent from an older node's stream)
        return DocumentStatusChanged(data["document_id"], data["collection"], data["status"], data["progress"],
                                     data["reason"], node=node if isinstance(node, str) else "")
    if name == DocumentReleased.name:
        return DocumentReleased(data["document_id"], data["reason"], data["retry_after_s"])
    if name == AdmissionChanged.name:
        return AdmissionChanged(data["queue_depth"], data["queue_capacity"], data["in_flight"], data["accepted"],
                                data["rejected"], data["paused_for_s"])
    return None


def frame(name: str, data: dict[str, object], *, event_id: int | None = None) -> bytes:
    """One server-sent event."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


KEEP_ALIVE = b": keep-alive\n\n"
