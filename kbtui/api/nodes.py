"""How a node of the knowledge base is shown: its state, and the columns that
``kbtui nodes`` and the terminal UI's Nodes view share (so both say the same).

A node is ``alive`` (the store's judgement: a heartbeat within its lease, or
on SQLite the node lock held), ``stopped`` (it said so when it left) or
``lost`` (neither: it died, or its machine or network went away; its leases
pass to the other nodes when they run out). Times are the store's clock (the
database server's on PostgreSQL); the ages are taken against this machine's.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from store.records import NodeRecord

COLUMNS = ("ID", "HOST", "ROLE", "STATE", "STARTED", "HEARTBEAT", "IN FLIGHT", "CHUNKS/S", "MODEL")


def node_state(record: NodeRecord) -> str:
    """``alive``, ``stopped`` or ``lost``."""
    if record.alive:
        return "alive"
    return "stopped" if record.stopped_at is not None else "lost"


def seconds_ago(seconds: float) -> str:
    """``3 s ago``, ``5 min ago``, ``2 h ago``, ``4 days ago``."""
    seconds = max(0.0, seconds)  # another machine's clock a little ahead of this one's
    if seconds < 60:
        return f"{seconds:.0f} s ago"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min ago"
    if seconds < 86400 * 2:
        return f"{seconds // 3600:.0f} h ago"
    return f"{seconds // 86400:.0f} days ago"


def node_cells(record: NodeRecord, now: float | None = None) -> tuple[str, ...]:
    """One row of :data:`COLUMNS` for ``record`` (a time of 0 is a node that never ran)."""
    now = time.time() if now is None else now
    started = time.strftime("%m-%d %H:%M", time.localtime(record.started_at)) if record.started_at else "never"
    heartbeat = seconds_ago(now - record.heartbeat_at) if record.heartbeat_at else "never"
    return (
        record.id[:8], record.host, record.role, node_state(record), started, heartbeat, str(record.in_flight),
        f"{record.chunks_per_s:.1f}", record.model_identity or "-",
    )
