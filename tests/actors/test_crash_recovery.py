"""kill -9 a real node at every pipeline step: nothing is lost or half visible."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from actors.faults import PAUSE_POINTS

DOCUMENTS = 3


def kbtui(home: Path, *args: str, extra_env: dict[str, str] | None = None, **popen) -> subprocess.Popen:
    env = {**os.environ, "KBTUI_HOME": str(home), "KBTUI_EMBEDDING_PROVIDER": "hash", **(extra_env or {})}
    return subprocess.Popen([sys.executable, "-m", "kbtui", *args], env=env, **popen)


def query(home: Path, sql: str, params: tuple = ()) -> list[tuple]:
    with sqlite3.connect(home / "kb.sqlite3", timeout=30) as conn:
        return conn.execute(sql, params).fetchall()


def wait_for(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


def assert_consistent(home: Path) -> None:
    """Integrity holds and every document is either fully indexed or not at all."""
    assert query(home, "PRAGMA integrity_check") == [("ok",)]
    query(home, "INSERT INTO chunk_fts(chunk_fts, rank) VALUES ('integrity-check', 1)")
    for doc_id, status, chunk_count in query(home, "SELECT id, status, chunk_count FROM document"):
        chunks = query(home, "SELECT count(*) FROM chunk WHERE document_id = ?", (doc_id,))[0][0]
        vectors = query(
            home, "SELECT count(*) FROM vector JOIN chunk ON chunk.id = vector.chunk_id WHERE document_id = ?", (doc_id,)
        )[0][0]
        fts = query(home, "SELECT count(*) FROM chunk_fts WHERE document_id = ?", (doc_id,))[0][0]
        if status == "Indexed":
            assert chunks == vectors == fts == chunk_count > 0
        else:
            assert chunks == vectors == fts == 0, f"half-visible document in status {status}"


@pytest.mark.parametrize("point", PAUSE_POINTS)
def test_kill_9_at_each_step_then_restart(point, home, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(DOCUMENTS):
        (docs / f"note{i}.md").write_text(f"# Note {i}\n\nbody of note {i} about recovery{i}\n")
    added = kbtui(home, "add", "--no-wait", str(docs), stdout=subprocess.DEVNULL)
    assert added.wait(timeout=60) == 0
    assert query(home, "SELECT DISTINCT status FROM document") == [("Pending",)]

    marker = tmp_path / "paused-at"
    node = kbtui(
        home, "serve",
        extra_env={"KBTUI_FAULT_PAUSE_AT": point, "KBTUI_FAULT_MARKER": str(marker)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(marker.exists)
        node.send_signal(signal.SIGKILL)
        node.wait(timeout=30)
    finally:
        if node.poll() is None:
            node.kill()
    assert_consistent(home)

    restarted = kbtui(home, "serve", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: query(home, "SELECT DISTINCT status FROM document") == [("Indexed",)])
        restarted.send_signal(signal.SIGTERM)
        assert restarted.wait(timeout=60) == 0
    finally:
        if restarted.poll() is None:
            restarted.kill()

    assert_consistent(home)
    indexed_once = query(
        home, "SELECT document_id, count(*) FROM status_history WHERE status = 'Indexed' GROUP BY document_id"
    )
    assert len(indexed_once) == DOCUMENTS and all(n == 1 for _, n in indexed_once)
    assert query(home, "SELECT count(DISTINCT chunk_uid) = count(*) FROM chunk") == [(1,)]
