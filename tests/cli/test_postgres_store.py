"""Choosing the PostgreSQL store, as an operator does: KBTUI_DATABASE_URL (or
database_url in config.toml), the commands working on it, and every failure
one line naming the server, never its password, with the storage exit code."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from kbtui.config import Config
from tests.conftest import write
from tests.postgres_server import TestServer

PASSWORD = "Sup3r-secret-pw"


@pytest.fixture
def database_url(home: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The test's database, named with a password (the test server accepts any)."""
    url = postgres_url.replace("postgres:@", f"postgres:{PASSWORD}@")
    monkeypatch.setenv("KBTUI_DATABASE_URL", url)
    return url


def test_the_environment_wins_over_the_settings_file_and_the_url_never_shows(home, monkeypatch):
    write(home / "config.toml", 'database_url = "postgresql://kb:from-file@db.example/kb"')
    monkeypatch.delenv("KBTUI_DATABASE_URL", raising=False)
    assert Config.load(home).database_url == "postgresql://kb:from-file@db.example/kb"
    monkeypatch.setenv("KBTUI_DATABASE_URL", "postgresql://kb:from-env@db.example/kb")
    config = Config.load(home)
    assert config.database_url == "postgresql://kb:from-env@db.example/kb"
    assert "from-env" not in repr(config)


def test_a_url_that_is_not_postgresql_is_refused_without_showing_it(run_cli, home, monkeypatch):
    monkeypatch.setenv("KBTUI_DATABASE_URL", f"mysql://kb:{PASSWORD}@db/kb")
    result = run_cli("ls")
    assert result.code == 2
    assert result.err.strip().count("\n") == 0 and "postgresql://" in result.err and PASSWORD not in result.err


def test_add_search_status_and_doctor_work_on_postgresql(run_cli, home, database_url):
    write(home.parent / "docs" / "tls.md", "# TLS\n\nRotate the certificates every ninety days.\n")
    added = run_cli("add", str(home.parent / "docs"), "--json")
    assert added.code == 0, added.err
    hits = json.loads(run_cli("search", "rotate certificates", "--json").out)
    assert hits["hits"] and "ninety days" in json.dumps(hits["hits"][0])
    status = json.loads(run_cli("status", "--json").out)
    assert status["documents"] == {"Indexed": 1} and status["node_running"] is False
    doctor = run_cli("doctor", "--json")
    assert doctor.code == 0, doctor.out
    found = {f["area"]: f for f in json.loads(doctor.out)["findings"]}
    assert {"server", "schema", "node key", "contents", "sources", "lexical index"} <= set(found)
    assert all(f["severity"] == "ok" for f in found.values())
    assert "Indexed 1" in found["contents"]["message"]
    # Nothing of it lives in the data directory: only the key, its fingerprint and the logs.
    assert not (home / "kb.sqlite3").exists() and not (home / "blobs").exists()
    assert stat.S_IMODE((home / "node.key").stat().st_mode) == 0o600 and (home / "node.fingerprint").exists()
    for path in home.rglob("*"):
        if path.is_file():
            assert PASSWORD not in path.read_text(errors="replace"), path.name


def test_a_node_with_another_key_is_refused_with_how_to_copy_it(run_cli, home, database_url, tmp_path, monkeypatch):
    write(tmp_path / "a.md", "# A\n\nalpha")
    assert run_cli("add", str(tmp_path / "a.md")).code == 0
    other = tmp_path / "other-node"
    monkeypatch.setenv("KBTUI_HOME", str(other))
    for command in (("ls",), ("add", str(tmp_path / "a.md"))):
        result = run_cli(*command)
        assert result.code == 3
        line = result.err.strip()
        assert "\n" not in line and "copy node.key" in line and PASSWORD not in line
    # The key copied by the operator: the node works.
    shutil.copy2(home / "node.key", other / "node.key")
    os.chmod(other / "node.key", 0o600)
    assert run_cli("ls").code == 0


def test_an_unreachable_server_is_one_line_with_the_storage_exit_code(run_cli, home, monkeypatch, tmp_path):
    monkeypatch.setenv("KBTUI_DATABASE_URL", f"postgresql://kb:{PASSWORD}@/kb?host={tmp_path}/no-server-here")
    for command in (("search", "anything"), ("add", str(write(tmp_path / "a.md", "# A\n\nalpha"))), ("status",)):
        result = run_cli(*command)
        assert result.code == 3, command
        line = result.err.strip()
        assert "\n" not in line and "PostgreSQL server" in line and "no-server-here" in line
        assert PASSWORD not in line and PASSWORD not in result.out
    doctor = run_cli("doctor")
    assert doctor.code == 3 and "PROBLEM" in doctor.out and PASSWORD not in doctor.out


