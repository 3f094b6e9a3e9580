"""Never lose the sources: a catalog that is not known to be whole stops every
command before anything is swept.

The encrypted sources in ``blobs/`` are the one thing that must survive
anything. Each test damages the catalog the way an operator or a disk might,
backdates the blobs well past the orphan sweep's grace period, and runs real
``kbtui`` processes: every blob must still be there, byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import time
from contextlib import closing
from pathlib import Path

import pytest

from tests.conftest import write
from tests.faults.processes import kbtui, one_line

HOUR_AGO = time.time() - 3600


def make_knowledge_base(home: Path, docs: Path, count: int = 3) -> None:
    for i in range(count):
        write(docs / f"doc{i}.md", f"# Runbook {i}\n\nrotate the pangolin certificates, step {i}\n")
    added = kbtui(home, "add", str(docs))
    assert added.returncode == 0, added.stderr


def sources(home: Path) -> dict[str, str]:
    """Every blob and a digest of its bytes."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (home / "blobs").iterdir()}


def backdate_blobs(home: Path) -> None:
    for blob in (home / "blobs").iterdir():
        os.utime(blob, (HOUR_AGO, HOUR_AGO))


def remove_catalog(home: Path) -> None:
    for path in home.glob("kb.sqlite3*"):
        path.unlink()


def empty_catalog(home: Path) -> None:
    (home / "kb.sqlite3").write_bytes(b"")  # : > kb.sqlite3


def garbage_catalog(home: Path) -> None:
    remove_catalog(home)
    (home / "kb.sqlite3").write_bytes(os.urandom(64 * 1024))


def newer_catalog(home: Path) -> None:
    with sqlite3.connect(home / "kb.sqlite3") as conn:
        conn.execute("INSERT INTO schema_version(version, name, applied_at) VALUES (999, 'future', 0)")


def overwritten_catalog(home: Path) -> None:
    """Page 2 onwards overwritten: the header still says SQLite, the tables are gone."""
    with open(home / "kb.sqlite3", "r+b") as handle:
        handle.seek(4096)
        handle.write(os.urandom(64 * 1024))


@pytest.mark.parametrize(
    "damage",
    [empty_catalog, remove_catalog, garbage_catalog, newer_catalog, overwritten_catalog],
    ids=["emptied", "removed-with-wal", "garbage", "newer-schema", "overwritten-pages"],
)
def test_a_catalog_not_known_to_be_whole_stops_every_command_and_sweeps_nothing(home, tmp_path, damage):
    make_knowledge_base(home, tmp_path / "docs")
    before = sources(home)
    damage(home)
    backdate_blobs(home)

    status = kbtui(home, "status")
    assert status.returncode == 3, status.stdout + status.stderr
    assert "catalog" in one_line(status.stderr)
    assert sources(home) == before

    # A command that writes (and would sweep) is refused just the same.
    write(tmp_path / "more" / "late.md", "# Late\n\nanother page\n")
    added = kbtui(home, "add", str(tmp_path / "more"))
    assert added.returncode == 3 and "catalog" in one_line(added.stderr)
    assert sources(home) == before


def test_the_terminal_ui_refuses_an_emptied_catalog_with_one_line_before_drawing(home, tmp_path):
    make_knowledge_base(home, tmp_path / "docs")
    before = sources(home)
    empty_catalog(home)
    backdate_blobs(home)
    ui = kbtui(home, stdin=subprocess.DEVNULL, timeout=60)
    assert ui.returncode == 3 and "catalog" in one_line(ui.stderr)
    assert ui.stdout == ""  # nothing drawn
    assert sources(home) == before


def test_a_catalog_from_another_data_directory_is_refused(home, tmp_path):
    make_knowledge_base(home, tmp_path / "docs")
    other = tmp_path / "other"
    make_knowledge_base(other, tmp_path / "other-docs", count=1)
    before = sources(home)
    remove_catalog(home)
    shutil.copy(other / "kb.sqlite3", home / "kb.sqlite3")
    backdate_blobs(home)

    status = kbtui(home, "status")
    assert status.returncode == 3 and "catalog" in one_line(status.stderr)
    assert sources(home) == before


