"""The vector store: exact search, identity isolation and the hnswlib index per identity.

Vectors are committed through the real catalog into a real SQLite file; the
ANN index is saved to and loaded from real files under the data directory.
"""

from __future__ import annotations

import hashlib
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

from kbtui.chunking import ChunkSpec
from store import catalog
from store.vectors import (
    INDEX_DIR_NAME,
    IndexSettings,
    VectorIndexes,
    exact_search,
    top_k,
)

IDENTITY = "test:unit-vectors@0000:native:32"
OTHER_IDENTITY = "test:other-model@1111:native:32"
DIM = 32
# Force the graph path on small data: no exact scan of small scopes, inline builds.
GRAPH_ONLY = IndexSettings(exact_scan_min_rows=0, exact_scan_fraction=0.0, inline_build_max_rows=100_000)


def unit_vectors(rng: np.random.Generator, count: int, dim: int = DIM) -> np.ndarray:
    # Clustered, like real sentence embeddings (and unlike uniform noise).
    centres = rng.standard_normal((8, dim))
    points = centres[rng.integers(0, 8, count)] + 0.6 * rng.standard_normal((count, dim))
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


def specs(document_id: str, count: int, salt: str = "") -> list[ChunkSpec]:
    out = []
    for i in range(count):
        text = f"chunk {i} of {document_id}{salt}"
        out.append(
            ChunkSpec(
                chunk_uid=hashlib.sha256(f"{document_id}|{salt}|{i}".encode()).hexdigest(),
                ordinal=i,
                section_ordinal=0,
                content=text,
                contextual_content=text,
                content_hash=hashlib.sha256(text.encode()).hexdigest(),
                heading_path="",
                kind="prose",
                language=None,
                symbol=None,
                page=None,
                start_offset=0,
                end_offset=len(text),
                token_estimate=4,
            )
        )
    return out


def add_document(node, tmp_path: Path, name: str, vectors: np.ndarray, *, collection="DEFAULT", identity=IDENTITY):
    source = tmp_path / f"{name}.txt"
    source.write_text(f"document {name}", encoding="utf-8")
    outcome = catalog.add_document(node.store, collection, source, display_name=source.name, fmt="text")
    ids = commit(outcome.document_id, vectors, identity=identity)
    return outcome.document_id, ids


def commit(document_id: str, vectors: np.ndarray, *, identity=IDENTITY, salt: str = "") -> list[int]:
    return catalog.commit_index(
        document_id,
        sections=[],
        chunks=specs(document_id, len(vectors), salt),
        vectors=vectors,
        identity=identity,
        parser_version=1,
        chunker_version=1,
    )


def recall_at_10(indexes: VectorIndexes, queries: np.ndarray, collection: str = "DEFAULT") -> float:
    found = 0
    for query in queries:
        truth = {c for c, _ in exact_search(query, IDENTITY, collection, limit=10)}
        got = {c for c, _ in indexes.search(query, IDENTITY, collection, limit=10)}
        found += len(truth & got)
    return found / (10 * len(queries))


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(7)


def test_top_k_is_best_first_and_fast_on_mostly_equal_scores():
    scores = np.zeros(200_000, np.float32)
    scores[[5, 70_000, 199_999]] = [0.3, 0.9, 0.5]
    assert top_k(scores, 3).tolist() == [70_000, 199_999, 5]
    assert top_k(scores, 5).tolist()[:3] == [70_000, 199_999, 5]
    assert top_k(np.array([0.1, 0.7], np.float32), 10).tolist() == [1, 0]


def test_graph_search_agrees_with_exact_search(node, tmp_path, rng):
    data = unit_vectors(rng, 1500)
    for part in range(3):
        add_document(node, tmp_path, f"doc{part}", data[part * 500 : (part + 1) * 500])
    indexes = VectorIndexes(node.config.home, GRAPH_ONLY)
    assert recall_at_10(indexes, unit_vectors(rng, 30)) >= 0.95
    indexes.close()


def test_search_is_confined_to_the_collection_on_every_path(node, tmp_path, rng):
    data = unit_vectors(rng, 1200)
    _, big_ids = add_document(node, tmp_path, "big", data[:1000], collection="BIG")
    _, small_ids = add_document(node, tmp_path, "small", data[1000:], collection="SMALL")
    for settings in (GRAPH_ONLY, IndexSettings(inline_build_max_rows=100_000)):
        indexes = VectorIndexes(node.config.home, settings)
        for query in unit_vectors(rng, 10):
            small = indexes.search(query, IDENTITY, "SMALL", limit=10)
            big = indexes.search(query, IDENTITY, "BIG", limit=10)
            assert len(small) == 10 and {c for c, _ in small} <= set(small_ids)
            assert len(big) == 10 and {c for c, _ in big} <= set(big_ids)
            assert [c for c, _ in small] == [c for c, _ in exact_search(query, IDENTITY, "SMALL", limit=10)]
        assert indexes.search(data[0], IDENTITY, "NOWHERE", limit=10) == []
        indexes.close()


def test_vectors_of_another_identity_or_width_are_never_compared(node, tmp_path, rng):
    data = unit_vectors(rng, 400)
    _, mine = add_document(node, tmp_path, "mine", data[:200])
    _, theirs = add_document(node, tmp_path, "theirs", data[200:], identity=OTHER_IDENTITY)
    _, wide = add_document(node, tmp_path, "wide", unit_vectors(rng, 50, 48), identity="test:unit-vectors@0000:native:48")
    indexes = VectorIndexes(node.config.home, GRAPH_ONLY)
    for query in data[200:210]:  # exact copies of the other identity's vectors
        hits = indexes.search(query, IDENTITY, "DEFAULT", limit=20)
        assert hits and {c for c, _ in hits} <= set(mine)
        assert {c for c, _ in indexes.search(query, OTHER_IDENTITY, "DEFAULT", limit=20)} <= set(theirs)
    # A query of another width never reaches vectors of this identity's width.
    narrow_hits = indexes.search(unit_vectors(rng, 1, 48)[0], IDENTITY, "DEFAULT", limit=20)
    assert narrow_hits == []
    assert not set(wide) & {c for c, _ in indexes.search(data[0], IDENTITY, "DEFAULT", limit=50)}
    indexes.close()


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


def test_a_failed_document_is_not_served_by_the_graph(node, tmp_path, rng):
    data = unit_vectors(rng, 300)
    failing, ids = add_document(node, tmp_path, "failing", data[:100])
    add_document(node, tmp_path, "fine", data[100:])
    indexes = VectorIndexes(node.config.home, GRAPH_ONLY)
    catalog.set_status(failing, catalog.Status.FAILED, reason="extract_failed")
    hits = indexes.search(data[0], IDENTITY, "DEFAULT", limit=10)
    assert len(hits) == 10 and not {c for c, _ in hits} & set(ids)
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
    with caplog.at_level("INFO", logger="store.vectors"):
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
    from store.vectors import IndexSettings, VectorIndexes
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
    indexes = VectorIndexes(node.config.home, IndexSettings(exact_scan_min_rows=0, exact_scan_fraction=0.0, inline_build_max_rows=1000))
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
