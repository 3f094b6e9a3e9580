"""Catalog behaviour on a real SQLite file and real encrypted blobs."""

from __future__ import annotations

import os
import time

from store import catalog
from store.blobs import DocumentLabel
from store.db import database
from store.fts import integrity_check
from store.migrations import LATEST_VERSION, _migrations
from store.models import Chunk, Document, Section, StatusHistory, Vector
from tests.conftest import write


def _add(node, path, collection="DEFAULT"):
    return catalog.add_document(node.store, collection, path, display_name=path.name, fmt="markdown")


def test_the_database_runs_in_wal_mode_with_foreign_keys(node):
    assert database.execute_sql("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert database.execute_sql("PRAGMA foreign_keys").fetchone()[0] == 1
    assert database.execute_sql("PRAGMA busy_timeout").fetchone()[0] >= 5000
    versions = database.execute_sql("SELECT version FROM schema_version").fetchall()
    # Every migration shipped, in order (numbers are handed out ahead, so there may be gaps).
    assert versions == [(number,) for number, _, _ in _migrations()] and versions[-1] == (LATEST_VERSION,)


def test_the_same_bytes_twice_in_a_collection_are_one_document(node, tmp_path):
    first = _add(node, write(tmp_path / "a.md", "# Same\n\nidentical content"))
    second = _add(node, write(tmp_path / "copy-of-a.md", "# Same\n\nidentical content"))
    assert first.created and not second.created
    assert second.document_id == first.document_id
    assert Document.select().count() == 1
    assert node.store.blobs.blob_ids() == {first.document_id}


def test_the_same_bytes_in_another_collection_are_another_document(node, tmp_path):
    path = write(tmp_path / "a.md", "# Same\n\nidentical content")
    first = _add(node, path, "DEFAULT")
    other = _add(node, path, "OPS")
    assert other.created and other.document_id != first.document_id


def test_re_adding_a_failed_document_queues_it_again(node, tmp_path):
    path = write(tmp_path / "a.md", "# T\n\nbody")
    added = _add(node, path)
    catalog.set_status(added.document_id, catalog.Status.FAILED, reason="extract_corrupt")
    again = _add(node, path)
    assert again.status == "Pending"
    assert Document.get_by_id(added.document_id).failure_reason is None


def test_purge_leaves_no_row_and_no_blob(node, tmp_path):
    added = _add(node, write(tmp_path / "a.md", "# T\n\n" + "words and more words. " * 200))
    assert node.ingest(added.document_id) == "Indexed"
    assert Chunk.select().count() > 1
    assert catalog.purge_document(node.store, added.document_id)
    for model in (Document, Chunk, Section, Vector, StatusHistory):
        assert model.select().count() == 0, model.__name__
    assert database.execute_sql("SELECT count(*) FROM chunk_fts WHERE chunk_fts MATCH 'words'").fetchone()[0] == 0
    assert integrity_check()
    assert node.store.blobs.blob_ids() == set()
    assert catalog.purge_document(node.store, added.document_id) is None


def test_orphan_sweep_removes_the_blobs_of_removed_documents_only(node, tmp_path):
    kept = _add(node, write(tmp_path / "a.md", "# T\n\nkept"))
    removed = _add(node, write(tmp_path / "b.md", "# T\n\nremoved"))
    # A crash between the delete commit and the blob unlink: the row is gone, the blob is not.
    with database.atomic():
        database.execute_sql("DELETE FROM status_history WHERE document_id = ?", (removed.document_id,))
        database.execute_sql("DELETE FROM document WHERE id = ?", (removed.document_id,))
    node.store.blobs.write_bytes(
        "1" * 32, b"a source this catalog has never heard of", label=DocumentLabel("DEFAULT", "x", None, "text")
    )
    (node.store.blobs.root / ".tmp-interrupted-write").write_bytes(b"half a blob")
    old = time.time() - 3600
    for path in node.store.blobs.root.iterdir():
        os.utime(path, (old, old))

    assert catalog.sweep_orphan_blobs(node.store) == 2  # the removed document's blob and the temp file
    # Silence is no proof: a blob without a row, however old, is kept (the
    # catalog may be older than the blobs).
    assert node.store.blobs.blob_ids() == {kept.document_id, "1" * 32}
    assert database.execute_sql("SELECT count(*) FROM removed_document").fetchone()[0] == 0
    assert catalog.sweep_orphan_blobs(node.store) == 0


def test_start_up_reset_returns_stuck_documents_to_pending(node, tmp_path):
    added = _add(node, write(tmp_path / "a.md", "# T\n\nbody"))
    catalog.set_status(added.document_id, catalog.Status.EMBEDDING)
    assert catalog.reset_non_terminal() == 1
    assert Document.get_by_id(added.document_id).status == "Pending"
    assert catalog.pending_document_ids() == [added.document_id]


def test_commit_after_delete_writes_nothing(node, tmp_path):
    from kbtui.chunking import chunk_document
    from kbtui.extract import extract

    added = _add(node, write(tmp_path / "a.md", "# T\n\nbody text"))
    sections, chunks = chunk_document(added.document_id, extract(b"# T\n\nbody text", "markdown"))
    catalog.purge_document(node.store, added.document_id)
    vectors = node.embedder.embed_documents([c.contextual_content for c in chunks])
    result = catalog.commit_index(
        added.document_id, sections=sections, chunks=chunks, vectors=vectors,
        identity=node.embedder.identity.canonical(), parser_version=1, chunker_version=1,
    )
    assert result is None
    assert Chunk.select().count() == 0 and Document.select().count() == 0


def test_a_document_being_reindexed_keeps_serving_until_it_fails(node, tmp_path):
    added = _add(node, write(tmp_path / "a.md", "# T\n\nthe quokka handbook"))
    assert node.ingest(added.document_id) == "Indexed"

    def found() -> bool:
        return any(h.document_id == added.document_id for h in node.search("quokka", "DEFAULT").hits)

    catalog.set_status(added.document_id, catalog.Status.EMBEDDING)
    assert found(), "the previous index serves while the new one is built"
    catalog.set_status(added.document_id, catalog.Status.FAILED, reason="embedder_unavailable")
    assert not found(), "a Failed document serves nothing"
