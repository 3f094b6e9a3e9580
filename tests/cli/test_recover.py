"""kbtui recover: with the catalog gone, the encrypted sources and the key
alone bring every document back (name, collection, path, format) and search
finds the same best answers; nothing in the sources is changed; kill -9 at
any point, then a re-run, completes. And kbtui doctor --upgrade-blobs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kbtui.config import Config
from kbtui.node import Node
from tests.cli.backup_helpers import (
    catalog_rows,
    file_digests,
    kbtui_process,
    kill_9_when_paused,
    top_documents,
    write_corpus,
)
from tests.conftest import write
from tests.faults.processes import kbtui, kbtui_env, one_line
from tests.store.legacy_blobs import write_legacy_blob

# Each has one right answer (lower ranks are ties between look-alike notes, ordered by chunk id).
QUERIES = [f"zorblax{n} procedure" for n in range(12)] + ["pasted gauge readings"]


def documents(home: Path) -> dict[str, tuple]:
    """Every document: collection, name, source path, format and status."""
    node = Node.open(Config.load(home), read_only=True)
    try:
        return {r.document_id: (r.collection_id, r.name, r.source_path, r.format, r.status) for r in node.documents()}
    finally:
        node.close()


@pytest.fixture
def knowledge_base(home, tmp_path) -> dict[str, tuple]:
    """Notes in two collections, one renamed after it was added, and one pasted from stdin."""
    write_corpus(tmp_path / "notes", 12)
    assert kbtui(home, "add", str(tmp_path / "notes")).returncode == 0
    (tmp_path / "notes" / "part0" / "note4.md").rename(tmp_path / "notes" / "part0" / "renamed-note4.md")
    assert kbtui(home, "sync", "notes").returncode == 0
    write_corpus(tmp_path / "ops", 3, start=100)
    assert kbtui(home, "add", "-c", "ops", str(tmp_path / "ops")).returncode == 0
    pasted = subprocess.run(
        [sys.executable, "-m", "kbtui", "add", "-", "--name", "gauge log – März.txt"],
        input="pasted gauge readings, 14 bar\n", env=kbtui_env(home), capture_output=True, text=True, timeout=120,
    )
    assert pasted.returncode == 0, pasted.stderr
    found = documents(home)
    assert len(found) == 16 and {d[4] for d in found.values()} == {"Indexed"}
    return found


def lose_the_catalog(home: Path) -> None:
    for path in home.glob("kb.sqlite3*"):
        path.unlink()


def test_recover_brings_every_document_back_from_the_sources_and_the_key(home, knowledge_base, tmp_path):
    before_hits = top_documents(home, QUERIES, limit=1)
    ops_hits = top_documents(home, ["zorblax101 procedure"], collection="OPS", limit=1)
    assert any(name == "part0/renamed-note4.md" for _, name, *_ in knowledge_base.values())
    # One source from before labels, and one damaged: listed, never deleted.
    legacy_id, damaged_id = "1" * 32, "2" * 32
    write_legacy_blob(home / "blobs", (home / "node.key").read_bytes(), legacy_id, b"# an old note\n")
    (home / "blobs" / damaged_id).write_bytes(b"KBTB\x02" + os.urandom(200))
    lose_the_catalog(home)
    sources_before = file_digests(home / "blobs")

    new_home = tmp_path / "recovered"
    recovered = kbtui(new_home, "recover", str(home), "--json")
    assert recovered.returncode == 0, recovered.stderr
    report = json.loads(recovered.stdout)
    assert report["complete"] and report["statuses"] == {"Indexed": 16}
    assert {(u["source"], u["reason"].split(":")[0]) for u in report["not_recovered"]} == {
        (legacy_id, "format 1"), (damaged_id, "fails authentication with this key (damaged, or sealed with another key)"),
    }
    assert documents(new_home) == knowledge_base  # ids, collections, names, paths, formats; all Indexed
    assert top_documents(new_home, QUERIES, limit=1) == before_hits
    assert top_documents(new_home, ["zorblax101 procedure"], collection="OPS", limit=1) == ops_hits
    assert file_digests(home / "blobs") == sources_before, "recover changed the sources it read"
    assert (new_home / "node.key").read_bytes() == (home / "node.key").read_bytes()
    assert not (new_home / "recover.partial").exists()
    doctor = kbtui(new_home, "doctor")
    assert doctor.returncode == 0, doctor.stdout

    again = kbtui(new_home, "recover", str(home))
    assert again.returncode == 3 and "recover only into a new one" in one_line(again.stderr)


def test_recover_refuses_a_key_that_opens_nothing(home, knowledge_base, tmp_path):
    lose_the_catalog(home)
    (home / "node.fingerprint").unlink()  # nothing left to check the key against but the sources
    wrong = tmp_path / "wrong.key"
    wrong.write_bytes(os.urandom(32))
    refused = kbtui(tmp_path / "recovered", "recover", str(home / "blobs"), "--key", str(wrong))
    assert refused.returncode == 3 and "opens none of the sources" in one_line(refused.stderr)
    assert not (tmp_path / "recovered").exists()


def test_kill_9_during_recover_then_a_rerun_completes(home, knowledge_base, tmp_path):
    before_hits = top_documents(home, QUERIES, limit=1)
    lose_the_catalog(home)
    sources_before = file_digests(home / "blobs")
    new_home = tmp_path / "recovered"
    for pause_at in ("recover", "embedding"):  # halfway through the catalog rows; then inside the pipeline
        marker = tmp_path / f"paused-{pause_at}"
        kill_9_when_paused(kbtui_process(new_home, "recover", str(home), pause_at=pause_at, marker=marker), marker)
        assert (new_home / "recover.partial").exists()
        assert file_digests(home / "blobs") == sources_before
    statuses = dict(catalog_rows(new_home, "SELECT id, status FROM document"))
    assert len(statuses) > 0 and set(statuses.values()) != {"Indexed"}
    rerun = kbtui(new_home, "recover", str(home), "--json")
    assert rerun.returncode == 0, rerun.stderr
    report = json.loads(rerun.stdout)
    assert report["resumed"] and report["complete"] and report["statuses"] == {"Indexed": 16}
    assert documents(new_home) == knowledge_base
    assert top_documents(new_home, QUERIES, limit=1) == before_hits
    assert file_digests(home / "blobs") == sources_before
    assert not (new_home / "recover.partial").exists()
    assert catalog_rows(new_home, "SELECT count(DISTINCT chunk_uid) = count(*) FROM chunk") == [(1,)]


def test_doctor_upgrade_blobs_makes_old_sources_recoverable(home, knowledge_base, tmp_path):
    key = (home / "node.key").read_bytes()
    for document_id in list(knowledge_base)[:5]:  # as an older kbtui wrote them
        node = Node.open(Config.load(home), read_only=True)
        data = node.store.blobs.read_bytes(document_id)
        node.close()
        write_legacy_blob(home / "blobs", key, document_id, data)
    upgraded = kbtui(home, "doctor", "--upgrade-blobs", "--json")
    assert upgraded.returncode == 0, upgraded.stdout + upgraded.stderr
    assert json.loads(upgraded.stdout)["upgrade"] == {"upgraded": 5, "current": 11, "skipped": 0, "damaged": []}
    lose_the_catalog(home)
    recovered = kbtui(tmp_path / "recovered", "recover", str(home), "--json")
    assert recovered.returncode == 0, recovered.stderr
    assert json.loads(recovered.stdout)["not_recovered"] == []
    assert documents(tmp_path / "recovered") == knowledge_base


def test_a_source_folder_added_again_adopts_its_recovered_documents(home, knowledge_base, tmp_path):
    """Recovered documents belong to no source; adding the folder again finds them
    at their paths with the same bytes: nothing is stored or indexed twice."""
    lose_the_catalog(home)
    new_home = tmp_path / "recovered"
    assert kbtui(new_home, "recover", str(home)).returncode == 0
    write(tmp_path / "notes" / "part0" / "new.md", "# New\n\na note written after the recovery\n")
    added = kbtui(new_home, "add", str(tmp_path / "notes"), "--json")
    assert added.returncode == 0, added.stderr
    after = documents(new_home)
    assert len(after) == 17 and all(after[i] == knowledge_base[i] for i in knowledge_base)
    assert catalog_rows(new_home, "SELECT count(*) FROM document WHERE source_id IS NULL") == [(4,)]  # ops and stdin
