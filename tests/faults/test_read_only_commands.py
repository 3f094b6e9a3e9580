"""Commands that only read (search, ls, show, status, doctor, and --help of
anything) open the catalog read-only and never write: they work on a read-only
data directory and while another process holds the write lock.

The read-only data directory is a real read-only bind mount, made in a private
mount namespace of the kbtui child process (``unshare -m`` as root, ``unshare
-rm`` otherwise; see tests/faults/processes.py). Where no mount namespace can
be had and the tests run as a non-root user, the directory is made 0555 and
its files 0444 instead; as root with neither, these tests are skipped (root
ignores permission bits, so only a real read-only mount is a real test).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from store.migrations import LATEST_VERSION
from tests.conftest import write
from tests.faults.processes import kbtui, one_line, read_only

READS = (("search", "pangolin"), ("ls",), ("status",), ("repo", "ls"), ("doctor",))


@pytest.fixture
def knowledge_base(home, tmp_path) -> str:
    """A data directory with two indexed documents, closed cleanly (no -wal left)."""
    write(tmp_path / "docs" / "a.md", "# Certificates\n\nrotate the pangolin certificates yearly\n")
    write(tmp_path / "docs" / "b.md", "# Backups\n\nrestore the database to a point in time\n")
    added = kbtui(home, "add", str(tmp_path / "docs"), "--json")
    assert added.returncode == 0, added.stderr
    return json.loads(added.stdout)[0]["document_id"]


def test_reads_work_on_a_read_only_data_directory_and_writes_are_refused_in_one_line(home, knowledge_base, tmp_path):
    # A search where the directory is writable saves the vector index cache,
    # which the read-only searches below must load without creating anything.
    assert kbtui(home, "search", "pangolin").returncode == 0
    assert list((home / "vectors").glob("*.json"))
    for side_file in home.glob("kb.sqlite3-*"):
        side_file.unlink()  # the hard case: SQLite can create neither -wal nor -shm
    with read_only(home) as view:
        for args in (*READS, ("show", knowledge_base), ("ls", "--help"), ("search", "--help")):
            result = view.run(*args)
            assert result.returncode == 0, (view.how, args, result.stderr)
            assert result.stderr == "", (args, result.stderr)
        hits = json.loads(view.run("search", "pangolin", "--json").stdout)["hits"]
        assert hits and "pangolin" in hits[0]["text"]

        write(tmp_path / "more" / "c.md", "# More\n\ntext\n")
        added = view.run("add", str(tmp_path / "more"))
        assert added.returncode == 3 and "cannot be written" in one_line(added.stderr)


def test_a_read_only_data_directory_left_with_a_live_wal_shows_what_was_committed(home, knowledge_base):
    """A writer killed with committed pages still in the -wal, then the disk
    mounted read-only: a reader must see those pages (an immutable open would
    silently show the older state)."""
    killed_writer = (
        "import os, sqlite3, sys\n"
        "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "conn.execute('PRAGMA wal_autocheckpoint = 0')\n"
        "conn.execute(\"INSERT INTO collection(id, created_at) VALUES ('LATE', 0)\")\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", killed_writer, str(home / "kb.sqlite3")], check=True)
    assert (home / "kb.sqlite3-wal").stat().st_size > 0
    with read_only(home) as view:
        listed = view.run("ls", "-c", "late", "--json")
        assert listed.returncode == 0, (view.how, listed.stderr)
        assert json.loads(listed.stdout) == []


def test_reads_do_not_wait_while_another_process_holds_the_write_lock(home, knowledge_base):
    holder = sqlite3.connect(home / "kb.sqlite3", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        for args in (*READS, ("show", knowledge_base)):
            started = time.monotonic()
            result = kbtui(home, *args, timeout=60)
            elapsed = time.monotonic() - started
            assert result.returncode == 0, (args, result.stderr)
            assert elapsed < 10, f"{args} took {elapsed:.1f} s: it waited for the write lock"
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def catalog_digest(home: Path) -> str:
    with sqlite3.connect(f"file:{home / 'kb.sqlite3'}?mode=ro", uri=True) as conn:
        return hashlib.sha256("\n".join(conn.iterdump()).encode()).hexdigest()


def test_reads_never_write(home, knowledge_base, tmp_path):
    # A data directory from before node.fingerprint, and a removed document
    # whose blob a crash left behind: a writing open would record the one and
    # sweep the other. A read must do neither.
    (home / "node.fingerprint").unlink(missing_ok=True)
    removed = sorted(p.name for p in (home / "blobs").iterdir() if p.name != knowledge_base)[0]
    with sqlite3.connect(home / "kb.sqlite3") as conn:
        conn.execute("DELETE FROM node_meta WHERE key = 'catalog_id'")
        conn.execute("DELETE FROM status_history WHERE document_id = ?", (removed,))
        conn.execute("DELETE FROM document WHERE id = ?", (removed,))
    os.utime(home / "blobs" / removed, (time.time() - 3600,) * 2)  # past any grace period
    before = catalog_digest(home)
    for args in (*READS, ("show", knowledge_base)):
        assert kbtui(home, *args).returncode == 0, args
    assert catalog_digest(home) == before
    assert not (home / "node.fingerprint").exists()
    assert (home / "blobs" / removed).exists()

    write(tmp_path / "more" / "c.md", "# More\n\ntext\n")
    assert kbtui(home, "add", str(tmp_path / "more")).returncode == 0  # a writing open does both
    assert (home / "node.fingerprint").exists()
    assert not (home / "blobs" / removed).exists()


def test_help_opens_nothing(home, tmp_path):
    for args in (("--help",), ("ls", "--help"), ("search", "--help"), ("add", "--help"), ("doctor", "--help")):
        result = kbtui(home, *args)
        assert result.returncode == 0 and "Usage" in result.stdout, (args, result.stderr)
    assert not home.exists()

    home.mkdir(mode=0o700)
    (home / "kb.sqlite3").write_bytes(os.urandom(4096))  # a damaged catalog: --help must not care
    assert kbtui(home, "ls", "--help").returncode == 0
    assert sorted(p.name for p in home.iterdir()) == ["kb.sqlite3"]


def test_a_read_in_a_missing_data_directory_says_there_is_no_knowledge_base(home):
    for args in (*READS, ("show", "abcdef")):
        result = kbtui(home, *args)
        assert result.returncode == 2, (args, result.stderr)
        assert "no knowledge base" in one_line(result.stderr)
    assert not home.exists()


def _make_schema_older(home: Path) -> None:
    """Undo the latest migration (OCR pages), as if an older kbtui had written this catalog."""
    with sqlite3.connect(home / "kb.sqlite3") as conn:
        for statement in ("DROP TABLE ocr_page", "DROP TABLE document_extraction"):
            conn.execute(statement)
        conn.execute("DELETE FROM schema_version WHERE version >= 8")


def test_a_read_upgrades_an_older_schema_once_and_then_never_writes(home, knowledge_base):
    _make_schema_older(home)
    assert kbtui(home, "status").returncode == 0
    with sqlite3.connect(home / "kb.sqlite3") as conn:
        assert conn.execute("SELECT max(version) FROM schema_version").fetchone()[0] == LATEST_VERSION


def test_an_older_schema_on_a_read_only_data_directory_is_one_line(home, knowledge_base):
    _make_schema_older(home)
    with read_only(home) as view:
        result = view.run("status")
        assert result.returncode == 3 and "older kbtui" in one_line(result.stderr)
