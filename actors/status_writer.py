"""NodeStatusWriter: publishes the node's admission counters for other processes.

``kbtui status`` (another process) reads ``node-status.json``; it is trusted
only while the node lock is held. Writes are throttled and atomic (rename).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from actors.events import AdmissionChanged, FlushStatus
from actors.listener import EventListener

STATUS_FILE_NAME = "node-status.json"
MIN_INTERVAL_S = 0.25


class NodeStatusWriter(EventListener):
    def __init__(self, home: Path) -> None:
        super().__init__()
        self.path = home / STATUS_FILE_NAME
        self.last_written = 0.0
        self.latest: AdmissionChanged | None = None

    def on_admission_changed(self, event: AdmissionChanged) -> None:
        self.latest = event
        if time.monotonic() - self.last_written >= MIN_INTERVAL_S:
            self.flush()

    def on_command(self, message: object) -> object:
        if isinstance(message, FlushStatus):
            self.flush()
            return None
        return super().on_command(message)

    def flush(self) -> None:
        if self.latest is None:
            return
        event = self.latest
        payload = {
            "pid": os.getpid(),
            "written_at": time.time(),
            "queue_depth": event.queue_depth,
            "queue_capacity": event.queue_capacity,
            "in_flight": event.in_flight,
            "accepted": event.accepted,
            "rejected": event.rejected,
            "paused_for_s": round(event.paused_for_s, 1),
        }
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(payload))
        os.replace(tmp, self.path)
        self.last_written = time.monotonic()

    def on_stop(self) -> None:
        self.flush()


def read_node_status(home: Path) -> dict[str, object] | None:
    """What the node last published (None when missing, unreadable or malformed);
    trust it only while the node lock is held."""
    try:
        payload = json.loads((home / STATUS_FILE_NAME).read_text())
    except (OSError, ValueError):
        return None
    return payload if isinstance(payload, dict) else None


def published_admission(home: Path) -> AdmissionChanged | None:
    """The published queue figures as the event they came from."""
    payload: dict[str, Any] | None = read_node_status(home)
    if payload is None:
        return None
    try:
        return AdmissionChanged(
            queue_depth=int(payload["queue_depth"]),
            queue_capacity=int(payload["queue_capacity"]),
            in_flight=int(payload["in_flight"]),
            accepted=int(payload["accepted"]),
            rejected=int(payload["rejected"]),
            paused_for_s=float(payload.get("paused_for_s") or 0.0),
        )
    except (KeyError, TypeError, ValueError):
        return None
