"""Two processes adding at once, with no node running beforehand."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys


def test_two_processes_adding_at_once_lose_nothing_and_duplicate_nothing(home, tmp_path):
    shared, own_a, own_b = tmp_path / "shared", tmp_path / "a", tmp_path / "b"
    for folder in (shared, own_a, own_b):
        folder.mkdir()
    for i in range(15):
        (shared / f"s{i}.md").write_text(f"# Shared {i}\n\nshared body {i}\n")
        (own_a / f"a{i}.md").write_text(f"# A {i}\n\nonly in a {i}\n")
        (own_b / f"b{i}.md").write_text(f"# B {i}\n\nonly in b {i}\n")
    env = {**os.environ, "KBTUI_HOME": str(home), "KBTUI_EMBEDDING_PROVIDER": "hash"}
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "kbtui", "add", str(shared), str(own), "--json"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for own in (own_a, own_b)
    ]
    outputs = [p.communicate(timeout=180) for p in processes]
    for process, (out, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err
        assert {d["status"] for d in json.loads(out)} == {"Indexed"}

    with sqlite3.connect(home / "kb.sqlite3") as conn:
        assert conn.execute("SELECT count(*), count(DISTINCT content_hash) FROM document").fetchone() == (45, 45)
        assert conn.execute("SELECT DISTINCT status FROM document").fetchall() == [("Indexed",)]
        indexed_twice = conn.execute(
            "SELECT count(*) FROM (SELECT document_id FROM status_history WHERE status = 'Indexed' "
            "GROUP BY document_id HAVING count(*) > 1)"
        ).fetchone()[0]
        assert indexed_twice == 0
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert len(list((home / "blobs").iterdir())) == 45
