"""Three ``kbtui serve`` processes on one real PostgreSQL, as three machines
would run them (their own data directories, the node key copied): documents
added through every node are each indexed exactly once, whichever node dies
(kill -9) or however the database restarts on the way."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.api.serving import ServingNode, kbtui_env, sse_events, start_node
from tests.postgres_server import TestServer

# Three node processes and 600 documents on a 2-core machine take minutes, not seconds.
pytestmark = pytest.mark.timeout(900)

LEASE_S = 3.0
SWEEP_S = 0.2
# A lease runs out LEASE_S after its last renewal; another node's next drain tick takes it over.
TAKEOVER_BOUND_S = LEASE_S + SWEEP_S
# What a busy 2-core CI machine adds to that bound: three nodes and the server share its cores.
SCHEDULING_SLACK_S = 6.0
DOCUMENTS_PER_NODE = 200
NODE_CONFIG = f"""
node_lease_s = {LEASE_S}
drain_sweep_interval_s = {SWEEP_S}
max_in_flight = 4
storage_retry_s = 2
source_watch = "off"

[extraction]
worker_processes = 1
"""


@dataclass
class Team:
    url: str
    homes: list[Path]
    nodes: list[ServingNode] = field(default_factory=list)

    def node_id(self, index: int) -> str:
        return (self.homes[index] / "node.id").read_text().strip()

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        with psycopg.connect(self.url, autocommit=True) as conn:
            return conn.execute(sql, params).fetchall()


@pytest.fixture
def team(tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Team]:
    monkeypatch.setenv("KBTUI_DATABASE_URL", postgres_url)
    first = tmp_path / "node-1"
    first.mkdir(mode=0o700)
    (first / "config.toml").write_text(NODE_CONFIG)
    # The first node makes the key (with the base's first document); the operator copies it to the others.
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "seed.md").write_text("# Seed\n\nthe first document of the base\n")
    added = subprocess.run(
        [*_kbtui(), "add", str(seed)], env=kbtui_env(first), capture_output=True, text=True, timeout=120
    )
    assert added.returncode == 0, added.stderr
    homes = [first]
    for number in (2, 3):
        home = tmp_path / f"node-{number}"
        home.mkdir(mode=0o700)
        (home / "config.toml").write_text(NODE_CONFIG)
        shutil.copy2(first / "node.key", home / "node.key")
        os.chmod(home / "node.key", stat.S_IRUSR | stat.S_IWUSR)
        homes.append(home)
    team = Team(postgres_url, homes)
    try:
        team.nodes = [start_node(home) for home in homes]
        yield team
    finally:
        for node in team.nodes:
            if node.process.poll() is None:
                node.stop()


def _kbtui() -> list[str]:
    return [sys.executable, "-m", "kbtui"]


def _write_documents(folder: Path, node: int) -> None:
    folder.mkdir(parents=True)
    for i in range(DOCUMENTS_PER_NODE):
        (folder / f"doc{i:03d}.md").write_text(
            f"# Runbook {node}-{i}\n\nRotate key {node}x{i} every quarter.\n\n## Restore\n\nRestore step {i} of {node}.\n"
        )


class EventWatcher:
    """One subscriber: the event stream of one node, read in a thread."""

    def __init__(self, node: ServingNode) -> None:
        self.nodes_seen: set[str] = set()
        self.indexed = 0
        self._stop = threading.Event()
        self._client = httpx.Client(transport=httpx.HTTPTransport(uds=str(node.socket)), base_url="http://kbtui/v1")
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        with self._client.stream("GET", "/events", timeout=None) as stream:
            for name, data in sse_events(stream.iter_lines()):
                if self._stop.is_set():
                    return
                if name == "document_status_changed":
                    self.nodes_seen.add(str(data.get("node") or ""))
                    self.indexed += data["status"] == "Indexed"

    def close(self) -> None:
        self._stop.set()
        self._client.close()


def _add_through_every_node(team: Team, tmp_path: Path) -> list[subprocess.Popen]:
    adds = []
    for number, home in enumerate(team.homes, start=1):
        folder = tmp_path / f"docs-{number}"
        _write_documents(folder, number)
        adds.append(subprocess.Popen(
            [*_kbtui(), "add", str(folder), "--no-wait"], env=kbtui_env(home), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        ))
    return adds


def _wait(condition, *, timeout: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _indexed(team: Team) -> int:
    return int(team.query("SELECT count(*) FROM document WHERE status = 'Indexed'")[0][0])


def _assert_each_indexed_once(team: Team, expected: int) -> None:
    statuses = dict(team.query("SELECT status, count(*) FROM document GROUP BY status"))
    assert statuses == {"Indexed": expected}
    # One Indexed transition per document: no document was committed twice.
    twice = team.query(
        "SELECT document_id FROM status_history WHERE status = 'Indexed' GROUP BY document_id HAVING count(*) > 1"
    )
    assert twice == []
    # No chunk twice, none missing: every document holds exactly the chunks it says it has.
    duplicated = team.query(
        "SELECT document_id, ordinal FROM chunk GROUP BY document_id, ordinal HAVING count(*) > 1"
    )
    assert duplicated == []
    short = team.query(
        "SELECT d.id FROM document AS d LEFT JOIN chunk AS c ON c.document_id = d.id"
        " GROUP BY d.id, d.chunk_count HAVING count(c.id) <> d.chunk_count OR d.chunk_count = 0"
    )
    assert short == []
    vectors = team.query(
        "SELECT count(*) FROM chunk AS c LEFT JOIN chunk_vector AS v ON v.chunk_id = c.id WHERE v.chunk_id IS NULL"
    )
    assert vectors == [(0,)]


def test_three_nodes_index_every_document_once_when_one_is_killed_mid_way(team: Team, tmp_path: Path) -> None:
    watcher = EventWatcher(team.nodes[0])
    try:
        adds = _add_through_every_node(team, tmp_path)
        for add in adds:
            _, err = add.communicate(timeout=300)
            assert add.returncode == 0, err
        victim = team.nodes[1]
        victim_id = team.node_id(1)
        # Mid-way, while the victim holds documents.
        _wait(lambda: _indexed(team) >= 120, timeout=300, what="a fifth of the documents indexed")
        _wait(
            lambda: team.query("SELECT count(*) FROM document WHERE lease_node = %s", (victim_id,))[0][0] > 0,
            timeout=60, what="the victim to hold a lease",
        )
        victim.process.send_signal(signal.SIGKILL)
        victim.process.wait(timeout=30)
        killed_at = float(team.query("SELECT extract(epoch FROM clock_timestamp())")[0][0])
        held = [row[0] for row in team.query("SELECT id FROM document WHERE lease_node = %s", (victim_id,))]

        total = 3 * DOCUMENTS_PER_NODE + 1  # and the seed
        _wait(lambda: _indexed(team) == total, timeout=600, what="every document indexed")
        _assert_each_indexed_once(team, total)

        # The killed node's documents were taken over by the others, within the lease's bound.
        if held:
            takeovers = team.query(
                "SELECT document_id, min(at) FROM status_history WHERE reason = 'lease_expired'"
                " AND document_id = ANY(%s) GROUP BY document_id",
                (held,),
            )
            assert {row[0] for row in takeovers} == set(held)
            latest = max(float(row[1]) for row in takeovers)
            assert latest - killed_at <= TAKEOVER_BOUND_S + SCHEDULING_SLACK_S
            finishers = team.query(
                "SELECT DISTINCT indexed_by FROM document WHERE id = ANY(%s)", (held,)
            )
            assert victim_id not in {row[0] for row in finishers}
        # Every node did part of the work, and one subscriber saw all of it, each event naming its node.
        workers = {row[0] for row in team.query("SELECT DISTINCT indexed_by FROM document WHERE indexed_by IS NOT NULL")}
        ids = {team.node_id(i) for i in range(3)}
        assert workers == ids
        _wait(lambda: ids <= watcher.nodes_seen, timeout=30, what="events from all three nodes")
        # The registry says the victim is lost (no heartbeat, never said it stopped), the others alive.
        nodes = json.loads(
            subprocess.run(
                [*_kbtui(), "nodes", "--json"], env=kbtui_env(team.homes[0]), capture_output=True, text=True,
                timeout=60,
            ).stdout
        )
        state = {n["id"]: n["state"] for n in nodes}
        assert state == {team.node_id(0): "alive", victim_id: "lost", team.node_id(2): "alive"}
    finally:
        watcher.close()


def test_three_nodes_carry_on_when_the_database_restarts_mid_way(
    team: Team, tmp_path: Path, postgres_server: TestServer
) -> None:
    adds = _add_through_every_node(team, tmp_path)
    for add in adds:
        _, err = add.communicate(timeout=300)
        assert add.returncode == 0, err
    total = 3 * DOCUMENTS_PER_NODE + 1
    _wait(lambda: _indexed(team) >= 120, timeout=300, what="a fifth of the documents indexed")
    try:
        postgres_server.pause()  # every node meets it mid-write
        # Down longer than a lease: every lease runs out while the nodes cannot renew.
        deadline = time.monotonic() + LEASE_S + 1
        while time.monotonic() < deadline:
            assert all(node.process.poll() is None for node in team.nodes), "a node exited while the server was down"
            time.sleep(0.2)
    finally:
        postgres_server.resume()
    _wait(lambda: _indexed(team) == total, timeout=600, what="every document indexed after the restart")
    _assert_each_indexed_once(team, total)
    assert all(node.process.poll() is None for node in team.nodes)