def test_doctor_names_a_key_that_does_not_match(run_cli, home, database_url, tmp_path):
    write(tmp_path / "a.md", "# A\n\nalpha")
    assert run_cli("add", str(tmp_path / "a.md")).code == 0
    (home / "node.key").write_bytes(b"\x01" * 32)
    result = run_cli("doctor", "--json")
    assert result.code == 3
    problems = [f for f in json.loads(result.out)["findings"] if f["severity"] == "problem"]
    assert [f["area"] for f in problems] == ["node key"] and "copy node.key" in problems[0]["action"]


def test_a_database_from_a_newer_kbtui_is_refused(run_cli, home, database_url, postgres_server: TestServer, tmp_path):
    import psycopg

    write(tmp_path / "a.md", "# A\n\nalpha")
    assert run_cli("add", str(tmp_path / "a.md")).code == 0
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_version(version, name, applied_at) VALUES (999, 'future', 0)")
    result = run_cli("ls")
    assert result.code == 3 and "newer than this kbtui" in result.err and "\n" not in result.err.strip()


def _second_node(home: Path, tmp_path: Path) -> Path:
    """A second machine's data directory: the key copied, the same database."""
    other = tmp_path / "other-node"
    other.mkdir(mode=0o700)
    shutil.copy2(home / "node.key", other / "node.key")
    os.chmod(other / "node.key", stat.S_IRUSR | stat.S_IWUSR)
    return other


def test_a_second_node_with_the_key_copied_serves_beside_the_first_and_both_index(home, database_url, tmp_path):
    from tests.api.serving import kbtui, start_node

    write(tmp_path / "docs" / "tls.md", "# TLS\n\nRotate the certificates every ninety days.\n")
    assert kbtui(home, "add", str(tmp_path / "docs")).returncode == 0
    other = _second_node(home, tmp_path)
    first, second = start_node(home), start_node(other)
    try:
        # Each add goes to its own node; both are pipeline nodes of one base.
        write(tmp_path / "more" / "dns.md", "# DNS\n\nThe resolver caches answers for an hour.\n")
        write(tmp_path / "most" / "ntp.md", "# NTP\n\nChrony keeps the clocks in step.\n")
        added = kbtui(other, "add", str(tmp_path / "more"))
        assert added.returncode == 0 and "1 indexed" in added.stdout, added.stderr
        added = kbtui(home, "add", str(tmp_path / "most"))
        assert added.returncode == 0 and "1 indexed" in added.stdout, added.stderr
        # What one node indexed, the other finds.
        found = json.loads(kbtui(home, "search", "resolver caches", "--json").stdout)
        assert found["hits"] and "an hour" in json.dumps(found["hits"][0])
    finally:
        second.stop()
        first.stop()
    assert json.loads(kbtui(other, "status", "--json").stdout)["documents"] == {"Indexed": 3}


def test_a_node_that_embeds_with_another_model_is_refused_with_one_line(home, database_url, tmp_path):
    from tests.api.serving import kbtui, start_node
    from tests.faults.processes import one_line

    write(tmp_path / "docs" / "tls.md", "# TLS\n\nRotate the certificates every ninety days.\n")
    assert kbtui(home, "add", str(tmp_path / "docs")).returncode == 0
    other = _second_node(home, tmp_path)
    first = start_node(home)
    try:
        # Its vectors would not compare with the base's: it may not index beside the first node.
        refused = kbtui(other, "serve", KBTUI_EMBEDDING_PROVIDER="local")
        assert refused.returncode == 3
        line = one_line(refused.stderr)
        assert "must embed alike" in line and f"pid {first.process.pid}" in line and PASSWORD not in line
    finally:
        first.stop()
    # With no node of the old model alive, the base may change models.
    write(tmp_path / "more" / "dns.md", "# DNS\n\nThe resolver caches answers for an hour.\n")
    added = kbtui(other, "add", str(tmp_path / "more"), KBTUI_EMBEDDING_PROVIDER="local")
    assert added.returncode == 0 and "1 indexed" in added.stdout, added.stderr


def test_a_folder_is_synced_only_by_the_node_it_was_added_on(home, database_url, tmp_path):
    from tests.api.serving import kbtui
    from tests.faults.processes import one_line

    write(tmp_path / "docs" / "tls.md", "# TLS\n\nRotate the certificates every ninety days.\n")
    assert kbtui(home, "add", str(tmp_path / "docs")).returncode == 0
    other = _second_node(home, tmp_path)
    # The path names a folder on the first node's machine: here it may be another folder, or none.
    refused = kbtui(other, "sync", "docs")
    assert refused.returncode == 1
    line = one_line(refused.stderr)
    assert "run kbtui sync there" in line and "node " in line
    # Syncing "everything" from the second node leaves the first node's folder to it.
    everything = kbtui(other, "sync")
    assert everything.returncode == 0, everything.stderr
    assert "1 source(s) on other nodes' machines left to them" in everything.stdout
    assert kbtui(home, "sync", "docs").returncode == 0
