"""Many nodes on one PostgreSQL knowledge base (:class:`kbtui.ports.Coordination`).

Work is claimed, not pushed. A node takes the oldest claimable documents
with ``FOR UPDATE SKIP LOCKED`` (two nodes never take one row) and writes its
id and a deadline into the row: its lease. Its admission renews the leases of
the documents it holds at every heartbeat. A node that dies (kill -9, a lost
network, a machine switched off) stops renewing; once ``lease_until`` has
passed, any node claims those documents again, from Pending. A stage's write
on a document carries the lease (``store.postgres.catalog``): after a
takeover the old holder's writes are refused, so a document is committed by
one node only, and its commit replaces its rows in one transaction (no chunk
twice, nothing half visible).

Times are the server's (``clock_timestamp()``), so machines whose clocks
disagree still agree on who holds what. Each node is named by the stable id
of its data directory (``node.id``): a node that restarts is the same node
and takes back its own documents at once.

Events travel with LISTEN/NOTIFY on one channel; a payload names the node
that sent it, and a listener skips its own.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg

from store.errors import PipelineHeldElsewhere
from store.postgres.connection import PostgresSettings, connect
from store.records import NON_TERMINAL, NodeRecord, Status

if TYPE_CHECKING:
    from store.postgres.storage import Connections

log = logging.getLogger(__name__)

NODE_ID_FILE = "node.id"
DEFAULT_LEASE_S = 15.0
EVENT_CHANNEL = "kbtui_events"
# A NOTIFY payload must stay under 8000 bytes; events are a few hundred.
MAX_PAYLOAD_BYTES = 7000
# The server's clock, in the unit of every time column.
NOW = "extract(epoch FROM clock_timestamp())"
# pg_advisory_xact_lock key serialising joins ("kbtu" "join").
JOIN_LOCK = 0x6B627475_6A6F696E
# Single-runner jobs: "kbtu" and a CRC of the job's name.
_JOB_LOCK_HIGH = 0x6B627475
RATE_WINDOW_S = 60.0
# Written out, not a parameter, so the planner can use the partial index of
# unfinished documents (document_work) whatever share of the base is done.
_UNFINISHED = "status NOT IN ('Indexed', 'Failed')"


def node_id_of(home: Path) -> str:
    """The stable id of the node whose data directory is ``home`` (made on first use).

    A directory that cannot be written gets an id for this process only: it
    never claims work, so nothing is lost if the id does not survive it."""
    path = home / NODE_ID_FILE
    with contextlib.suppress(OSError, UnicodeDecodeError):
        text = path.read_text(encoding="ascii").strip()
        if len(text) == 32 and all(c in "0123456789abcdef" for c in text):
            return text
    node_id = secrets.token_hex(16)
    with contextlib.suppress(OSError):
        tmp = path.with_name(f".{NODE_ID_FILE}.{os.getpid()}.tmp")
        tmp.write_text(node_id + "\n", encoding="ascii")
        # A rival process may have written one first: the first id stands.
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)
        text = path.read_text(encoding="ascii").strip()
        if len(text) == 32:
            return text
    return node_id


def job_lock_key(job: str) -> int:
    return (_JOB_LOCK_HIGH << 32) | zlib.crc32(job.encode("utf-8"))


class PostgresCoordination:
    """This node's part in a knowledge base many nodes share."""

    def __init__(
        self, connections: Connections, settings: PostgresSettings, node_id: str, *, lease_s: float = DEFAULT_LEASE_S
    ) -> None:
        self._connections = connections
        self._settings = settings
        self.node_id = node_id
        self.lease_s = lease_s
        # Set by join(role="pipeline"): the catalog then guards stage writes with this node's lease.
        self.pipeline = False

    def pipeline_node(self) -> str | None:
        """This node's id while it runs a pipeline: the lease its stages write under."""
        return self.node_id if self.pipeline else None

    # ------------------------------------------------------------ membership

    def join(self, *, role: str, model_identity: str | None, lease_s: float) -> None:
        self.lease_s = lease_s
        with self._connections.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (JOIN_LOCK,))
            if role == "pipeline" and model_identity is not None:
                other = conn.execute(
                    "SELECT host, pid, model_identity FROM node WHERE id <> %s AND role = 'pipeline'"
                    f" AND stopped_at IS NULL AND heartbeat_at + lease_s > {NOW}"
                    # A node whose model is not resolved yet (a server still starting) says nothing.
                    " AND model_identity IS NOT NULL AND model_identity <> %s ORDER BY started_at LIMIT 1",
                    (self.node_id, model_identity),
                ).fetchone()
                if other is not None:
                    host, pid, theirs = other
                    raise PipelineHeldElsewhere(
                        f"the node on {str(host)[:64]} (pid {int(pid)}) indexes the PostgreSQL database "
                        f"{self._settings.server} with the embedding model {str(theirs)[:120]}, and this node's is "
                        f"{model_identity[:120]}; nodes of one knowledge base must embed alike (set the same "
                        "embedding model here, or stop every node before changing it); search and reads work "
                        "from here meanwhile"
                    )
            conn.execute(
                "INSERT INTO node(id, host, pid, role, model_identity, lease_s, started_at, heartbeat_at)"
                f" VALUES (%s, %s, %s, %s, %s, %s, {NOW}, {NOW}) ON CONFLICT (id) DO UPDATE SET"
                " host = EXCLUDED.host, pid = EXCLUDED.pid, role = EXCLUDED.role,"
                " model_identity = EXCLUDED.model_identity, lease_s = EXCLUDED.lease_s,"
                " started_at = EXCLUDED.started_at, heartbeat_at = EXCLUDED.heartbeat_at, stopped_at = NULL,"
                " in_flight = 0",
                (self.node_id, socket.gethostname()[:255], os.getpid(), role, model_identity, self.lease_s),
            )
        self.pipeline = role == "pipeline"

    def leave(self) -> None:
        was_pipeline, self.pipeline = self.pipeline, False
        with self._connections.connection() as conn, conn.transaction():
            if was_pipeline:
                _requeue(conn, "lease_node = %s", (self.node_id,), reason="node_stopped")
            conn.execute(
                f"UPDATE node SET stopped_at = {NOW}, in_flight = 0 WHERE id = %s", (self.node_id,)
            )

    # ------------------------------------------------------------ work

    def claim(self, limit: int) -> list[str]:
        if limit <= 0:
            return []
        with self._connections.connection() as conn, conn.transaction():
            rows = conn.execute(
                "WITH picked AS ("
                " SELECT id, status, lease_node FROM document"
                f" WHERE {_UNFINISHED} AND (lease_node IS NULL OR lease_until < {NOW})"
                " ORDER BY created_at, id LIMIT %s FOR UPDATE SKIP LOCKED)"
                " UPDATE document AS d SET lease_node = %s, lease_until = "
                f"{NOW} + %s FROM picked WHERE d.id = picked.id"
                " RETURNING d.id, picked.status, picked.lease_node, d.created_at",
                (limit, self.node_id, self.lease_s),
            ).fetchall()
            # Documents a node held without renewing (it died, or lost the network) start
            # again from Pending, and their history says they were taken over; so do
            # documents left mid-pipeline with no lease at all (a store a single node ran).
            taken_over = [
                document_id for document_id, status, holder, _ in rows
                if holder is not None or status != Status.PENDING.value
            ]
            if taken_over:
                _set_pending(conn, taken_over, reason="lease_expired", node_id=self.node_id)
                log.info("took over %d document(s) whose node stopped renewing its lease", len(taken_over))
        return [row[0] for row in sorted(rows, key=lambda row: (row[3], row[0]))]

    def release(self, document_ids: Sequence[str]) -> None:
        with self._connections.connection() as conn, conn.transaction():
            _requeue(
                conn, "lease_node = %s AND id = ANY(%s)", (self.node_id, list(document_ids)), reason="storage_error"
            )

    def heartbeat(self, held: Sequence[str], *, in_flight: int) -> set[str]:
        ids = list(dict.fromkeys(held))
        with self._connections.connection() as conn, conn.transaction():
            renewed = {
                row[0]
                for row in conn.execute(
                    f"UPDATE document SET lease_until = {NOW} + %s WHERE lease_node = %s AND id = ANY(%s)"
                    " RETURNING id",
                    (self.lease_s, self.node_id, ids),
                ).fetchall()
            }
            conn.execute(
                f"UPDATE node SET heartbeat_at = {NOW}, in_flight = %s, stopped_at = NULL WHERE id = %s",
                (in_flight, self.node_id),
            )
        lost = set(ids) - renewed
        if lost:
            log.warning("%d document lease(s) passed to another node; their work here is dropped", len(lost))
        return lost

    def waiting(self, cap: int) -> int:
        with self._connections.connection() as conn:
            row = conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM document WHERE status = %s"
                f" AND (lease_node IS NULL OR lease_until < {NOW}) LIMIT %s) AS waiting",
                (Status.PENDING.value, cap),
            ).fetchone()
        return int(row[0]) if row else 0

    def nodes(self) -> list[NodeRecord]:
        with self._connections.connection() as conn:
            rows = conn.execute(
                "SELECT n.id, n.host, n.pid, n.role, n.model_identity, n.started_at, n.heartbeat_at, n.stopped_at,"
                f" n.in_flight, (n.stopped_at IS NULL AND n.heartbeat_at + n.lease_s > {NOW}),"
                " coalesce((SELECT sum(d.chunk_count) FROM document AS d WHERE d.indexed_by = n.id"
                f" AND d.indexed_at > {NOW} - %s), 0) / %s"
                " FROM node AS n ORDER BY n.started_at DESC, n.id",
                (RATE_WINDOW_S, RATE_WINDOW_S),
            ).fetchall()
        return [
            NodeRecord(
                id=row[0], host=row[1], pid=int(row[2]), role=row[3], model_identity=row[4],
                started_at=float(row[5]), heartbeat_at=float(row[6]),
                stopped_at=None if row[7] is None else float(row[7]), in_flight=int(row[8]), alive=bool(row[9]),
                chunks_per_s=float(row[10]),
            )
            for row in rows
        ]

    @contextlib.contextmanager
    def single_runner(self, job: str) -> Iterator[bool]:
        key = job_lock_key(job)
        with self._connections.dedicated() as conn:
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            held = bool(row and row[0])
            try:
                yield held
            finally:
                if held:
                    conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    # ------------------------------------------------------------ events

    def announce(self, payload: str) -> None:
        if len(payload.encode("utf-8")) > MAX_PAYLOAD_BYTES:
            log.warning("an event was too large to send to other nodes; dropped")
            return
        with self._connections.connection() as conn:
            conn.execute("SELECT pg_notify(%s, %s)", (EVENT_CHANNEL, payload))

    def listen(self, on_payload: Callable[[str], None], stop: Callable[[], bool]) -> None:
        """LISTEN on a connection of its own, reconnecting after a lost server
        (events sent meanwhile are missed; the catalog has every status)."""
        while not stop():
            try:
                conn = connect(self._settings)
            except Exception as exc:  # noqa: BLE001 - a server that is down: try again shortly
                log.debug("event listener cannot connect (%s); retrying", type(exc).__name__)
                _wait(stop, 2.0)
                continue
            try:
                conn.execute(f"LISTEN {EVENT_CHANNEL}")
                while not stop():
                    for notice in conn.notifies(timeout=0.5):
                        on_payload(notice.payload)
            except psycopg.Error as exc:
                log.info("event listener lost its connection (%s); reconnecting", type(exc).__name__)
                _wait(stop, 1.0)
            finally:
                with contextlib.suppress(psycopg.Error):
                    conn.close()


