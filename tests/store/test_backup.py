"""The backup's consistency: what changes while the blobs are copied is settled
as the node would settle it; what a backup holds besides the catalog's
documents; one backup at a time per destination."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from contextlib import closing

import pytest

import store.backup as backup_module
from kbtui.config import Config
from kbtui.node import Node
from store.backup import MARKER_NAME, take_backup, verify_backup
from store.blobs import DocumentLabel
from store.errors import KeyProblem, StoreError
from store.file_lock import FileLock
from store.restore import restore_backup
from tests.conftest import write


def rows(home, sql, params=()):
    with closing(sqlite3.connect(home / "kb.sqlite3")) as connection:
        return connection.execute(sql, params).fetchall()


@pytest.fixture
def indexed(node, tmp_path):
    folder = tmp_path / "notes"
    for name in ("a", "b", "c"):
        write(folder / f"{name}.md", f"# {name}\n\nthe {name}-note about valves\n")
    sync = node.add_source(folder, "DEFAULT")
    ids = {row.source_path: row.document_id for row in node.documents()}
    assert set(node.index(list(ids.values())).values()) == {"Indexed"}
    return folder, sync.row.source.id, ids


def test_a_delete_and_an_update_while_the_blobs_are_copied_are_settled_as_the_node_would(
    node, indexed, tmp_path, monkeypatch
):
    folder, source_id, ids = indexed
    real_copy = backup_module.copy_catalog

    def copy_then_change(home, directory):
        copied = real_copy(home, directory)
        node.remove([ids["a.md"]])
        write(folder / "b.md", "# b\n\nthe b-note, rewritten after the catalog was copied\n")
        node.sync_source(source_id)
        return copied

    monkeypatch.setattr(backup_module, "copy_catalog", copy_then_change)
    report = take_backup(node.config.home, tmp_path / "bk", node.store.node_key)
    assert (report.settled.removed, report.settled.updated) == ((ids["a.md"],), (ids["b.md"],))
    assert verify_backup(tmp_path / "bk", node.store.node_key).ok

    restored = tmp_path / "restored"
    (tmp_path / "key").write_bytes(node.store.node_key)
    restore_backup(restored, tmp_path / "bk", key_file=tmp_path / "key")
    new_hash = hashlib.sha256((folder / "b.md").read_bytes()).hexdigest()
    assert rows(restored, "SELECT source_path, status, content_hash = ?, chunk_count FROM document ORDER BY 1", (new_hash,)) == [
        ("b.md", "Pending", 1, 1),  # queued on its new bytes; its old index serves meanwhile
        ("c.md", "Indexed", 0, 1),
    ]
    assert rows(restored, "SELECT count(*) FROM chunk_fts WHERE document_id = ?", (ids["a.md"],)) == [(0,)]
    again = Node.open(Config.load(restored))
    try:
        assert again.index([ids["b.md"]]) == {ids["b.md"]: "Indexed"}
        assert again.search("rewritten", "DEFAULT", per_document=True).hits[0].document_id == ids["b.md"]
    finally:
        again.close()


def test_old_sources_the_catalog_does_not_know_are_kept_and_adds_in_flight_left_out(node, indexed, tmp_path):
    label = DocumentLabel("DEFAULT", "x.txt", None, "text")
    old, young = "a" * 32, "b" * 32
    node.store.blobs.write_bytes(old, b"left by an add cut short long ago", label=label)
    node.store.blobs.write_bytes(young, b"an add whose row is not written yet", label=label)
    hour_ago = time.time() - 3600
    os.utime(node.store.blobs.path_for(old), (hour_ago, hour_ago))
    report = take_backup(node.config.home, tmp_path / "bk", node.store.node_key)
    assert report.unknown_blobs == 1
    manifest = json.loads((tmp_path / "bk" / "manifest.json").read_text())
    assert {(b["id"], b["in_catalog"]) for b in manifest["blobs"] if not b["in_catalog"]} == {(old, False)}
    assert young not in {b["id"] for b in manifest["blobs"]}


def test_one_backup_at_a_time_writes_a_destination(node, indexed, tmp_path):
    partial = tmp_path / "bk.partial"
    partial.mkdir()
    with FileLock.acquire(partial / MARKER_NAME):  # another backup is writing there
        with pytest.raises(StoreError, match="another kbtui backup"):
            take_backup(node.config.home, tmp_path / "bk", node.store.node_key)
        assert partial.exists()
    take_backup(node.config.home, tmp_path / "bk", node.store.node_key)  # left by a dead one: replaced
    assert not partial.exists() and verify_backup(tmp_path / "bk", node.store.node_key).ok


def test_an_incremental_backup_never_mixes_two_knowledge_bases(node, indexed, tmp_path):
    take_backup(node.config.home, tmp_path / "bk", node.store.node_key)
    with pytest.raises(KeyProblem, match="does not match this backup"):
        take_backup(node.config.home, tmp_path / "bk", os.urandom(32), incremental=True)
