"""Disk full, on the database and on the blob directory: nothing half written,
a clear error, and the node carries on when space returns (HOSTILE-CASES 17)."""

from __future__ import annotations

import dataclasses
import errno
import json
import shutil
import subprocess

import peewee
import pytest

from kbtui.chunking import chunk_document
from kbtui.config import Config
from kbtui.extract import extract
from kbtui.node import Node
from store import catalog
from store.blobs import BlobStore
from store.db import database
from store.errors import is_disk_full
from store.fts import integrity_check
from store.models import Chunk, Document, Vector
from tests.actors.conftest import all_indexed, statuses, wait_until
from tests.conftest import write
from tests.faults.processes import kbtui, one_line


def test_a_full_database_rolls_the_index_transaction_back(node, tmp_path):
    text = "# Big\n\n" + " ".join(f"word{i}" for i in range(40_000))
    path = write(tmp_path / "big.md", text)
    added = catalog.add_document(node.store, "DEFAULT", path, display_name="big.md", fmt="markdown")
    sections, chunks = chunk_document(added.document_id, extract(text.encode(), "markdown"))
    vectors = node.embedder.embed_documents([c.contextual_content for c in chunks])

    pages = database.execute_sql("PRAGMA page_count").fetchone()[0]
    database.execute_sql(f"PRAGMA max_page_count = {pages + 4}")
    with pytest.raises(peewee.OperationalError) as raised:
        catalog.commit_index(
            added.document_id, sections=sections, chunks=chunks, vectors=vectors,
            identity=node.embedder.identity.canonical(), parser_version=1, chunker_version=1,
        )
    assert is_disk_full(raised.value)
    assert Chunk.select().count() == 0 and Vector.select().count() == 0
    assert Document.get_by_id(added.document_id).status == "Pending"
    assert integrity_check()

    database.execute_sql("PRAGMA max_page_count = 1073741823")  # space returns
    assert catalog.commit_index(
        added.document_id, sections=sections, chunks=chunks, vectors=vectors,
        identity=node.embedder.identity.canonical(), parser_version=1, chunker_version=1,
    )
    assert Document.get_by_id(added.document_id).status == "Indexed"


def test_a_full_blob_directory_fails_the_add_cleanly(run_cli, home, tmp_path, monkeypatch):
    write(tmp_path / "kept.md", "# Kept\n\nalready stored")
    assert run_cli("add", str(tmp_path / "kept.md")).code == 0
    before = json.loads(run_cli("ls", "--json").out)

    original = BlobStore.seal

    def enospc_midway(self, blob_id, source, **kwargs):
        class FullDisk:
            """Reads fine, but the disk fills after the first segment is written."""

            def __init__(self) -> None:
                self.reads = 0

            def read(self, size: int = -1) -> bytes:
                self.reads += 1
                if self.reads > 1:
                    raise OSError(errno.ENOSPC, "No space left on device")
                return source.read(size)

        return original(self, blob_id, FullDisk(), **kwargs)

    write(tmp_path / "new.md", "# New\n\n" + "not enough room " * 20_000)
    with monkeypatch.context() as patched:
        patched.setattr(BlobStore, "seal", enospc_midway)
        result = run_cli("add", str(tmp_path / "new.md"))
    assert result.code == 2
    assert "no space left" in result.err and result.err.strip().count("\n") == 0
    assert json.loads(run_cli("ls", "--json").out) == before
    assert sorted(p.name for p in (home / "blobs").iterdir()) == [before[0]["document_id"]]


@pytest.fixture
def small_disk(tmp_path):
    """A real 6 MiB tmpfs where this machine allows mounting one, else None."""
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    mounted = shutil.which("mount") and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount_point)], capture_output=True
    ).returncode == 0
    yield mount_point if mounted else None
    if mounted:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def fill(directory) -> None:
    filler = directory / "filler"
    # Unbuffered: a buffered file keeps the bytes that did not fit and fails
    # again on close, whenever the free space is not a multiple of the block.
    with open(filler, "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


def test_the_node_carries_on_when_space_returns(small_disk, tmp_path, monkeypatch):
    if small_disk is None:
        pytest.skip("mounting a tmpfs is not permitted here; the simulated-ENOSPC tests above cover the paths")
    home = small_disk / "kb"
    monkeypatch.setenv("KBTUI_HOME", str(home))
    node = Node.open(dataclasses.replace(Config.load(home), embedding_provider="hash", storage_retry_s=0.3,
                                         drain_sweep_interval_s=0.1))
    try:
        ids = []
        for i in range(3):
            path = write(tmp_path / f"doc{i}.md", f"# Doc {i}\n\n" + " ".join(f"term{i}x{j}" for j in range(15_000)))
            ids.append(catalog.add_document(node.store, "DEFAULT", path, display_name=path.name, fmt="markdown").document_id)
        fill(small_disk)
        with node.pipeline():
            wait_until(lambda: any(
                d.failure_reason in ("storage_full",) or d.status == "Pending"
                for d in Document.select().where(Document.id.in_(ids))
            ), timeout=60)
            assert "Indexed" not in statuses(ids).values() or not all_indexed(ids)()
            (small_disk / "filler").unlink()  # space returns
            wait_until(all_indexed(ids), timeout=120)
        assert database.execute_sql("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert integrity_check()
        assert Chunk.select().count() == sum(d.chunk_count for d in Document.select())
    finally:
        node.close()


def test_a_disk_that_fills_during_an_add_says_how_many_documents_were_stored(small_disk, tmp_path):
    """Not "nothing was changed": the documents stored before the disk filled
    are there as Pending, and the one line says how many."""
    if small_disk is None:
        pytest.skip("mounting a tmpfs is not permitted here")
    home = small_disk / "kb"
    for number in range(300):  # about 18 KB each: far more than the 6 MiB disk holds
        write(tmp_path / "docs" / f"d{number:03}.md", f"# Doc {number}\n\n" + " ".join(f"w{j}" for j in range(3000)))
    added = kbtui(home, "add", str(tmp_path / "docs"))
    assert added.returncode == 2
    line = one_line(added.stderr)
    listed = json.loads(kbtui(home, "ls", "--json").stdout)
    assert listed and {d["status"] for d in listed} == {"Pending"}
    assert line == (
        f"kbtui: no space left for the data directory (disk full); {len(listed)} document(s) stored as Pending "
        "before it stopped; they will be indexed when there is space"
    )
