"""kbtui backup, backup --verify and restore, as an operator runs them: a
backup taken while documents are being added restores to a base that answers
the same searches; damage is caught; restore refuses what it must; kill -9
at any point, then a re-run, completes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kbtui.config import Config
from kbtui.node import Node
from tests.cli.backup_helpers import (
    assert_none_half,
    catalog_rows,
    file_digests,
    kbtui_process,
    kill_9_when_paused,
    top_documents,
    wait_for,
    write_corpus,
)
from tests.faults.processes import kbtui, one_line

BASE = 30


@pytest.fixture
def base(home, tmp_path) -> list[str]:
    """An indexed knowledge base of BASE notes; the queries that find each."""
    write_corpus(tmp_path / "base", BASE)
    added = kbtui(home, "add", str(tmp_path / "base"))
    assert added.returncode == 0, added.stderr
    return [f"zorblax{n} procedure" for n in range(BASE)]


def test_a_backup_taken_while_200_documents_are_added_restores_to_the_same_answers(home, base, tmp_path):
    # The best answer to each query; lower ranks may move as the new documents come in.
    before = top_documents(home, base, limit=1)
    write_corpus(tmp_path / "incoming", 200, word="quillon", paragraphs=6)
    adding = kbtui_process(home, "add", str(tmp_path / "incoming"))
    try:
        # Back up once the add is under way: some new documents indexed, most not yet.
        wait_for(
            lambda: catalog_rows(home, "SELECT count(*) FROM document WHERE status = 'Indexed'")[0][0] >= BASE + 5,
            what="the add under way",
        )
        backup = kbtui(home, "backup", str(tmp_path / "bk"), "--json")
        assert backup.returncode == 0, backup.stderr
    finally:
        assert adding.wait(timeout=600) == 0, adding.communicate()
    taken = json.loads(backup.stdout)
    manifest = json.loads((tmp_path / "bk" / "manifest.json").read_text())
    assert taken["documents"] > BASE and manifest["counts"].get("status:Indexed", 0) < BASE + 200, (
        "the backup did not overlap the add"
    )

    restored_home = tmp_path / "restored"
    restored = kbtui(restored_home, "restore", str(tmp_path / "bk"), "--key", str(home / "node.key"))
    assert restored.returncode == 0, restored.stderr
    assert_none_half(restored_home)
    statuses = dict(catalog_rows(restored_home, "SELECT id, status FROM document"))
    assert len(statuses) == taken["documents"] and "Pending" in statuses.values()
    assert top_documents(restored_home, base, limit=1) == before
    # Every new document the backup holds indexed is found by its own word.
    new_indexed = catalog_rows(
        restored_home, "SELECT d.id, c.content FROM document d JOIN chunk c ON c.document_id = d.id"
        " WHERE d.status = 'Indexed' AND c.content LIKE '%quillon%' GROUP BY d.id"
    )
    assert new_indexed
    for doc_id, content in new_indexed:
        word = next(w for w in content.split() if w.startswith("quillon"))
        assert top_documents(restored_home, [f"{word} procedure"], limit=1)[f"{word} procedure"] == [doc_id]
    doctor = kbtui(restored_home, "doctor", "--json")
    assert doctor.returncode == 0 and not [
        f for f in json.loads(doctor.stdout)["findings"] if f["severity"] in ("problem", "warning")
    ], doctor.stdout
    # The Pending ones are only queued: the restored node indexes them.
    node = Node.open(Config.load(restored_home))
    try:
        pending = [doc_id for doc_id, status in statuses.items() if status == "Pending"]
        assert set(node.index(pending).values()) == {"Indexed"}
    finally:
        node.close()


def _damage(backup: Path, target: str, damage: str) -> str:
    """Damage one file of the backup; the id (or name) a report must mention."""
    manifest = json.loads((backup / "manifest.json").read_text())
    if target == "catalog":
        path, named = backup / manifest["catalog"]["file"], "catalog"
    else:
        entry = manifest["blobs"][len(manifest["blobs"]) // 2]
        path, named = backup / entry["file"], entry["id"]
    raw = bytearray(path.read_bytes())
    if damage == "truncated":
        path.write_bytes(bytes(raw[: len(raw) // 2]))
    elif damage == "flipped":
        raw[len(raw) // 3] ^= 0x40
        path.write_bytes(bytes(raw))
    else:
        path.unlink()
    return named


@pytest.mark.parametrize(
    ("target", "damage", "said"),
    [
        ("source", "truncated", "truncated"),
        ("source", "flipped", "does not match its checksum"),
        ("source", "missing", "is missing"),
        ("catalog", "flipped", "does not match its checksum"),
        ("catalog", "truncated", "truncated"),
    ],
)
def test_verify_catches_damage_and_restore_refuses_it(home, base, tmp_path, run_cli, target, damage, said):
    assert run_cli("backup", str(tmp_path / "bk")).code == 0
    assert run_cli("backup", "--verify", str(tmp_path / "bk")).code == 0
    named = _damage(tmp_path / "bk", target, damage)
    checked = run_cli("backup", "--verify", str(tmp_path / "bk"))
    assert checked.code == 3 and checked.out.startswith("PROBLEM") and "cannot be restored" in checked.out
    as_json = run_cli("backup", "--verify", str(tmp_path / "bk"), "--json")
    assert as_json.code == 3
    problems = json.loads(as_json.out)["problems"]
    assert len(problems) == 1 and named in problems[0] and said in problems[0], problems
    refused = kbtui(tmp_path / "restored", "restore", str(tmp_path / "bk"), "--key", str(home / "node.key"))
    assert refused.returncode == 3 and "fails verification" in one_line(refused.stderr)
    assert not (tmp_path / "restored").exists()


def test_a_manifest_changed_by_hand_is_refused(home, base, tmp_path, run_cli):
    assert run_cli("backup", str(tmp_path / "bk")).code == 0
    manifest_path = tmp_path / "bk" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["counts"]["documents"] += 1
    manifest_path.write_text(json.dumps(manifest))
    checked = run_cli("backup", "--verify", str(tmp_path / "bk"))
    assert checked.code == 3 and "MAC" in checked.err


def test_restore_refuses_a_wrong_key_with_one_line_and_changes_nothing(home, base, tmp_path):
    assert kbtui(home, "backup", str(tmp_path / "bk")).returncode == 0
    wrong = tmp_path / "wrong.key"
    wrong.write_bytes(os.urandom(32))
    target = tmp_path / "restored"
    refused = kbtui(target, "restore", str(tmp_path / "bk"), "--key", str(wrong))
    assert refused.returncode == 3
    assert "does not match this backup" in one_line(refused.stderr)
    assert not target.exists()
    # A key already in the target directory is the key: a different one is refused the same way.
    target.mkdir(mode=0o700)
    (target / "node.key").write_bytes(os.urandom(32))
    os.chmod(target / "node.key", 0o600)
    refused = kbtui(target, "restore", str(tmp_path / "bk"))
    assert refused.returncode == 3 and "does not match this backup" in one_line(refused.stderr)
    assert sorted(p.name for p in target.iterdir()) == ["node.key"]
    # And with no key anywhere (the backup was taken without --with-key), it says how to give one.
    refused = kbtui(tmp_path / "other", "restore", str(tmp_path / "bk"))
    assert refused.returncode == 3 and "--key FILE" in one_line(refused.stderr)


@pytest.mark.parametrize("holds", ["catalog", "sources"])
def test_restore_refuses_a_directory_that_holds_a_catalog_or_sources(home, base, tmp_path, holds):
    assert kbtui(home, "backup", str(tmp_path / "bk"), "--with-key").returncode == 0
    if holds == "catalog":
        target = home  # the live data directory itself
    else:
        target = tmp_path / "restored"
        (target / "blobs").mkdir(parents=True, mode=0o700)
        os.chmod(target, 0o700)
        (target / "blobs" / ("0" * 32)).write_bytes(b"a source of some other knowledge base")
    before = file_digests(target)
    refused = kbtui(target, "restore", str(tmp_path / "bk"))
    assert refused.returncode == 3
    assert "holds a catalog or sources" in one_line(refused.stderr)
    assert file_digests(target) == before


def test_with_key_the_backup_restores_alone_and_the_key_stays_owner_only(home, base, tmp_path):
    assert kbtui(home, "backup", str(tmp_path / "bk"), "--with-key").returncode == 0
    assert os.stat(tmp_path / "bk" / "node.key").st_mode & 0o077 == 0
    restored = kbtui(tmp_path / "restored", "restore", str(tmp_path / "bk"), "--json")
    assert restored.returncode == 0, restored.stderr
    assert json.loads(restored.stdout)["key_from"] == "the backup"
    assert (tmp_path / "restored" / "node.key").read_bytes() == (home / "node.key").read_bytes()
    assert list((tmp_path / "restored" / "vectors").glob("*.json")), "the vector index was not rebuilt"
    assert top_documents(tmp_path / "restored", base[:5]) == top_documents(home, base[:5])


def test_a_second_backup_into_the_same_place_needs_incremental(home, base, tmp_path, run_cli):
    assert run_cli("backup", str(tmp_path / "bk")).code == 0
    again = run_cli("backup", str(tmp_path / "bk"))
    assert again.code == 2 and "--incremental" in again.err
    inside = run_cli("backup", str(home / "bk"))
    assert inside.code == 2 and "inside the data directory" in inside.err


def test_incremental_copies_only_what_the_last_backup_lacks(home, base, tmp_path):
    assert kbtui(home, "backup", str(tmp_path / "bk")).returncode == 0
    write_corpus(tmp_path / "base", 2, start=BASE)  # two new notes
    (tmp_path / "base" / "part0" / "note1.md").write_text("# Note 1\n\nthe zorblax1 procedure was rewritten\n")
    assert kbtui(home, "add", str(tmp_path / "base")).returncode == 0
    again = kbtui(home, "backup", "--incremental", str(tmp_path / "bk"), "--json")
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert (report["incremental"], report["documents"], report["sources"], report["sources_copied"]) == (
        True, BASE + 2, BASE + 2, 3,
    )
    backup = tmp_path / "bk"
    manifest = json.loads((backup / "manifest.json").read_text())
    named = {manifest["catalog"]["file"], *(b["file"] for b in manifest["blobs"])}
    on_disk = {str(p.relative_to(backup)) for p in backup.rglob("*") if p.is_file() and not p.name.startswith(".")}
    assert on_disk == named | {"manifest.json"}, "a replaced copy was left behind"
    assert kbtui(home, "backup", "--verify", str(backup)).returncode == 0
    restored = kbtui(tmp_path / "restored", "restore", str(backup), "--key", str(home / "node.key"))
    assert restored.returncode == 0, restored.stderr
    queries = [*base, f"zorblax{BASE + 1} procedure", "rewritten"]
    assert top_documents(tmp_path / "restored", queries) == top_documents(home, queries)


def test_kill_9_during_a_backup_then_a_rerun_completes(home, base, tmp_path):
    destination, marker = tmp_path / "bk", tmp_path / "paused"
    kill_9_when_paused(kbtui_process(home, "backup", str(destination), pause_at="backup", marker=marker), marker)
    assert not destination.exists(), "an interrupted backup must not look whole"
    assert any((tmp_path / "bk.partial" / "blobs").iterdir())
    checked = kbtui(home, "backup", "--verify", str(destination))
    assert checked.returncode == 3
    rerun = kbtui(home, "backup", str(destination))
    assert rerun.returncode == 0, rerun.stderr
    assert not (tmp_path / "bk.partial").exists()
    assert kbtui(home, "backup", "--verify", str(destination)).returncode == 0


def test_kill_9_during_an_incremental_backup_keeps_the_last_one_then_a_rerun_completes(home, base, tmp_path):
    destination, marker = tmp_path / "bk", tmp_path / "paused"
    assert kbtui(home, "backup", str(destination)).returncode == 0
    write_corpus(tmp_path / "more", 10, start=100)
    assert kbtui(home, "add", str(tmp_path / "more")).returncode == 0
    before = json.loads((destination / "manifest.json").read_text())
    process = kbtui_process(home, "backup", "--incremental", str(destination), pause_at="backup", marker=marker)
    kill_9_when_paused(process, marker)
    assert json.loads((destination / "manifest.json").read_text()) == before
    assert kbtui(home, "backup", "--verify", str(destination)).returncode == 0  # the last backup is whole
    rerun = kbtui(home, "backup", "--incremental", str(destination), "--json")
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads(rerun.stdout)["documents"] == BASE + 10
    assert kbtui(home, "backup", "--verify", str(destination)).returncode == 0


def test_kill_9_during_a_restore_then_a_rerun_completes(home, base, tmp_path):
    assert kbtui(home, "backup", str(tmp_path / "bk"), "--with-key").returncode == 0
    target, marker = tmp_path / "restored", tmp_path / "paused"
    kill_9_when_paused(kbtui_process(target, "restore", str(tmp_path / "bk"), pause_at="restore", marker=marker), marker)
    assert not (target / "kb.sqlite3").exists()  # sources but no catalog: every command refuses it
    refused = kbtui(target, "search", "zorblax3")
    assert refused.returncode == 3, refused.stderr
    rerun = kbtui(target, "restore", str(tmp_path / "bk"), "--json")
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads(rerun.stdout)["resumed"]
    assert not (target / "restore.partial").exists()
    assert top_documents(target, base) == top_documents(home, base)
