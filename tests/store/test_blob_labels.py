"""Every blob's sealed label follows its document: written with it, renamed
with it, replaced with its bytes; old blobs get one when re-indexed or upgraded."""

from __future__ import annotations

import hashlib

from store.blob_labels import upgrade_legacy_blobs
from store.blobs import DocumentLabel, StoredLabel
from store.db import thread_connection
from tests.conftest import write
from tests.store.legacy_blobs import write_legacy_blob


def _label(node, document_id: str) -> StoredLabel:
    with node.store.blobs.open(document_id) as blob:
        stored = blob.label()
    assert stored is not None
    return stored


def test_a_source_documents_blob_names_its_collection_path_format_and_bytes(node, tmp_path):
    folder = tmp_path / "notes"
    write(folder / "guides" / "runbook.md", "# Runbook\nrestart the service\n")
    node.add_source(folder, "ops")
    (row,) = node.documents("ops")
    stored = _label(node, row.document_id)
    assert stored.label == DocumentLabel("ops", "guides/runbook.md", "guides/runbook.md", "markdown")
    assert stored.content_hash == hashlib.sha256(b"# Runbook\nrestart the service\n").hexdigest()


def test_a_rename_and_an_edit_reach_the_label(node, tmp_path):
    folder = tmp_path / "notes"
    write(folder / "a.md", "# A\nfirst text\n")
    sync = node.add_source(folder, "ops")
    (row,) = node.documents("ops")
    (folder / "a.md").rename(folder / "moved.md")
    node.sync_source(sync.row.source.id)
    assert _label(node, row.document_id).label.source_path == "moved.md"
    assert _label(node, row.document_id).label.display_name == "moved.md"
    write(folder / "moved.md", "# A\nsecond text, longer\n")
    node.sync_source(sync.row.source.id)
    assert _label(node, row.document_id).content_hash == hashlib.sha256(b"# A\nsecond text, longer\n").hexdigest()


def test_an_upload_names_its_display_name_and_no_path(node):
    outcome = node.add_upload(b"plain words\n", "DEFAULT", display_name="clip board.txt")
    assert _label(node, outcome.document_id).label == DocumentLabel("DEFAULT", "clip board.txt", None, "text")


def test_re_indexing_gives_an_old_blob_its_label(node):
    data = b"an old document about backups\n"
    outcome = node.add_upload(data, "DEFAULT", display_name="old.txt")
    node.ingest(outcome.document_id)
    write_legacy_blob(node.store.blobs.root, node.store.node_key, outcome.document_id, data)
    assert node.store.blobs.format_version(outcome.document_id) == 1
    node.reindex([outcome.document_id])
    assert node.ingest(outcome.document_id) == "Indexed"
    assert node.store.blobs.format_version(outcome.document_id) == 2
    assert _label(node, outcome.document_id).label == DocumentLabel("DEFAULT", "old.txt", None, "text")


def test_upgrade_labels_every_old_blob_and_lists_damaged_ones(node):
    ids = []
    for n in range(3):
        data = f"document number {n}\n".encode()
        outcome = node.add_upload(data, "DEFAULT", display_name=f"doc{n}.txt")
        write_legacy_blob(node.store.blobs.root, node.store.node_key, outcome.document_id, data)
        ids.append(outcome.document_id)
    current = node.add_upload(b"already new\n", "DEFAULT", display_name="new.txt").document_id
    node.store.blobs.path_for(ids[2]).write_bytes(b"KBTB\x01" + b"\x00" * 60)  # damaged
    with thread_connection():
        report = upgrade_legacy_blobs(node.store)
    assert (report.upgraded, report.current, report.skipped, report.damaged) == (2, 1, 0, (ids[2],))
    assert [node.store.blobs.format_version(i) for i in (*ids[:2], current)] == [2, 2, 2]
    assert _label(node, ids[0]).label == DocumentLabel("DEFAULT", "doc0.txt", None, "text")
    assert node.store.blobs.path_for(ids[2]).read_bytes() == b"KBTB\x01" + b"\x00" * 60


def test_upgrade_also_mends_a_label_a_failed_relabel_left_behind(node):
    data = b"notes\n"
    document_id = node.add_upload(data, "DEFAULT", display_name="now.txt").document_id
    stale = DocumentLabel("DEFAULT", "before-the-rename.txt", None, "text")
    assert node.store.blobs.reseal(document_id, stale, expected_sha256=hashlib.sha256(data).hexdigest())
    with thread_connection():
        report = upgrade_legacy_blobs(node.store)
    assert (report.upgraded, report.current) == (1, 0)
    assert _label(node, document_id).label == DocumentLabel("DEFAULT", "now.txt", None, "text")
