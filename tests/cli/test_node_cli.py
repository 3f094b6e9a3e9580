"""A node serving in one process, the CLI as its client in another."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import write


def kbtui(home, *args, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "KBTUI_HOME": str(home), "KBTUI_EMBEDDING_PROVIDER": "hash"}
    return subprocess.run([sys.executable, "-m", "kbtui", *args], env=env, capture_output=True, text=True, timeout=120, **kwargs)


@pytest.fixture
def serving_node(home):
    env = {**os.environ, "KBTUI_HOME": str(home), "KBTUI_EMBEDDING_PROVIDER": "hash"}
    process = subprocess.Popen(
        [sys.executable, "-m", "kbtui", "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while not (home / "node-status.json").exists():
        assert process.poll() is None, process.stderr.read()
        assert time.monotonic() < deadline, "node did not start"
        time.sleep(0.1)
    yield process
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


def test_add_without_waiting_leaves_pending_rows_and_status_says_so(home, tmp_path):
    write(tmp_path / "a.md", "# A\n\nalpha")
    added = kbtui(home, "add", "--no-wait", str(tmp_path / "a.md"))
    assert added.returncode == 0 and "queued" in added.stdout
    status = json.loads(kbtui(home, "status", "--json").stdout)
    assert status == {"node_running": False, "queue": None, "documents": {"Pending": 1}, "interrupted": {}}


def test_a_client_add_is_indexed_by_the_running_node(home, tmp_path, serving_node):
    write(tmp_path / "docs" / "a.md", "# Alpha\n\nthe pangolin runbook")
    write(tmp_path / "docs" / "b.md", "# Beta\n\nsomething else")
    added = kbtui(home, "add", str(tmp_path / "docs"), "--json")
    assert added.returncode == 0, added.stderr
    assert {d["status"] for d in json.loads(added.stdout)} == {"Indexed"}

    hits = json.loads(kbtui(home, "search", "pangolin", "--json").stdout)["hits"]
    assert hits and "pangolin" in hits[0]["text"]

    # The node writes its counters at most every 0.25 s and on each tick, so the
    # last document's release can lag the Indexed row a little on a busy machine.
    deadline = time.monotonic() + 30
    while True:
        status = json.loads(kbtui(home, "status", "--json").stdout)
        if status["queue"] and status["queue"]["in_flight"] == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    assert status["node_running"] is True
    assert status["documents"] == {"Indexed": 2}
    assert status["queue"]["pid"] == serving_node.pid
    assert status["queue"]["accepted"] == 2 and status["queue"]["in_flight"] == 0


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP], ids=["sigterm", "sighup"])
def test_serve_stops_cleanly_on_sigterm_and_sighup(home, serving_node, stop):
    """SIGHUP is what an SSH disconnect sends: a drain, like SIGTERM, not a kill."""
    serving_node.send_signal(stop)
    assert serving_node.wait(timeout=60) == 0
    assert "pipeline stopped" in serving_node.stderr.read()
    assert json.loads(kbtui(home, "status", "--json").stdout)["node_running"] is False


def test_a_second_node_refuses_to_start(home, serving_node):
    second = kbtui(home, "serve")
    assert second.returncode == 2
    assert "already running" in second.stderr
