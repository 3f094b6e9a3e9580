"""GET /v1/nodes and the node named in each document event, through a real
``kbtui serve`` (run on SQLite, and again on PostgreSQL by make test)."""

from __future__ import annotations

import socket

import pytest

from kbtui.config import Config
from kbtui.node import Node
from tests.api.serving import ServingNode, sse_events, start_node, wait_for
from tests.conftest import on_postgres, write


@pytest.fixture
def served(home):
    node = start_node(home)
    yield node
    node.stop()


def test_the_node_lists_itself_alive_and_names_itself_in_its_events(served: ServingNode, tmp_path):
    answer = served.http.get("/nodes")
    assert answer.status_code == 200
    nodes = answer.json()["nodes"]
    assert len(nodes) == 1
    me = nodes[0]
    assert me["alive"] is True and me["state"] == "alive" and me["stopped_at"] is None
    assert me["pid"] == served.process.pid and me["host"] == socket.gethostname() and me["role"] == "pipeline"
    assert me["model_identity"] == "hash:feature-hash@v1:native:256"
    assert len(me["id"]) == 32 and me["started_at"] <= me["heartbeat_at"] and me["in_flight"] == 0
    if on_postgres():
        assert me["id"] == (served.home / "node.id").read_text().strip()

    path = write(tmp_path / "a.md", "# A\n\nthe okapi runbook")
    with served.http.stream("GET", "/events", timeout=60) as stream:
        events = sse_events(stream.iter_lines())
        next(events)  # the queue as it stands
        document_id = served.http.post("/documents", json={"paths": [str(path)]}).json()["documents"][0]["document_id"]
        seen = []
        for name, data in events:
            if name == "document_status_changed" and data["document_id"] == document_id:
                seen.append(data)
                if data["status"] == "Indexed":
                    break
    assert seen and {d["node"] for d in seen} == {me["id"]}

    # What it indexed counts in its rate (chunks in the last minute, per second).
    rated = wait_for(lambda: served.http.get("/nodes").json()["nodes"][0]["chunks_per_s"] > 0, what="a rate")
    assert rated


def test_a_stopped_node_is_listed_as_stopped(home):
    first = start_node(home)
    node_id = first.http.get("/nodes").json()["nodes"][0]["id"]
    first.stop()
    local = Node.open(Config.load(home), read_only=True)
    try:
        (record,) = [r for r in local.nodes() if r.id == node_id]
    finally:
        local.close()
    assert not record.alive and record.stopped_at is not None and record.in_flight == 0