def test_a_catalog_and_key_swapped_in_together_are_refused(home, tmp_path):
    """The key's fingerprint beside the key catches a catalog replaced along with its key."""
    make_knowledge_base(home, tmp_path / "docs")
    other = tmp_path / "other"
    make_knowledge_base(other, tmp_path / "other-docs", count=1)
    before = sources(home)
    remove_catalog(home)
    shutil.copy(other / "kb.sqlite3", home / "kb.sqlite3")
    shutil.copy(other / "node.key", home / "node.key")
    backdate_blobs(home)

    status = kbtui(home, "status")
    assert status.returncode == 3, status.stderr
    assert "node key" in one_line(status.stderr)
    assert sources(home) == before


def test_a_catalog_of_another_directory_sharing_the_key_is_refused(home, tmp_path):
    make_knowledge_base(home, tmp_path / "docs")
    other = tmp_path / "other"
    make_knowledge_base(other, tmp_path / "other-docs", count=1)
    # As if that knowledge base had been made with a copy of this one's key.
    our_fingerprint = bytes.fromhex(json.loads((home / "node.fingerprint").read_text())["key_fingerprint"])
    with closing(sqlite3.connect(other / "kb.sqlite3")) as conn, conn:  # closed: the write-ahead log folded in
        conn.execute("UPDATE node_meta SET value = ? WHERE key = 'node_key_fingerprint'", (our_fingerprint,))
    before = sources(home)
    remove_catalog(home)
    shutil.copy(other / "kb.sqlite3", home / "kb.sqlite3")
    backdate_blobs(home)

    status = kbtui(home, "status")
    assert status.returncode == 3 and "not the one this data directory was initialised with" in one_line(status.stderr)
    assert sources(home) == before


def foreign_catalog_claiming_our_key(home: Path, tmp_path: Path) -> Path:
    """Another knowledge base whose catalog claims this directory's key (its
    fingerprint is no secret: a keyed hash of a fixed label, copied over)."""
    other = tmp_path / "other"
    make_knowledge_base(other, tmp_path / "other-docs", count=1)
    our_fingerprint = bytes.fromhex(json.loads((home / "node.fingerprint").read_text())["key_fingerprint"])
    with closing(sqlite3.connect(other / "kb.sqlite3")) as conn, conn:  # closed: the write-ahead log folded in
        conn.execute("UPDATE node_meta SET value = ? WHERE key = 'node_key_fingerprint'", (our_fingerprint,))
    return other / "kb.sqlite3"


@pytest.mark.parametrize("unsealed", [False, True], ids=["its-own-seal", "seal-removed"])
def test_a_foreign_catalog_is_refused_even_without_node_fingerprint(home, tmp_path, unsealed):
    """With node.fingerprint removed, nothing but the catalog's own claims were
    left to check, and a catalog claiming this key was taken for the
    directory's own. Its id is sealed with its own key (refused: not this
    key); one with that seal stripped knows none of the sources here (refused)."""
    make_knowledge_base(home, tmp_path / "docs")
    foreign = foreign_catalog_claiming_our_key(home, tmp_path)
    if unsealed:
        with closing(sqlite3.connect(foreign)) as conn, conn:
            conn.execute("DELETE FROM node_meta WHERE key = 'catalog_id_seal'")
    before = sources(home)
    remove_catalog(home)
    (home / "node.fingerprint").unlink()
    shutil.copy(foreign, home / "kb.sqlite3")
    backdate_blobs(home)

    for command in (("status",), ("ls",), ("add", str(write(tmp_path / "new.md", "# New\n\ntext\n")))):
        refused = kbtui(home, *command)
        assert refused.returncode == 3, refused.stderr
        line = one_line(refused.stderr)
        expected = "knows none of the encrypted sources" if unsealed else "not made with this data directory's node key"
        assert expected in line
    assert not (home / "node.fingerprint").exists()  # nothing recorded for the wrong catalog
    assert sources(home) == before


