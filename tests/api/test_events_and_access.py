"""The live event stream, slow and vanished clients, and who may connect."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from actors.events import DocumentStatusChanged
from kbtui.api.events import OVERFLOW, STOPPING
from kbtui.api.hub import END, EventHub
from tests.api.serving import kbtui, sse_events, start_node, wait_for
from tests.conftest import write


@pytest.fixture
def served(home):
    node = start_node(home)
    yield node
    node.stop()


def test_the_event_stream_follows_a_real_ingestion(served, tmp_path):
    path = write(tmp_path / "a.md", "# A\n\nthe okapi runbook")
    seen: list[tuple[str, dict]] = []
    with served.http.stream("GET", "/events", timeout=60) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        events = sse_events(stream.iter_lines())
        first = next(events)
        assert first[0] == "admission_changed" and first[1]["queue_capacity"] == 256  # the queue as it stands
        added = served.http.post("/documents", json={"paths": [str(path)]}).json()
        document_id = added["documents"][0]["document_id"]
        for name, data in events:
            seen.append((name, data))
            if name == "document_status_changed" and data["document_id"] == document_id and data["status"] == "Indexed":
                break
    statuses = [d["status"] for n, d in seen if n == "document_status_changed" and d["document_id"] == document_id]
    assert statuses == ["Extracting", "Chunking", "Embedding", "Indexed"]
    assert any(n == "admission_changed" and d["accepted"] == 1 for n, d in seen)
    # Ids, statuses, counts and reason codes only: never a name or text.
    assert "a.md" not in json.dumps(seen) and "okapi" not in json.dumps(seen)


def test_clients_that_vanish_or_stop_reading_never_hold_the_node_up(served, tmp_path):
    # Forty streams opened and dropped mid-stream, without a goodbye.
    for _ in range(40):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(served.socket))
        sock.sendall(b"GET /v1/events HTTP/1.1\r\nHost: kbtui\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 200")
        sock.close()
    # One that stays connected and never reads another byte.
    stalled = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.connect(str(served.socket))
    stalled.sendall(b"GET /v1/events HTTP/1.1\r\nHost: kbtui\r\n\r\n")
    try:
        paths = [str(write(tmp_path / "many" / f"d{i}.md", f"# D{i}\n\nbody {i}")) for i in range(40)]
        started = time.monotonic()
        ids = [d["document_id"] for d in served.http.post("/documents", json={"paths": paths}).json()["documents"]]

        def indexed():
            found = served.http.post("/documents/lookup", json={"document_ids": ids}).json()["documents"]
            return all(d["status"] == "Indexed" for d in found)

        wait_for(indexed, timeout=120, what="indexing with a stalled client connected")
        assert time.monotonic() - started < 120
        # The dropped streams were let go: the subscriber limit (32) still admits 32 new ones.
        clients = [httpx.Client(transport=httpx.HTTPTransport(uds=str(served.socket)), base_url="http://kbtui/v1")
                   for _ in range(31)]
        try:
            streams = [c.stream("GET", "/events", timeout=30) for c in clients]
            opened = [s.__enter__() for s in streams]
            assert {r.status_code for r in opened} == {200}
            for stream in streams:
                stream.__exit__(None, None, None)
        finally:
            for client in clients:
                client.close()
    finally:
        stalled.close()
    assert served.http.get("/status").status_code == 200


def test_a_client_that_falls_behind_gets_overflow_and_its_stream_ends():
    async def scenario() -> list[bytes]:
        hub = EventHub(buffer=4)
        subscription = hub.subscribe(asyncio.get_running_loop())
        for i in range(10):  # from the pipeline's thread, as the relay does
            await asyncio.to_thread(hub.publish, DocumentStatusChanged(f"d{i}", "DEFAULT", "Indexed", 1.0))
        await asyncio.sleep(0.05)
        frames = []
        while (data := await subscription.queue.get()) is not END:
            frames.append(data)
        # A closed hub ends the others with `stopping` and takes no one new.
        other = hub.subscribe(asyncio.get_running_loop())
        hub.close()
        await asyncio.sleep(0.05)
        frames.append(await other.queue.get())
        assert hub.subscribe(asyncio.get_running_loop()) is None
        return frames

    frames = asyncio.run(scenario())
    assert len(frames) == 2  # what it had queued was dropped: one overflow frame, then the end
    assert frames[0].startswith(f"event: {OVERFLOW}\n".encode())
    assert frames[1].startswith(f"event: {STOPPING}\n".encode())


def test_the_event_stream_ends_when_the_node_stops(served):
    with served.http.stream("GET", "/events", timeout=60) as stream:
        events = sse_events(stream.iter_lines())
        assert next(events)[0] == "admission_changed"
        served.process.send_signal(15)
        rest = [name for name, _ in events]
    assert rest[-1] == STOPPING


# ---------------------------------------------------------------- who may connect

OTHER_UID = 54321
_PROBE = """
import socket, sys
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    sock.connect(sys.argv[1])
except PermissionError:
    print("permission denied"); sys.exit()
