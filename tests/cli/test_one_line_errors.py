"""A data directory that cannot be used gives one line on stderr and the
documented exit code (3), never a traceback: from every command, and from the
terminal UI before it draws anything.

Read-only places are real read-only bind mounts in a private mount namespace
of the kbtui child (see tests/faults/processes.py): as root, a file mode of
0444 would not stop a write, so "a 0444 database" is a read-only bind mount of
kb.sqlite3 itself, which fails a write exactly as 0444 does for a non-root
user (SQLite opens it read-only and refuses the first write).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess

import pytest

from tests.conftest import write
from tests.faults.processes import kbtui, one_line, read_only

EVERY_KIND = (("status",), ("search", "anything"), ("ls",), ("add", "{docs}"), ())


def run_every_kind(run, docs) -> list[tuple[tuple[str, ...], subprocess.CompletedProcess]]:
    results = []
    for args in EVERY_KIND:
        args = tuple(a.format(docs=docs) for a in args)
        results.append((args, run(*args)))
    return results


@pytest.fixture
def docs(tmp_path):
    write(tmp_path / "docs" / "a.md", "# Alpha\n\nthe alpha page\n")
    return tmp_path / "docs"


def test_kbtui_home_being_a_file(home, docs):
    home.write_text("not a directory")
    for args, result in run_every_kind(lambda *a: kbtui(home, *a, stdin=subprocess.DEVNULL, timeout=60), docs):
        assert result.returncode == 3, (args, result.stderr)
        assert "is a file, not a directory" in one_line(result.stderr), args
    nested = home / "inside"
    result = kbtui(nested, "add", str(docs))
    assert result.returncode == 3 and "not a directory" in one_line(result.stderr)


def test_a_read_only_mount_refuses_writes_and_the_terminal_ui_in_one_line(home, docs, tmp_path):
    assert kbtui(home, "add", str(docs)).returncode == 0
    write(tmp_path / "more" / "b.md", "# Beta\n\nthe beta page\n")
    with read_only(home) as view:
        for args in (("add", str(tmp_path / "more")), ("rm", "abcdef"), ("reindex", "--all"), ()):
            result = view.run(*args)
            assert result.returncode == 3, (view.how, args, result.stderr)
            assert "cannot be written" in one_line(result.stderr), args
            assert result.stdout == "", args  # the terminal UI drew nothing


def test_unwritable_blobs_directory(home, docs, tmp_path):
    assert kbtui(home, "add", str(docs)).returncode == 0
    write(tmp_path / "more" / "b.md", "# Beta\n\nthe beta page\n")
    with read_only(home, home / "blobs") as view:
        result = view.run("add", str(tmp_path / "more"))
        assert result.returncode == 3, (view.how, result.stderr)
        assert "blobs" in one_line(result.stderr)
        assert view.run("search", "alpha").returncode == 0  # reading still works


def test_a_database_that_cannot_be_written(home, docs, tmp_path):
    assert kbtui(home, "add", str(docs)).returncode == 0
    write(tmp_path / "more" / "b.md", "# Beta\n\nthe beta page\n")
    with read_only(home, home / "kb.sqlite3") as view:
        result = view.run("add", str(tmp_path / "more"))
        assert result.returncode == 3, (view.how, result.stderr)
        assert "kb.sqlite3" in one_line(result.stderr)
        assert view.run("ls").returncode == 0
    assert sorted(p.name for p in (home / "blobs").iterdir()) == [
        json.loads(kbtui(home, "ls", "--json").stdout)[0]["document_id"]
    ]  # no source was stored for the refused add


def test_a_garbage_database(home, docs):
    assert kbtui(home, "add", str(docs)).returncode == 0
    for side_file in home.glob("kb.sqlite3-*"):
        side_file.unlink()
    (home / "kb.sqlite3").write_bytes(b"\x00garbage" * 4096)
    for args, result in run_every_kind(lambda *a: kbtui(home, *a, stdin=subprocess.DEVNULL, timeout=60), docs):
        assert result.returncode == 3, (args, result.stderr)
        assert "catalog" in one_line(result.stderr), args


def test_damage_found_after_opening_is_one_line_too(home, docs):
    """A catalog whose first pages are sound but whose status history is not:
    the open succeeds and the damage surfaces mid-command, as an SQLite error
    that the entry point turns into one line."""
    added = kbtui(home, "add", str(docs), "--json")
    document_id = json.loads(added.stdout)[0]["document_id"]
    with sqlite3.connect(home / "kb.sqlite3") as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'status_history'").fetchone()[0]
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with open(home / "kb.sqlite3", "r+b") as handle:
        handle.seek((root - 1) * page_size)
        handle.write(b"\xff" * page_size)
    result = kbtui(home, "show", document_id)
    assert result.returncode == 3, result.stderr
    assert "damaged" in one_line(result.stderr)
