"""The hnswlib index per identity: kept in step with commits and deletes,
saved and loaded from real files under the data directory, rebuilt (never
trusted) when a file is damaged or belongs to another database, safe under
concurrent queries and inserts, compacted when mostly deleted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from store import catalog
from store.ann import INDEX_DIR_NAME, IndexSettings, VectorIndexes
from tests.store.vector_corpus import (
    DIM,
    GRAPH_ONLY,
    IDENTITY,
    add_document,
    commit,
    unit_vectors,
)


def test_deleted_and_reindexed_chunks_leave_the_index(node, tmp_path, rng):
    data = unit_vectors(rng, 600)
    gone, gone_ids = add_document(node, tmp_path, "gone", data[:200])
    changed, old_ids = add_document(node, tmp_path, "changed", data[200:400])
    add_document(node, tmp_path, "kept", data[400:])
    indexes = VectorIndexes(node.config.home, GRAPH_ONLY)
    assert indexes.search(data[0], IDENTITY, "DEFAULT", limit=1)[0][0] == gone_ids[0]

    indexes.note_removed(catalog.purge_document(node.store, gone))
    new_ids = commit(changed, data[200:400], salt="v2")
    indexes.note_committed(new_ids)

    index = indexes.index_for(IDENTITY, DIM)
    assert index.consistency().consistent
    hit_ids = {c for q in data[:400:20] for c, _ in indexes.search(q, IDENTITY, "DEFAULT", limit=10)}
    assert not hit_ids & (set(gone_ids) | set(old_ids))
    assert indexes.search(data[200], IDENTITY, "DEFAULT", limit=1)[0][0] == new_ids[0]
    indexes.close()


def test_rows_committed_by_another_process_are_caught_up_before_a_query(node, tmp_path, rng):
    data = unit_vectors(rng, 300)
    add_document(node, tmp_path, "first", data[:200])
    indexes = VectorIndexes(node.config.home, GRAPH_ONLY)
    assert indexes.search(data[0], IDENTITY, "DEFAULT", limit=1)
    _, later = add_document(node, tmp_path, "later", data[200:])  # no note_committed
    assert indexes.search(data[250], IDENTITY, "DEFAULT", limit=1)[0][0] == later[50]
    indexes.close()


def saved_files(home: Path) -> list[Path]:
    return sorted((home / INDEX_DIR_NAME).glob("*.hnsw"))


def test_a_saved_index_is_loaded_and_caught_up_not_rebuilt(node, tmp_path, rng):
    data = unit_vectors(rng, 500)
    add_document(node, tmp_path, "a", data[:300])
    indexes = VectorIndexes(node.config.home, GRAPH_ONLY)
    indexes.search(data[0], IDENTITY, "DEFAULT", limit=5)
    indexes.close()
    (first_file,) = saved_files(node.config.home)

    reopened = VectorIndexes(node.config.home, GRAPH_ONLY)
    assert reopened.search(data[0], IDENTITY, "DEFAULT", limit=1)
    reopened.save()
    assert saved_files(node.config.home) == [first_file]  # unchanged: nothing rebuilt or rewritten
    _, later = add_document(node, tmp_path, "b", data[300:])
    assert reopened.search(data[400], IDENTITY, "DEFAULT", limit=1)[0][0] == later[100]
    reopened.close()
    assert saved_files(node.config.home) != [first_file]
    assert VectorIndexes(node.config.home, GRAPH_ONLY).index_for(IDENTITY, DIM).ensure_open()


@pytest.mark.parametrize("damage", ["delete", "truncate", "flip", "sidecar", "garbage-sidecar"])
def test_a_missing_or_damaged_index_file_is_rebuilt_never_trusted(node, tmp_path, rng, damage, caplog):
    data = unit_vectors(rng, 400)
    _, ids = add_document(node, tmp_path, "a", data)
    indexes = VectorIndexes(node.config.home, GRAPH_ONLY)
    indexes.search(data[0], IDENTITY, "DEFAULT", limit=5)
    indexes.close()
    (path,) = saved_files(node.config.home)
    sidecar = next((node.config.home / INDEX_DIR_NAME).glob("*.json"))
    if damage == "delete":
        path.unlink()
    elif damage == "truncate":
        with open(path, "r+b") as handle:
            handle.truncate(path.stat().st_size // 2)
    elif damage == "flip":
        raw = bytearray(path.read_bytes())
        raw[len(raw) // 2] ^= 0x40  # one silent bit: hnswlib itself would load it
        path.write_bytes(bytes(raw))
    elif damage == "sidecar":
        sidecar.unlink()
    else:
        sidecar.write_text("{not json", encoding="utf-8")

    reopened = VectorIndexes(node.config.home, GRAPH_ONLY)
    with caplog.at_level("INFO", logger="store.ann_files"):
        assert reopened.search(data[123], IDENTITY, "DEFAULT", limit=1)[0][0] == ids[123]
    if damage in ("truncate", "flip"):
        assert "rebuilding" in caplog.text
    assert reopened.index_for(IDENTITY, DIM).consistency().consistent
    reopened.close()
    # It was rebuilt from the database (and saved anew), not loaded.
    (rebuilt,) = saved_files(node.config.home)
    assert rebuilt.name != path.name


def test_an_index_from_another_database_is_rebuilt(node, tmp_path, rng):
    data = unit_vectors(rng, 200)
    add_document(node, tmp_path, "a", data)
    indexes = VectorIndexes(node.config.home, GRAPH_ONLY)
    indexes.search(data[0], IDENTITY, "DEFAULT", limit=5)
    indexes.close()
    # A fresh database (chunk ids start again at 1) beside the old index files:
    # everything else goes too, since a new catalog is made only in a fresh directory.
    node.store.close()
    for name in ("kb.sqlite3", "node.key", "node.fingerprint"):
        (node.config.home / name).unlink()
    for leftover in node.config.home.glob("kb.sqlite3-*"):
        leftover.unlink()
    for blob in (node.config.home / "blobs").iterdir():
        blob.unlink()
    from store import open_store

    node.store = open_store(node.config.home)
    fresh = unit_vectors(np.random.default_rng(99), 200)
    _, ids = add_document(node, tmp_path, "fresh", fresh)
    reopened = VectorIndexes(node.config.home, GRAPH_ONLY)
    assert reopened.search(fresh[17], IDENTITY, "DEFAULT", limit=1)[0][0] == ids[17]
    reopened.close()


def test_queries_and_inserts_from_two_threads_do_not_interfere(node, tmp_path, rng):
    data = unit_vectors(rng, 1200)
    add_document(node, tmp_path, "base", data[:400])
    indexes = VectorIndexes(node.config.home, GRAPH_ONLY)
    indexes.search(data[0], IDENTITY, "DEFAULT", limit=5)
    errors: list[BaseException] = []
    stop = threading.Event()

    def query_loop() -> None:
        try:
            while not stop.is_set():
                for query in data[:50]:
                    indexes.search(query, IDENTITY, "DEFAULT", limit=10)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    worker = threading.Thread(target=query_loop, daemon=True)
    worker.start()
    try:
        for part in range(1, 9):
            add_document(node, tmp_path, f"more{part}", data[300 + part * 100 : 400 + part * 100])
            indexes.note_committed()
    finally:
        stop.set()
        worker.join()
    assert not errors
    assert indexes.index_for(IDENTITY, DIM).consistency().consistent
    indexes.close()


KILL_DURING_SAVE = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from store import open_store
    from store.ann import IndexSettings, VectorIndexes
    home = Path(sys.argv[1])
    store = open_store(home)
    indexes = VectorIndexes(home, IndexSettings(exact_scan_min_rows=0, exact_scan_fraction=0.0,
                                                inline_build_max_rows=100_000))
    index = indexes.index_for(sys.argv[2], int(sys.argv[3]))
    index.ensure_open()
    print("ready", flush=True)
    graph = index._graph
    while True:
        graph.changed = True
        index.save()
    """
)