def test_without_node_fingerprint_the_directorys_own_catalog_is_still_accepted(home, tmp_path):
    """A directory from before node.fingerprint (or one whose record was
    removed) keeps working with its own catalog, and gets the record back."""
    make_knowledge_base(home, tmp_path / "docs")
    recorded = json.loads((home / "node.fingerprint").read_text())
    (home / "node.fingerprint").unlink()
    assert kbtui(home, "status").returncode == 0
    assert kbtui(home, "add", str(write(tmp_path / "more.md", "# More\n\ntext\n"))).returncode == 0
    assert json.loads((home / "node.fingerprint").read_text()) == recorded


def test_a_catalog_restored_from_an_older_backup_keeps_the_newer_sources(home, tmp_path):
    """A whole catalog that is older than blobs/ does not know the newer
    documents; the sweep deletes only what the catalog itself removed, so their
    sources stay, and kbtui doctor says the catalog is behind."""
    make_knowledge_base(home, tmp_path / "docs", count=2)
    backup = tmp_path / "backup.sqlite3"
    with sqlite3.connect(home / "kb.sqlite3") as live, sqlite3.connect(backup) as copy:
        live.backup(copy)
    write(tmp_path / "newer" / "n1.md", "# Newer\n\nadded after the backup\n")
    write(tmp_path / "newer" / "n2.md", "# Newest\n\nalso after the backup\n")
    assert kbtui(home, "add", str(tmp_path / "newer")).returncode == 0
    before = sources(home)
    assert len(before) == 4

    remove_catalog(home)
    shutil.copy(backup, home / "kb.sqlite3")
    backdate_blobs(home)
    write(tmp_path / "later" / "l.md", "# Later\n\nadded to the restored catalog\n")
    added = kbtui(home, "add", str(tmp_path / "later"))  # opens for writing: the sweep runs
    assert added.returncode == 0, added.stderr
    assert set(before) <= set(sources(home))
    assert all(sources(home)[name] == digest for name, digest in before.items())

    doctor = kbtui(home, "doctor")
    assert doctor.returncode == 0, doctor.stdout
    assert "2 encrypted source(s) are not in the catalog" in doctor.stdout


def test_a_removed_documents_source_left_by_a_crash_is_swept(home, tmp_path):
    """The sweep still does its job: a crash between the delete commit and the
    unlink leaves a source that the next start removes (the catalog recorded
    the removal)."""
    make_knowledge_base(home, tmp_path / "docs", count=2)
    victim = sorted(sources(home))[0]
    with sqlite3.connect(home / "kb.sqlite3") as conn:  # the delete commit, then "kill -9"
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("DELETE FROM status_history WHERE document_id = ?", (victim,))
        conn.execute("DELETE FROM document WHERE id = ?", (victim,))
    backdate_blobs(home)
    write(tmp_path / "more" / "m.md", "# More\n\ntext\n")
    assert kbtui(home, "add", str(tmp_path / "more")).returncode == 0
    assert victim not in sources(home)
    assert len(sources(home)) == 2


def test_a_fresh_catalog_is_made_only_in_a_fresh_data_directory(home, tmp_path):
    make_knowledge_base(home, tmp_path / "docs", count=1)
    before = sources(home)
    # The key alone (no catalog, no fingerprint record, no sources) is not fresh either.
    for path in home.iterdir():
        if path.name != "node.key":
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    status = kbtui(home, "status")
    assert status.returncode == 3 and "catalog" in one_line(status.stderr)
    assert not (home / "kb.sqlite3").exists()

    # Sources alone: the key is missing too, and no new key is made.
    for path in home.iterdir():
        path.unlink()
    (home / "blobs").mkdir()
    (home / "blobs" / next(iter(before))).write_bytes(b"an encrypted source")
    added = kbtui(home, "add", str(tmp_path / "docs"))
    assert added.returncode == 3 and "node key" in one_line(added.stderr)
    assert sorted(p.name for p in home.iterdir()) == ["blobs"]
