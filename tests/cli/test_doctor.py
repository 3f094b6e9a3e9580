"""kbtui doctor: says what is wrong with a data directory and what to do,
exits 0 when it is healthy and 3 when it is not, and never changes anything."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tests.conftest import write
from tests.faults.processes import kbtui


@pytest.fixture
def knowledge_base(home, tmp_path) -> list[str]:
    write(tmp_path / "docs" / "a.md", "# Alpha\n\nthe alpha page\n")
    write(tmp_path / "docs" / "b.md", "# Beta\n\nthe beta page\n")
    added = kbtui(home, "add", str(tmp_path / "docs"), "--json")
    assert added.returncode == 0, added.stderr
    assert kbtui(home, "search", "alpha").returncode == 0  # saves the vector index
    return [d["document_id"] for d in json.loads(added.stdout)]


def snapshot(home: Path) -> dict[str, tuple]:
    """Every file and directory under ``home``: mode, size, mtime and content digest."""
    found = {}
    for path in [home, *home.rglob("*")]:
        info = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        found[path.relative_to(home).as_posix()] = (info.st_mode, info.st_size, info.st_mtime_ns, digest)
    return found


def doctor(home: Path) -> tuple[int, dict]:
    result = kbtui(home, "doctor", "--json")
    return result.returncode, json.loads(result.stdout)


def findings(report: dict, severity: str) -> list[str]:
    return [f"{f['area']}: {f['message']}" for f in report["findings"] if f["severity"] == severity]


def test_a_healthy_directory(home, knowledge_base):
    before = snapshot(home)
    code, report = doctor(home)
    assert code == 0 and report["healthy"], report
    assert not findings(report, "problem") and not findings(report, "warning")
    areas = {f["area"] for f in report["findings"] if f["severity"] == "ok"}
    assert {"data directory", "node key", "catalog", "sources", "vector index"} <= areas
    text = kbtui(home, "doctor")
    assert text.returncode == 0 and text.stdout.strip().endswith("healthy")
    assert snapshot(home) == before  # not even SQLite's -wal/-shm, nor a log line


def damage_emptied_catalog(home, ids):
    for side_file in home.glob("kb.sqlite3-*"):
        side_file.unlink()
    (home / "kb.sqlite3").write_bytes(b"")


def damage_wrong_key(home, ids):
    (home / "node.key").write_bytes(os.urandom(32))


def damage_missing_source(home, ids):
    (home / "blobs" / ids[0]).unlink()


def damage_newer_schema(home, ids):
    with closing(sqlite3.connect(home / "kb.sqlite3")) as conn, conn:
        conn.execute("INSERT INTO schema_version(version, name, applied_at) VALUES (999, 'future', 0)")


def damage_open_key(home, ids):
    (home / "node.key").chmod(0o644)


def damage_shared_directory(home, ids):
    home.chmod(0o777)


def damage_broken_page(home, ids):
    with closing(sqlite3.connect(home / "kb.sqlite3")) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'chunk'").fetchone()[0]
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with open(home / "kb.sqlite3", "r+b") as handle:
        handle.seek((root - 1) * page_size)
        handle.write(b"\xff" * page_size)


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (damage_emptied_catalog, "kb.sqlite3) is empty"),
        (damage_wrong_key, "not the key this data directory was written with"),
        (damage_missing_source, "1 document(s) have no encrypted source"),
        (damage_newer_schema, "newer than this kbtui"),
        (damage_open_key, "readable by other users"),
        (damage_shared_directory, "writable by other users"),
        (damage_broken_page, "damaged"),
    ],
    ids=["emptied-catalog", "wrong-key", "missing-source", "newer-schema", "key-readable-by-others",
         "directory-writable-by-others", "broken-page"],
)
def test_a_problem_is_named_with_what_to_do_and_nothing_is_changed(home, knowledge_base, damage, expected):
    damage(home, knowledge_base)
    before = snapshot(home)
    code, report = doctor(home)
    assert code == 3 and not report["healthy"], report
    problems = findings(report, "problem")
    assert any(expected in p for p in problems), problems
    text = kbtui(home, "doctor")
    assert text.returncode == 3 and "problem" in text.stdout.splitlines()[-1]
    assert snapshot(home) == before


def test_what_kbtui_mends_itself_is_a_note_and_unknown_sources_a_warning(home, knowledge_base):
    # The vector index file damaged (it is a cache: rebuilt), a removed
    # document's source left by a crash (swept at the next start), and a
    # source the catalog has never heard of (kept, and worth a look).
    index_file = next((home / "vectors").glob("*.hnsw"))
    index_file.write_bytes(index_file.read_bytes()[:-10] + b"0123456789")
    with closing(sqlite3.connect(home / "kb.sqlite3")) as conn, conn:
        conn.execute("DELETE FROM status_history WHERE document_id = ?", (knowledge_base[0],))
        conn.execute("DELETE FROM document WHERE id = ?", (knowledge_base[0],))
    (home / "blobs" / ("f" * 32)).write_bytes(b"KBTB" + os.urandom(64))
    code, report = doctor(home)
    assert code == 0 and report["healthy"], report
    notes = findings(report, "note")
    assert any("the index file is corrupt" in n for n in notes), notes
    assert any("1 source(s) of removed documents" in n for n in notes), notes
    assert any("1 encrypted source(s) are not in the catalog" in w for w in findings(report, "warning"))


def test_no_data_directory(home):
    result = kbtui(home, "doctor")
    assert result.returncode == 2 and "no knowledge base" in result.stderr
    assert not home.exists()


def test_doctor_authenticates_every_source_and_names_the_damaged_documents(home, tmp_path):
    """On a 1,000-document base: a source truncated at a segment boundary, one
    with a flipped byte, and two documents' sources swapped. ``--quick`` (files
    there, headers whole) sees nothing; the default check decrypts every source
    under its own document's id and names all four (exit 3), changing nothing."""
    docs = tmp_path / "docs"
    for number in range(996):
        write(docs / f"note-{number:04}.md", f"# Note {number}\n\nabout topic {number % 37}\n")
    for name in ("truncated.md", "flipped.md", "swapped-a.md", "swapped-b.md"):
        write(docs / name, f"# {name}\n\n" + "a long paragraph of text. " * 8000)  # several 64 KiB segments
    added = kbtui(home, "add", str(docs), "--json", timeout=600)
    assert added.returncode == 0, added.stderr
    ids = {d["display_name"]: d["document_id"] for d in json.loads(added.stdout)}
    assert len(ids) == 1000
    blobs = home / "blobs"
    truncated = blobs / ids["truncated.md"]
    header_and_one_segment = 32 + 64 * 1024 + 16
    truncated.write_bytes(truncated.read_bytes()[:header_and_one_segment])
    flipped = bytearray((blobs / ids["flipped.md"]).read_bytes())
    flipped[len(flipped) // 2] ^= 0x01
    (blobs / ids["flipped.md"]).write_bytes(bytes(flipped))
    swapped_a, swapped_b = blobs / ids["swapped-a.md"], blobs / ids["swapped-b.md"]
    a_bytes, b_bytes = swapped_a.read_bytes(), swapped_b.read_bytes()
    swapped_a.write_bytes(b_bytes)
    swapped_b.write_bytes(a_bytes)
    before = snapshot(home)

    quick = kbtui(home, "doctor", "--quick", "--json")
    assert quick.returncode == 0 and json.loads(quick.stdout)["damaged_sources"] == []

    code, report = doctor(home)
    assert code == 3 and not report["healthy"]
    assert {(d["name"], d["problem"]) for d in report["damaged_sources"]} == {
        (name, "failed_authentication") for name in ("flipped.md", "swapped-a.md", "swapped-b.md", "truncated.md")
    }
    assert report["authenticated_bytes"] > 996 * 20
    problem = next(f for f in report["findings"] if f["severity"] == "problem")
    assert problem["message"].startswith("4 document(s) have an encrypted source that fails authentication")
    assert "restore blobs/ from a backup" in problem["action"]

    text = kbtui(home, "doctor")
    assert text.returncode == 3
    named = [line for line in text.stdout.splitlines() if "fails authentication" in line and "·" in line]
    assert [line.split()[0] for line in named] == ["flipped.md", "swapped-a.md", "swapped-b.md", "truncated.md"]
    assert snapshot(home) == before

    shown = kbtui(home, "show", "swapped-a.md")
    assert shown.returncode == 0 and "source_damaged" in shown.stdout and "cannot be re-indexed" in shown.stdout
    assert json.loads(kbtui(home, "show", "note-0001.md", "--json").stdout)["source_problem"] is None
