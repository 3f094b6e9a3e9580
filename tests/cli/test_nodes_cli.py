"""``kbtui nodes``: on SQLite the data directory's one node; on PostgreSQL every
node of the shared base (two data directories, the key copied), alive, then
stopped when one stops, lost when one dies without a word."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
from pathlib import Path

from tests.api.serving import kbtui, start_node, wait_for
from tests.conftest import write

# Short leases and ticks, so a node killed with -9 reads as lost within seconds.
TEAM_CONFIG = 'node_lease_s = 3\ndrain_sweep_interval_s = 0.2\nsource_watch = "off"\n'


def test_nodes_on_sqlite_is_this_data_directory(run_cli, home, tmp_path, monkeypatch):
    monkeypatch.delenv("KBTUI_DATABASE_URL", raising=False)
    write(tmp_path / "docs" / "a.md", "# A\n\nalpha")
    assert run_cli("add", str(tmp_path / "docs")).code == 0
    listed = run_cli("nodes", "--json")
    assert listed.code == 0, listed.err
    (record,) = json.loads(listed.out)
    assert record["state"] == "stopped" and record["alive"] is False and record["role"] == "pipeline"
    assert record["model_identity"] == "hash:feature-hash@v1:native:256"
    table = run_cli("nodes")
    assert table.code == 0
    header, row = table.out.splitlines()[:2]
    assert header.split()[:4] == ["ID", "HOST", "ROLE", "STATE"]
    assert row.split()[0] == record["id"][:8] and "stopped" in row.split()


def _second_node(home: Path, tmp_path: Path) -> Path:
    """A second machine's data directory: the key copied, the same database."""
    other = tmp_path / "other-node"
    other.mkdir(mode=0o700)
    shutil.copy2(home / "node.key", other / "node.key")
    os.chmod(other / "node.key", stat.S_IRUSR | stat.S_IWUSR)
    return other


def _nodes(home: Path) -> dict[str, dict]:
    listed = kbtui(home, "nodes", "--json")
    assert listed.returncode == 0, listed.stderr
    return {r["id"]: r for r in json.loads(listed.stdout)}


def test_nodes_on_postgresql_shows_every_node_alive_then_stopped_then_lost(home, postgres_url, tmp_path, monkeypatch):
    monkeypatch.setenv("KBTUI_DATABASE_URL", postgres_url)
    write(tmp_path / "docs" / "a.md", "# A\n\nalpha")
    assert kbtui(home, "add", str(tmp_path / "docs")).returncode == 0  # makes the key
    other = _second_node(home, tmp_path)
    first = start_node(home, config=TEAM_CONFIG)
    second = start_node(other, config=TEAM_CONFIG)
    try:
        ids = {(h / "node.id").read_text().strip(): node for h, node in ((home, first), (other, second))}
        nodes = _nodes(home)
        assert set(ids) <= set(nodes)
        for node_id, serving in ids.items():
            assert nodes[node_id]["state"] == "alive" and nodes[node_id]["pid"] == serving.process.pid
        # The table, from the other data directory (through its node's API): both, alive.
        table = kbtui(other, "nodes")
        assert table.returncode == 0, table.stderr
        rows = {line.split()[0]: line.split() for line in table.stdout.splitlines()[1:] if line.strip()}
        for node_id in ids:
            assert "alive" in rows[node_id[:8]]
        # One stops: it says so.
        second_id = (other / "node.id").read_text().strip()
        assert second.stop() == 0
        assert _nodes(home)[second_id]["state"] == "stopped"
        assert "stopped" in {line.split()[0]: line.split() for line in kbtui(home, "nodes").stdout.splitlines()[1:]
                             if line.strip()}[second_id[:8]]
        # It starts again (the same node: its data directory's id) and dies without a word: lost, once its lease is out.
        second = start_node(other, config=TEAM_CONFIG)
        wait_for(lambda: _nodes(home)[second_id]["state"] == "alive", timeout=30, what="the second node alive again")
        second.stop(signal.SIGKILL)
        wait_for(lambda: _nodes(home)[second_id]["state"] == "lost", timeout=30, interval=0.2,
                 what="the killed node to read as lost")
        assert _nodes(home)[(home / "node.id").read_text().strip()]["state"] == "alive"
    finally:
        second.stop()
        first.stop()
