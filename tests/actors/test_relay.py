"""Events between nodes (actors/relay.py) on a real PostgreSQL: two nodes'
coordinations on one database (two data directories, the key copied), a
status change announced by one reaching a listener actor of the other with
the sender's node id; malformed payloads ignored; a node's own
announcements never coming back to it as another node's work."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pykka
import pytest

from actors.events import DocumentStatusChanged
from actors.listener import publish
from actors.relay import NodeEventRelay, decode, encode
from kbtui.config import Config
from kbtui.node import Node
from tests.actors.conftest import Recorder

DEADLINE_S = 30.0


def wait_until(condition: Callable[[], object], what: str, timeout: float = DEADLINE_S) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@dataclass
class TwoNodes:
    a: Node
    b: Node


@pytest.fixture
def two_nodes(tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TwoNodes]:
    monkeypatch.setenv("KBTUI_DATABASE_URL", postgres_url)
    monkeypatch.setenv("KBTUI_EMBEDDING_PROVIDER", "hash")
    home_a, home_b = tmp_path / "node-a", tmp_path / "node-b"
    a = Node.open(Config.load(home_a))
    home_b.mkdir(mode=0o700)
    shutil.copy2(home_a / "node.key", home_b / "node.key")  # the operator copies the key
    os.chmod(home_b / "node.key", 0o600)
    b = Node.open(Config.load(home_b))
    try:
        assert a.store.coordination is not None and b.store.coordination is not None
        assert a.store.coordination.node_id != b.store.coordination.node_id
        yield TwoNodes(a, b)
    finally:
        pykka.ActorRegistry.stop_all()
        b.close()
        a.close()


class RawListener:
    """Node A's side, heard as raw payloads (its own coordination's listen, in a thread)."""

    def __init__(self, node: Node) -> None:
        self.payloads: list[str] = []
        self._stop = threading.Event()
        coordination = node.store.coordination
        assert coordination is not None
        self.thread = threading.Thread(target=coordination.listen, args=(self.payloads.append, self._stop.is_set),
                                       daemon=True)
        self.thread.start()

    def heard(self, document_id: str) -> list[dict]:
        found = []
        for payload in list(self.payloads):
            try:
                data = json.loads(payload)
            except ValueError:
                continue  # the malformed ones this test sends reach A's own ears too
            if isinstance(data, dict) and data.get("document_id") == document_id:
                found.append(data)
        return found

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(timeout=5)


def status_events(recorder: pykka.ActorRef, document_id: str) -> list[DocumentStatusChanged]:
    return [e for e in recorder.ask("events") if isinstance(e, DocumentStatusChanged) and e.document_id == document_id]


def event(document_id: str, status: str = "Embedding", progress: float = 0.5) -> DocumentStatusChanged:
    return DocumentStatusChanged(document_id, "DEFAULT", status, progress, None)


def test_a_status_change_reaches_the_other_node_with_the_senders_id_and_nothing_echoes(two_nodes: TwoNodes):
    coordination_a, coordination_b = two_nodes.a.store.coordination, two_nodes.b.store.coordination
    assert coordination_a is not None and coordination_b is not None
    id_a, id_b = coordination_a.node_id, coordination_b.node_id
    recorder = Recorder.start()
    NodeEventRelay.start(coordination_b)  # node B's relay, as its runtime starts it
    heard_at_a = RawListener(two_nodes.a)
    try:
        # LISTEN takes effect asynchronously: announce from A until B's listener actor hears it.
        def b_hears_a() -> bool:
            coordination_a.announce(encode(event("warm-a"), id_a))
            return bool(status_events(recorder, "warm-a"))

        wait_until(b_hears_a, "node B to hear node A")
        warm = status_events(recorder, "warm-a")[0]
        assert warm.node == id_a  # the sender's id, on a listener actor of the other node

        # Malformed payloads (and one of an unknown status) change nothing; a good one after them arrives.
        for bad in (
            "not json", "[]", "{}", '{"v":1}', json.dumps({**json.loads(encode(event("bad-1"), id_a)), "text": "x"}),
            encode(event("bad-2", status="Exploded"), id_a), encode(event("bad-3", progress=2.0), id_a),
            encode(event("bad-4"), id_a).replace('"progress":0.5', '"progress":NaN'),
            encode(event("x" * 500), id_a), encode(event("bad-5"), ""),
        ):
            coordination_a.announce(bad)
        real = DocumentStatusChanged("doc-1", "OPS", "Indexed", 1.0, None)
        coordination_a.announce(encode(real, id_a))
        wait_until(lambda: status_events(recorder, "doc-1"), "node A's event at node B")
        assert status_events(recorder, "doc-1") == [
            DocumentStatusChanged("doc-1", "OPS", "Indexed", 1.0, None, node=id_a)
        ]
        # Notifications arrive in the order they were sent: every malformed one was read, none got through.
        seen = {e.document_id for e in recorder.ask("events") if isinstance(e, DocumentStatusChanged)}
        assert seen == {"warm-a", "doc-1"}

        # Node B's own work goes out with B's id (A hears it) ...
        def a_hears_b() -> bool:
            publish(DocumentStatusChanged("warm-b", "DEFAULT", "Chunking", 0.3))
            return bool(heard_at_a.heard("warm-b"))

        wait_until(a_hears_b, "node A to hear node B")
        publish(DocumentStatusChanged("doc-2", "DEFAULT", "Failed", 0.0, "extract_corrupt"))
        wait_until(lambda: heard_at_a.heard("doc-2"), "node B's event at node A")
        payload = heard_at_a.heard("doc-2")[0]
        assert payload == {"v": 1, "node": id_b, "document_id": "doc-2", "collection": "DEFAULT",
                           "status": "Failed", "progress": 0.0, "reason": "extract_corrupt"}
        assert set(payload) == {"v", "node", "document_id", "collection", "status", "progress", "reason"}
        # ... and is not echoed back to B: once a later announcement of A's reached B, B had
        # read its own doc-2 coming back, and skipped it (B's listeners saw doc-2 once, as local).
        coordination_a.announce(encode(event("marker"), id_a))
        wait_until(lambda: status_events(recorder, "marker"), "the marker at node B")
        assert status_events(recorder, "doc-2") == [
            DocumentStatusChanged("doc-2", "DEFAULT", "Failed", 0.0, "extract_corrupt")
        ]
        # A relayed event is not announced again by the node it was relayed to.
        assert not [p for p in heard_at_a.heard("doc-1") if p["node"] == id_b]
    finally:
        heard_at_a.stop()


def test_stopping_the_relay_ends_its_threads_promptly(two_nodes: TwoNodes):
    coordination = two_nodes.b.store.coordination
    assert coordination is not None
    relay = NodeEventRelay.start(coordination)
    wait_until(lambda: {"kbtui-events-in", "kbtui-events-out"} <= {t.name for t in threading.enumerate()},
               "the relay's threads")
    started = time.monotonic()
    relay.stop(timeout=10)
    assert time.monotonic() - started < 3.0
    assert not {"kbtui-events-in", "kbtui-events-out"} & {t.name for t in threading.enumerate() if t.is_alive()}


def test_the_runtime_relays_on_a_shared_store_only(two_nodes: TwoNodes, node: Node):
    def relays() -> list[pykka.ActorRef]:
        return pykka.ActorRegistry.get_by_class(NodeEventRelay)

    with two_nodes.a.pipeline():
        assert len(relays()) == 1
    wait_until(lambda: not relays(), "the relay to stop with the runtime")
    if node.store.coordination is None:  # SQLite (the suite's default store): one node, nothing to relay
        with node.pipeline():
            assert not relays()


def test_decode_accepts_exactly_what_encode_makes():
    sent = DocumentStatusChanged("d1", "OPS", "Embedding", 0.25, "lease_expired")
    assert decode(encode(sent, "n" * 32)) == DocumentStatusChanged("d1", "OPS", "Embedding", 0.25, "lease_expired",
                                                                   node="n" * 32)
    for bad in ('{"v":2}', "", "null", "1", '"text"', encode(sent, "n").replace('"reason":"lease_expired"', '"reason":7'),
                encode(sent, "n").replace('"progress":0.25', '"progress":true')):
        assert decode(bad) is None