try:  # the node may drop the connection before the request is even written
    sock.sendall(b"GET /v1/status HTTP/1.1\\r\\nHost: kbtui\\r\\n\\r\\n")
    answer = sock.recv(100)
except (BrokenPipeError, ConnectionResetError):
    answer = b""
print("answered" if answer else "refused")
"""


# The probe needs only the standard library, from an interpreter the other user may run.
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin:/usr/local/bin")


def _probe_as_other_user(path: Path) -> str:
    result = subprocess.run([SYSTEM_PYTHON, "-c", _PROBE, str(path)], user=OTHER_UID, group=OTHER_UID,
                            capture_output=True, text=True, timeout=60, env={"PATH": os.environ.get("PATH", "")})
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.mark.skipif(os.geteuid() != 0 or SYSTEM_PYTHON is None, reason="needs root and a system python3 to probe as a second uid")
def test_the_socket_refuses_other_users(monkeypatch):
    # Outside pytest's 0700 temp root, so that only kbtui's own modes stand in the way.
    base = Path(tempfile.mkdtemp(prefix="kbtui-uid-"))
    try:
        base.chmod(0o711)
        home = base / "kbhome"
        monkeypatch.setenv("KBTUI_HOME", str(home))
        node = start_node(home)
        try:
            # As kbtui leaves them, the modes alone keep the other user out...
            assert _probe_as_other_user(node.socket) == "permission denied"
            # ...and with the modes loosened by mistake, the peer-credential check still does.
            home.chmod(0o711)
            node.socket.chmod(0o666)
            assert _probe_as_other_user(node.socket) == "refused"
            assert f"refused a connection from another user (uid {OTHER_UID})" in node.log()
            assert node.http.get("/status").status_code == 200  # its owner is still served
        finally:
            node.stop()
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_tcp_listener_only_when_asked_loopback_only_and_with_the_token(home):
    port = _free_port()
    node = start_node(home, "--listen", f"127.0.0.1:{port}")
    token_file = home / "api.token"
    try:
        assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
        token = token_file.read_text().strip()
        url = f"http://127.0.0.1:{port}/v1/status"
        refused = httpx.get(url)
        assert refused.status_code == 401 and refused.json()["error"] == "unauthorized"
        assert httpx.get(url, headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert httpx.get(url, headers={"Authorization": f"Bearer {token}"}).json()["node_running"] is True
        assert node.http.get("/status").status_code == 200  # the socket needs no token
    finally:
        node.stop()
    assert not token_file.exists()
    for address in ("0.0.0.0:8765", "192.168.1.5:8765", "example.org:80", "127.0.0.1:http"):
        refused = kbtui(home, "serve", "--listen", address)
        assert refused.returncode == 2 and "loopback" in refused.stderr or "port" in refused.stderr