def _wait(stop: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not stop() and time.monotonic() < deadline:
        time.sleep(0.1)


def _set_pending(conn: psycopg.Connection, document_ids: Sequence[str], *, reason: str, node_id: str | None) -> None:
    conn.execute(
        f"UPDATE document SET status = %s, progress = 0, updated_at = {NOW} WHERE id = ANY(%s)",
        (Status.PENDING.value, list(document_ids)),
    )
    conn.execute(
        f"INSERT INTO status_history(document_id, status, reason, at, node) SELECT id, %s, %s, {NOW}, %s"
        " FROM unnest(%s::text[]) AS id",
        (Status.PENDING.value, reason, node_id, list(document_ids)),
    )


def _requeue(conn: psycopg.Connection, condition: str, params: Sequence[object], *, reason: str) -> int:
    """Give back leases matching ``condition``: their documents Pending for any node."""
    rows = conn.execute(
        f"UPDATE document SET lease_node = NULL, lease_until = NULL WHERE {condition} RETURNING id, status",
        list(params),
    ).fetchall()
    stuck = [document_id for document_id, status in rows if status in NON_TERMINAL and status != Status.PENDING.value]
    if stuck:
        _set_pending(conn, stuck, reason=reason, node_id=None)
    return len(rows)


def reset_own_work(conn: psycopg.Connection, node_id: str) -> int:
    """At a pipeline's start: documents this node (its previous run) or no
    node holds, left mid-pipeline, go back to Pending; other nodes' leases stand."""
    with conn.transaction():
        rows = conn.execute(
            f"SELECT id FROM document WHERE {_UNFINISHED} AND status <> %s"
            " AND (lease_node IS NULL OR lease_node = %s) FOR UPDATE SKIP LOCKED",
            (Status.PENDING.value, node_id),
        ).fetchall()
        ids = [row[0] for row in rows]
        conn.execute(
            "UPDATE document SET lease_node = NULL, lease_until = NULL WHERE lease_node = %s", (node_id,)
        )
        if ids:
            _set_pending(conn, ids, reason="node_restarted", node_id=node_id)
    return len(ids)
