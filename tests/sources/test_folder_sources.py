"""Folders and single files as sources, as an operator meets them: added once,
edited, renamed, deleted, added again; every skipped file with its reason."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbtui.follow import counting_in, follow_documents
from store.models import Chunk, Document
from tests.conftest import write
from tests.faults.processes import kbtui_env
from tests.sources.conftest import CountingEmbedder

CANARY = "zqxsrccanary"


def documents() -> dict[str, Document]:
    return {d.source_path: d for d in Document.select().where(Document.source_path.is_null(False))}


def chunk_text() -> str:
    return "\n".join(c.content for c in Chunk.select())


def hits(run_cli, query: str) -> list[dict]:
    return json.loads(run_cli("search", query, "--json").out)["hits"]


def found(run_cli, word: str) -> bool:
    return any(word in h["text"] for h in hits(run_cli, word))


def runbooks(root: Path) -> Path:
    write(root / "restart.md", "# Restart\n\nrestart the zephyrgate service with care\n")
    write(root / "backup.md", "# Backup\n\nnightly backups run at two\n")
    return root


# ---------------------------------------------------------------- edits, deletes, renames


def test_an_edited_file_added_again_is_one_document_with_the_new_words_only(run_cli, tmp_path):
    folder = runbooks(tmp_path / "runbooks")
    assert run_cli("add", str(folder)).code == 0
    before = documents()["restart.md"]

    write(folder / "restart.md", "# Restart\n\nrestart the quasarlift service with care\n")
    again = run_cli("add", str(folder))

    assert again.code == 0, again.err
    assert "1 updated, 1 unchanged" in again.out
    assert Document.select().count() == 2
    after = documents()["restart.md"]
    assert after.id == before.id and after.status == "Indexed"
    assert found(run_cli, "quasarlift") and not found(run_cli, "zephyrgate")


def test_a_deleted_file_is_purged_by_sync(run_cli, tmp_path, home):
    folder = runbooks(tmp_path / "runbooks")
    run_cli("add", str(folder))
    doomed = documents()["backup.md"]
    (folder / "backup.md").unlink()

    synced = run_cli("sync", "runbooks")

    assert synced.code == 0, synced.err
    assert "1 unchanged, 1 removed" in synced.out
    assert set(documents()) == {"restart.md"}
    assert not found(run_cli, "nightly")
    assert not (home / "blobs" / doomed.id).exists()


def test_a_rename_moves_the_document_and_embeds_nothing(node, tmp_path):
    node.embedder = CountingEmbedder(node.embedder)
    folder = runbooks(tmp_path / "runbooks")
    first = node.add_source(folder, "DEFAULT")
    node.index_and_follow(first.report.pending_document_ids, show_progress=False)
    moving = documents()["backup.md"]
    node.embedder.calls = node.embedder.texts = 0

    (folder / "archive").mkdir()
    (folder / "backup.md").rename(folder / "archive" / "backup-old.md")
    report = node.sync_source(first.row.source.id)
    node.index_and_follow(report.pending_document_ids, show_progress=False)

    assert [(f.path, f.outcome, f.previous_path) for f in report.files if f.outcome != "unchanged"] == [
        ("archive/backup-old.md", "renamed", "backup.md"),
    ]
    moved = documents()["archive/backup-old.md"]
    assert moved.id == moving.id and moved.status == "Indexed" and moved.indexed_at == moving.indexed_at
    assert node.embedder.texts == 0, "nothing was embedded again"
    assert {h.source_path for h in node.search("nightly backups", "DEFAULT").hits} >= {"archive/backup-old.md"}


def test_identical_files_in_one_add_are_two_documents_and_the_add_does_not_wait(run_cli, tmp_path):
    write(tmp_path / "twins" / "a.md", "# Same\n\nthe same bytes twice\n")
    write(tmp_path / "twins" / "b.md", "# Same\n\nthe same bytes twice\n")
    started = time.monotonic()
    result = run_cli("add", str(tmp_path / "twins"))
    assert result.code == 0, result.err
    assert time.monotonic() - started < 60, "the follow-up waited on a repeated id"
    assert {p: d.status for p, d in documents().items()} == {"a.md": "Indexed", "b.md": "Indexed"}


def test_following_repeated_ids_counts_each_document_once(node, tmp_path):
    report = node.add_source(runbooks(tmp_path / "runbooks"), "DEFAULT")
    ids = list(report.report.pending_document_ids)
    node.index_and_follow(ids, show_progress=False)
    started = time.monotonic()
    result = follow_documents(ids + ids, show_progress=False, stall_timeout_s=30, count=counting_in(node.store.catalog))
    assert not result.stalled and result.counts == {"Indexed": 2}
    assert time.monotonic() - started < 5


# ---------------------------------------------------------------- what content decides


def test_extension_less_and_unknown_extension_text_is_indexed_as_text(run_cli, tmp_path):
    folder = tmp_path / "etc-like"
    write(folder / "README.Debian", "Debian notes: the wombatcache package needs a restart\n")
    write(folder / "LICENSE", "Permission is hereby granted, free of charge\n")
    write(folder / "kb.service", "[Unit]\nDescription=numbatd daemon\n")
    write(folder / "tool.8", ".TH TOOL 8\n.SH NAME\ntool \\- the dugongctl helper\n")
    result = run_cli("add", str(folder), "--json")
    assert result.code == 0, result.err
    assert {d["display_name"]: (d["status"], d["format"]) for d in json.loads(result.out)} == {
        "README.Debian": ("Indexed", "text"),
        "LICENSE": ("Indexed", "text"),
        "kb.service": ("Indexed", "text"),
        "tool.8": ("Indexed", "text"),
    }
    for word in ("wombatcache", "numbatd", "dugongctl"):
        assert found(run_cli, word), word


def test_a_binary_named_txt_is_refused_with_its_reason(run_cli, tmp_path):
    binary = tmp_path / "binary.txt"
    shutil.copyfile(sys.executable, binary)  # an ELF executable
    alone = run_cli("add", str(binary))
    assert alone.code == 1
    assert alone.err.strip() == f"kbtui: {binary}: not added, its content is not text (binary_content)"
    assert json.loads(run_cli("sources", "--json").out) == []  # never registered

    folder = tmp_path / "mixed"
    folder.mkdir()
    shutil.copyfile(sys.executable, folder / "binary.txt")
    write(folder / "notes.txt", "plain notes\n")
    listed = run_cli("add", str(folder), "--list")
    assert listed.code == 0, listed.err
    assert "1 added, 1 skipped (1 binary_content)" in listed.out
    assert "skipped:binary_content" in listed.out
    assert set(documents()) == {"notes.txt"}


# ---------------------------------------------------------------- one rule set for every source


def test_links_out_of_the_folder_and_key_files_are_skipped_with_their_reasons(run_cli, tmp_path):
    outside = write(tmp_path / "outside" / "secret.txt", f"{CANARY} outside the folder\n")
    folder = tmp_path / "notes"
    write(folder / "readme.md", "# Notes\n\nthe real notes\n")
    (folder / "notes.txt").symlink_to(outside)
    (folder / "etc").symlink_to(outside.parent, target_is_directory=True)
    write(folder / "shadow", f"root:{CANARY}:19000::::::\n")
    write(folder / "id_rsa", f"-----BEGIN OPENSSH PRIVATE KEY-----\n{CANARY}\n")
    write(folder / "certs" / "server.pem", f"{CANARY}\n")
    write(folder / ".env", f"TOKEN={CANARY}\n")

    result = run_cli("add", str(folder), "--json")
    assert result.code == 0, result.err
    scan = json.loads(run_cli("sync", "--dry-run", "--list", "--json").out)[0]
    assert {f["path"]: f["reason"] for f in scan["files"] if f["outcome"] == "skipped"} == {
        "notes.txt": "symlink",
        "etc": "symlink",
        "shadow": "sensitive",
        "id_rsa": "sensitive",
        "certs/server.pem": "sensitive",
        ".env": "sensitive",
    }
    assert set(documents()) == {"readme.md"}
    assert CANARY not in chunk_text()


def test_include_sensitive_is_the_only_way_in_and_stays_with_the_source(run_cli, tmp_path):
    folder = tmp_path / "keys"
    write(folder / "id_rsa", "the sealionkey material\n")
    write(folder / "notes.md", "# Keys\n\nwhere the keys live\n")
    assert run_cli("add", str(folder)).code == 0
    assert set(documents()) == {"notes.md"}
    assert run_cli("add", str(folder), "--include-sensitive").code == 0
    assert set(documents()) == {"id_rsa", "notes.md"}
    assert json.loads(run_cli("sources", "--json").out)[0]["include_sensitive"] is True
    assert run_cli("sync").code == 0
    assert set(documents()) == {"id_rsa", "notes.md"}
    single = run_cli("add", str(folder / "id_rsa"))
    assert single.code == 2 and "--include-sensitive" in single.err


def test_a_gitignore_in_a_plain_folder_is_honoured(run_cli, tmp_path):
    folder = tmp_path / "project"
    write(folder / ".gitignore", "*.log\nscratch/\n!keep.log\n")
    write(folder / "app.log", "ignored log\n")
    write(folder / "keep.log", "the kept log line\n")
    write(folder / "scratch" / "draft.md", "# Draft\n\nignored draft\n")
    write(folder / "docs" / ".gitignore", "private.md\n")
    write(folder / "docs" / "private.md", "# Private\n\nignored too\n")
    write(folder / "docs" / "public.md", "# Public\n\nshown\n")
    result = run_cli("add", str(folder))
    assert result.code == 0, result.err
    assert set(documents()) == {"keep.log", "docs/public.md"}
    assert "3 gitignored" in result.out


@pytest.mark.timeout(120)
def test_a_hostile_folder_finishes_and_reports_each_problem(home, tmp_path):
    folder = tmp_path / "hostile"
    write(folder / "good.md", "# Good\n\nthe good file\n")
    (folder / "loop-a").symlink_to(folder / "loop-b")
    (folder / "loop-b").symlink_to(folder / "loop-a")
    (folder / "self").symlink_to(folder, target_is_directory=True)
    os.mkfifo(folder / "pipe.md")
    write(folder / "locked.md", "# Locked\n\nnobody may read this\n").chmod(0)
    write(folder / "vanishing.md", "# Gone\n\ngone before it is read\n")
    # Deleted after the listing, before it is read: the seam the tests of the scan use.
    hook = tmp_path / "hook.py"
    hook.write_text(
        "import os, runpy, sys\n"
        "from kbtui.sources import scan\n"
        "examine = scan.SourceScan._examine\n"
        "def deleting(self, raw, *args):\n"
        "    if raw == b'vanishing.md':\n"
        "        os.unlink(self.root / 'vanishing.md')\n"
        "    return examine(self, raw, *args)\n"
        "scan.SourceScan._examine = deleting\n"
        "sys.argv = ['kbtui', *sys.argv[1:]]\n"
        "runpy.run_module('kbtui', run_name='__main__')\n"
    )
    # As root, permission bits are no obstacle: drop the capabilities that bypass them.
    prefix = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"] if os.geteuid() == 0 else []
    if prefix and shutil.which("setpriv") is None:
        pytest.skip("needs setpriv to make a file unreadable for root")
    done = subprocess.run(
        [*prefix, sys.executable, str(hook), "add", str(folder), "--list", "--json"],
        env=kbtui_env(home), capture_output=True, text=True, timeout=90,
    )
    assert done.returncode == 1, done.stderr  # two files could not be read
    assert "Traceback" not in done.stderr
    assert sorted(done.stderr.strip().splitlines()) == sorted([
        f"kbtui: {folder / 'locked.md'}: not added, it cannot be read",
        f"kbtui: {folder / 'vanishing.md'}: not added, it no longer exists",
    ])
    assert [d["display_name"] for d in json.loads(done.stdout)] == ["good.md"]
    listing = subprocess.run(
        [sys.executable, "-m", "kbtui", "sync", "--dry-run", "--list", "--json"],
        env=kbtui_env(home), capture_output=True, text=True, timeout=90,
    )
    scan = json.loads(listing.stdout)[0]
    reasons = {f["path"]: f["reason"] for f in scan["files"] if f["outcome"] == "skipped"}
    assert reasons == {"loop-a": "symlink", "loop-b": "symlink", "self": "symlink", "pipe.md": "not_regular"}


def test_a_dry_run_writes_nothing_not_even_a_data_directory(run_cli, home, tmp_path):
    folder = runbooks(tmp_path / "runbooks")
    write(folder / "id_rsa", "key\n")
    result = run_cli("add", str(folder), "--dry-run", "--list")
    assert result.code == 0, result.err
    assert "dry run" in result.out and "2 added, 1 skipped (1 sensitive)" in result.out
    assert "skipped:sensitive" in result.out and "id_rsa" in result.out
    assert not home.exists()
    run_cli("add", str(folder))
    write(folder / "restart.md", "# Restart\n\nchanged\n")
    planned = run_cli("add", str(folder), "--dry-run")
    assert "1 updated, 1 unchanged" in planned.out
    assert documents()["restart.md"].status == "Indexed"
    assert "zephyrgate" in chunk_text(), "the dry run changed nothing"


def test_sources_lists_and_removes_with_its_documents(run_cli, tmp_path):
    folder = runbooks(tmp_path / "runbooks")
    run_cli("add", str(folder), "-c", "ops")
    run_cli("add", str(folder / "restart.md"))
    listed = json.loads(run_cli("sources", "--json").out)
    assert [(s["kind"], s["collection"], s["name"], s["documents"]) for s in listed] == [
        ("folder", "OPS", "runbooks", {"Indexed": 2}),
        ("file", "DEFAULT", "restart.md", {"Indexed": 1}),
    ]
    assert all(s["last_scan_status"] == "completed" and s["watch"] == "idle" for s in listed)
    human = run_cli("sources").out
    assert "runbooks" in human and "2 indexed" in human
    removed = run_cli("sources", "rm", "runbooks")
    assert removed.code == 0 and "2 document(s) purged" in removed.out
    assert [s["name"] for s in json.loads(run_cli("sources", "--json").out)] == ["restart.md"]
    assert json.loads(run_cli("search", "nightly", "-c", "ops", "--json").out)["hits"] == []


def test_bytes_without_a_path_keep_content_de_duplication(home):
    from tests.faults.processes import kbtui

    first = kbtui(home, "add", "-", "--name", "note.txt", "--json", input="the bytes of a piped llamanote\n")
    again = kbtui(home, "add", "-", "--name", "other.txt", "--json", input="the bytes of a piped llamanote\n")
    assert first.returncode == 0 and again.returncode == 0, first.stderr + again.stderr
    [created], [found] = json.loads(first.stdout), json.loads(again.stdout)
    assert created["created"] is True and found["created"] is False
    assert created["document_id"] == found["document_id"] and created["source_path"] is None
    binary = kbtui(home, "add", "-", input="\x00\x01\x02" * 100)
    assert binary.returncode == 2 and "binary_content" in binary.stderr


def test_a_file_appended_to_without_end_keeps_a_bounded_history(node, tmp_path):
    """Each append is indexed again, and each round adds a handful of history
    rows (about 20 a second for a busy log): only the newest are kept."""
    from store.catalog import HISTORY_PER_DOCUMENT
    from store.models import StatusHistory

    log_file = tmp_path / "service.log"
    log_file.write_text("line 0\n", encoding="utf-8")
    source = node.add_source(log_file, "DEFAULT")
    (document_id,) = source.report.pending_document_ids
    for round_number in range(1, 21):
        assert node.ingest(document_id) == "Indexed"
        with log_file.open("a", encoding="utf-8") as out:
            out.write(f"line {round_number}\n")
        os.utime(log_file, ns=(time.time_ns() + round_number * 10**9,) * 2)  # a new time each round, as a busy log has
        assert node.sync_source(source.row.source.id).updated.count == 1
    assert node.ingest(document_id) == "Indexed"
    history = list(StatusHistory.select().where(StatusHistory.document == document_id).order_by(StatusHistory.id))
    assert len(history) == HISTORY_PER_DOCUMENT  # 20 rounds wrote over a hundred
    assert history[-1].status == "Indexed"
    shown = node.detail(document_id).history
    assert len(shown) == HISTORY_PER_DOCUMENT and shown[-1].status == "Indexed"