def test_a_kill_during_save_leaves_a_loadable_or_rebuildable_index(node, tmp_path, rng):
    data = unit_vectors(rng, 3000)
    _, ids = add_document(node, tmp_path, "a", data)
    root = Path(__file__).resolve().parents[2]
    for attempt in range(4):
        child = subprocess.Popen(
            [sys.executable, "-c", KILL_DURING_SAVE, str(node.config.home), IDENTITY, str(DIM)],
            stdout=subprocess.PIPE,
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(root)},
        )
        assert child.stdout.readline().strip() == b"ready"
        time.sleep(0.05 + 0.07 * attempt)
        child.send_signal(signal.SIGKILL)
        child.wait()
        reopened = VectorIndexes(node.config.home, GRAPH_ONLY)
        assert reopened.search(data[2999], IDENTITY, "DEFAULT", limit=1)[0][0] == ids[2999]
        assert reopened.index_for(IDENTITY, DIM).consistency().consistent
        reopened.close()
        assert len(saved_files(node.config.home)) == 1  # leftovers of the killed save are gone
        assert not list((node.config.home / INDEX_DIR_NAME).glob("*.tmp"))


def test_a_mostly_deleted_graph_is_compacted_in_the_background(node, tmp_path, rng):
    data = unit_vectors(rng, 1200)
    documents = [add_document(node, tmp_path, f"d{i}", data[i * 300 : (i + 1) * 300]) for i in range(4)]
    settings = IndexSettings(exact_scan_min_rows=0, exact_scan_fraction=0.0, inline_build_max_rows=1000)
    indexes = VectorIndexes(node.config.home, settings)
    index = indexes.index_for(IDENTITY, DIM)
    assert indexes.search(data[0], IDENTITY, "DEFAULT", limit=1)
    for document_id, _ in documents[:3]:
        indexes.note_removed(catalog.purge_document(node.store, document_id))
    assert index.wait_ready(30)
    while index.stats().building:
        time.sleep(0.01)
    stats = index.stats()
    assert stats.elements == stats.live == 300  # rebuilt without the deleted elements
    kept = documents[3][1]
    assert indexes.search(data[1050], IDENTITY, "DEFAULT", limit=1)[0][0] == kept[150]
    assert index.consistency().consistent
    indexes.close()
