"""The store's contract: what the domain may rely on from any ``kbtui.ports.Storage``.

One parametrised fixture opens each store, SQLite in a fresh data directory
and PostgreSQL in a fresh database of the test server, and every test below
runs on both through the interfaces alone (the one exception: damaging a
stored blob, which needs the backend's own hands).
"""

from __future__ import annotations

import hashlib
import io
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psycopg
import pytest

from kbtui.chunking import ChunkSpec, SectionSpec
from kbtui.ports import Storage
from store import open_postgres_store, open_store
from store.blobs import DocumentLabel
from store.errors import BlobCorrupt, NotFound, SourceAlreadyRegistered, Superseded
from store.records import FileState, Status

IDENTITY = "test:contract@0000:native:8"
DIM = 8


@dataclass
class Opened:
    storage: Storage
    tamper: Callable[[str], None]  # damage one stored blob the backend's way
    reopen: Callable[[], Storage]


def _flip_a_byte_in_file(home: Path) -> Callable[[str], None]:
    def tamper(blob_id: str) -> None:
        path = home / "blobs" / blob_id
        data = bytearray(path.read_bytes())
        data[-5] ^= 0x01
        path.write_bytes(bytes(data))

    return tamper


def _flip_a_byte_in_row(url: str) -> Callable[[str], None]:
    def tamper(blob_id: str) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            record = bytearray(
                conn.execute("SELECT record FROM blob_segment WHERE blob_id = %s AND counter = 0", (blob_id,)).fetchone()[0]
            )
            record[-5] ^= 0x01
            conn.execute(
                "UPDATE blob_segment SET record = %s WHERE blob_id = %s AND counter = 0", (bytes(record), blob_id)
            )

    return tamper


@pytest.fixture(params=["sqlite", "postgresql"])
def opened(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opened]:
    home = tmp_path / "kbhome"
    stores: list[Storage] = []
    if request.param == "sqlite":
        def reopen() -> Storage:
            for store in stores:
                store.close()
            stores.append(open_store(home))
            return stores[-1]

        tamper = _flip_a_byte_in_file(home)
    else:
        url = request.getfixturevalue("postgres_url")

        def reopen() -> Storage:
            for store in stores:
                store.close()
            stores.append(open_postgres_store(home, url))
            return stores[-1]

        tamper = _flip_a_byte_in_row(url)
    storage = reopen()
    try:
        yield Opened(storage, tamper, reopen)
    finally:
        stores[-1].close()


@pytest.fixture
def storage(opened: Opened) -> Storage:
    return opened.storage


# ---------------------------------------------------------------- helpers


def chunks_of(name: str, texts: list[str], *, section: int = 0, heading: str = "", symbol: str | None = None) -> list[ChunkSpec]:
    return [
        ChunkSpec(
            chunk_uid=hashlib.sha256(f"{name}|{i}|{text}".encode()).hexdigest(), ordinal=i, section_ordinal=section,
            content=text, contextual_content=text, content_hash=hashlib.sha256(f"{heading}|{text}".encode()).hexdigest(),
            heading_path=heading, kind="prose", language=None, symbol=symbol, page=None, start_offset=0,
            end_offset=len(text), token_estimate=max(1, len(text) // 4),
        )
        for i, text in enumerate(texts)
    ]


def unit(*values: float) -> np.ndarray:
    vector = np.zeros(DIM, np.float32)
    vector[: len(values)] = values
    return vector / np.linalg.norm(vector)


def add(storage: Storage, text: str, collection: str = "DEFAULT", name: str = "doc.md") -> str:
    outcome = storage.catalog.add_upload(collection, text.encode(), display_name=name, fmt="markdown")
    assert outcome.created
    return outcome.document_id


def index(
    storage: Storage, document_id: str, texts: list[str], vectors: list[np.ndarray] | None = None, **spec: object
) -> list[int]:
    chunks = chunks_of(document_id, texts, **spec)  # type: ignore[arg-type]
    matrix = np.stack(vectors) if vectors else np.stack([unit(1, i + 1) for i in range(len(texts))])
    ids = storage.catalog.commit_index(
        document_id, sections=[SectionSpec(0, "Guide", 1, 0, 100, None)], chunks=chunks, vectors=matrix,
        identity=IDENTITY, parser_version=3, chunker_version=2,
    )
    assert ids is not None
    storage.vectors.note_committed(ids)
    return ids


def state(size: int = 10) -> FileState:
    return FileState(size=size, mtime_ns=1, ctime_ns=1, inode=7, device=9, checked_ns=time.time_ns())


# ---------------------------------------------------------------- adding


def test_a_file_added_twice_to_a_collection_is_one_document(storage: Storage, tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    path.write_text("# Same\n\nidentical content")
    copy = tmp_path / "copy.md"
    copy.write_text("# Same\n\nidentical content")
    first = storage.catalog.add_document("DEFAULT", path, display_name="a.md", fmt="markdown")
    second = storage.catalog.add_document("DEFAULT", copy, display_name="copy.md", fmt="markdown")
    elsewhere = storage.catalog.add_document("OPS", path, display_name="a.md", fmt="markdown")
    assert first.created and not second.created and second.document_id == first.document_id
    assert elsewhere.created and elsewhere.document_id != first.document_id
    assert storage.blobs.blob_ids() == {first.document_id, elsewhere.document_id}
    assert storage.blobs.read_bytes(first.document_id) == path.read_bytes()
    assert sorted(storage.catalog.list_collections()) == ["DEFAULT", "OPS"]
    assert storage.catalog.collection_exists("OPS") and not storage.catalog.collection_exists("NOPE")


def test_an_upload_is_identified_by_its_content_and_a_failed_one_queues_again(storage: Storage) -> None:
    first = storage.catalog.add_upload("DEFAULT", b"bytes", display_name="one.txt", fmt="text")
    assert storage.catalog.set_status(first.document_id, Status.FAILED, reason="extract_corrupt")
    again = storage.catalog.add_upload("DEFAULT", b"bytes", display_name="two.txt", fmt="text")
    assert (again.document_id, again.created, again.status) == (first.document_id, False, "Pending")
    assert [h.status for h in storage.catalog.history(first.document_id)] == ["Pending", "Failed", "Pending"]
    assert storage.catalog.history(first.document_id)[1].reason == "extract_corrupt"


def test_a_file_that_changes_while_it_is_added_stores_nothing(storage: Storage) -> None:
    from store.blobs import FileChanged

    with pytest.raises(FileChanged):
        storage.catalog.create_document(
            "DEFAULT", io.BytesIO(b"what was read"), content_hash="0" * 64, display_name="x.md", fmt="markdown"
        )
    assert storage.catalog.documents() == [] and storage.blobs.blob_ids() == set()


# ---------------------------------------------------------------- reading


def test_documents_are_read_by_id_prefix_status_and_name(storage: Storage) -> None:
    ids = [add(storage, f"text {i}", name=f"secret-{i}.md") for i in range(3)]
    other = add(storage, "elsewhere", "OPS")
    assert storage.catalog.document(ids[0]).status == "Pending"  # type: ignore[union-attr]
    assert storage.catalog.document("0" * 32) is None
    assert [d.id for d in storage.catalog.documents("DEFAULT")] == ids
    assert [d.id for d in storage.catalog.documents(document_ids=[ids[2], other, "missing", ids[0]])] == [ids[2], other, ids[0]]
    storage.catalog.set_status(ids[1], Status.FAILED, reason="no_text")
    assert [d.id for d in storage.catalog.documents(status="Failed")] == [ids[1]]
    assert storage.catalog.statuses([ids[0], ids[1], "missing"]) == {ids[0]: "Pending", ids[1]: "Failed"}
    assert storage.catalog.status_counts() == {"Pending": 3, "Failed": 1}
    assert storage.catalog.status_counts("OPS") == {"Pending": 1}
    assert storage.catalog.display_names(ids[:2]) == {ids[0]: "secret-0.md", ids[1]: "secret-1.md"}
    assert storage.catalog.catalog_stamp("DEFAULT")[0] == 3
    assert storage.catalog.resolve_document(ids[0][:10]).id == ids[0]
    assert storage.catalog.resolve_document(ids[0].upper()).id == ids[0]
    with pytest.raises(NotFound):
        storage.catalog.resolve_document(other, "DEFAULT")
    assert ids[0] in storage.catalog.document_ids_with_prefix(ids[0][:4], "DEFAULT", 5)
    assert storage.catalog.document_ids_with_prefix(other[:8], "DEFAULT", 5) == []
    since = storage.catalog.document(ids[1]).updated_at  # type: ignore[union-attr]
    assert ids[1] in [d.id for d in storage.catalog.documents(updated_since=since)]


# ---------------------------------------------------------------- status and the index commit


def test_a_status_write_is_refused_for_a_missing_document_or_other_bytes(storage: Storage) -> None:
    document_id = add(storage, "body")
    held = storage.catalog.document(document_id).content_hash  # type: ignore[union-attr]
    assert not storage.catalog.set_status("0" * 32, Status.EXTRACTING)
    assert not storage.catalog.set_status(document_id, Status.EXTRACTING, content_hash="f" * 64)
    assert storage.catalog.set_status(document_id, Status.EXTRACTING, content_hash=held, progress=0.2)
    row = storage.catalog.document(document_id)
    assert row is not None and (row.status, row.progress) == ("Extracting", 0.2)


def test_the_index_commit_makes_chunks_text_and_vectors_visible_at_once(storage: Storage) -> None:
    document_id = add(storage, "rotation")
    assert storage.chunks.served_chunks([1, 2, 3], "DEFAULT") == {}
    ids = index(storage, document_id, ["rotate the certificates", "restore the database", "third chunk"])
    row = storage.catalog.document(document_id)
    assert row is not None
    assert (row.status, row.chunk_count, row.vector_identity, row.vector_dim, row.parser_version) == (
        "Indexed", 3, IDENTITY, DIM, 3
    )
    served = storage.chunks.served_chunks(ids, "DEFAULT")
    assert [served[i].text for i in ids] == ["rotate the certificates", "restore the database", "third chunk"]
    assert served[ids[0]].document_id == document_id and served[ids[0]].collection_id == "DEFAULT"
    assert [hit for hit, _ in storage.lexical.ranked_matches(["database"], "DEFAULT", limit=5)] == [ids[1]]
    assert storage.vectors.search(unit(1, 2), IDENTITY, "DEFAULT", limit=1)[0][0] == ids[1]
    assert storage.catalog.indexed_chunk_total("DEFAULT") == 3
    assert storage.chunks.sections(document_id)[0].heading_path == "Guide"
    assert [s.text for s in storage.chunks.chunk_summaries(document_id, 2)] == ["rotate the certificates", "restore the database"]
    assert storage.chunks.section_openers(ids) == {i: ids[0] for i in ids}

    # A re-index replaces everything in one go.
    again = index(storage, document_id, ["only one chunk now"])
    assert storage.chunks.served_chunks(ids, "DEFAULT") == {}
    assert [c.text for c in storage.chunks.document_chunks(document_id, "DEFAULT")] == ["only one chunk now"]
    assert storage.lexical.ranked_matches(["database"], "DEFAULT", limit=5) == []
    assert not set(again) & set(ids)  # chunk ids are never reused


def test_a_commit_for_other_bytes_or_a_deleted_document_writes_nothing(storage: Storage) -> None:
    document_id = add(storage, "body")
    ids = index(storage, document_id, ["kept chunk"])
    with pytest.raises(Superseded):
        storage.catalog.commit_index(
            document_id, sections=[], chunks=chunks_of("x", ["new chunk"]), vectors=np.stack([unit(1)]),
            identity=IDENTITY, parser_version=3, chunker_version=2, content_hash="f" * 64,
        )
    assert list(storage.chunks.served_chunks(ids, "DEFAULT")) == ids
    assert storage.catalog.purge_document(document_id) == ids
    assert storage.catalog.commit_index(
        document_id, sections=[], chunks=chunks_of("x", ["late chunk"]), vectors=np.stack([unit(1)]),
        identity=IDENTITY, parser_version=3, chunker_version=2,
    ) is None
    assert storage.catalog.document(document_id) is None


# ---------------------------------------------------------------- scope and what is served


def test_every_read_is_scoped_to_its_collection(storage: Storage) -> None:
    mine = add(storage, "mine")
    theirs = add(storage, "theirs", "OPS")
    my_ids = index(storage, mine, ["shared word alpha"])
    their_ids = index(storage, theirs, ["shared word beta"], vectors=[unit(1, 1)])
    assert list(storage.chunks.served_chunks(my_ids + their_ids, "DEFAULT")) == my_ids
    assert [hit for hit, _ in storage.lexical.ranked_matches(["shared"], "OPS", limit=5)] == their_ids
    assert [hit for hit, _ in storage.vectors.search(unit(1, 1), IDENTITY, "DEFAULT", limit=5)] == my_ids
    assert storage.lexical.newest_matches(["shared", "word"], "OPS", limit=5, window=100) == their_ids
    uid = storage.chunks.served_chunks(their_ids, "OPS")[their_ids[0]].chunk_id
    assert storage.chunks.neighbours(uid, "DEFAULT", 2) == []
    assert storage.chunks.served_document(theirs, "DEFAULT") is None
    assert storage.chunks.served_document(theirs, "OPS") == (theirs, "OPS", "")
    assert list(storage.chunks.document_chunks(theirs, "DEFAULT")) == []
    assert storage.chunks.served_chunks(my_ids, "DEFAULT", document_id=theirs) == {}


def test_a_failed_document_serves_nothing_in_any_arm(storage: Storage) -> None:
    document_id = add(storage, "body")
    ids = index(storage, document_id, ["rotation of certificates", "以及数据库备份的方法"])
    uid = storage.chunks.served_chunks(ids, "DEFAULT")[ids[0]].chunk_id
    assert storage.lexical.cjk_ranked_matches(["数据库"], "DEFAULT", limit=5)[0][0] == ids[1]
    storage.catalog.set_status(document_id, Status.FAILED, reason="embed_failed")
    assert storage.chunks.served_chunks(ids, "DEFAULT") == {}
    assert storage.lexical.ranked_matches(["rotation"], "DEFAULT", limit=5) == []
    assert storage.lexical.newest_matches(["rotation"], "DEFAULT", limit=5, window=100) == []
    assert storage.lexical.cjk_ranked_matches(["数据库"], "DEFAULT", limit=5) == []
    assert storage.lexical.cjk_substring_matches("备份", "DEFAULT", limit=5, window=100) == []
    assert storage.vectors.search(unit(1, 1), IDENTITY, "DEFAULT", limit=5) == []
    assert storage.chunks.neighbours(uid, "DEFAULT", 3) == []
    assert storage.chunks.served_document(document_id, "DEFAULT") is None
    assert list(storage.chunks.document_chunks(document_id, "DEFAULT")) == []


def test_a_document_re_indexing_keeps_serving_its_committed_index(storage: Storage) -> None:
    document_id = add(storage, "body")
    ids = index(storage, document_id, ["still served while pending"])
    storage.catalog.mark_pending([document_id])
    assert storage.catalog.document(document_id).status == "Pending"  # type: ignore[union-attr]
    assert list(storage.chunks.served_chunks(ids, "DEFAULT")) == ids
    assert storage.catalog.pending_document_ids() == [document_id]


def test_neighbours_and_the_text_of_a_document_come_in_order(storage: Storage) -> None:
    document_id = add(storage, "body")
    texts = [f"chunk number {i}" for i in range(7)]
    ids = index(storage, document_id, texts)
    middle = storage.chunks.served_chunks([ids[3]], "DEFAULT")[ids[3]].chunk_id
    assert [c.text for c in storage.chunks.neighbours(middle, "DEFAULT", 2)] == texts[1:6]
    first = storage.chunks.served_chunks([ids[0]], "DEFAULT")[ids[0]].chunk_id
    assert [c.ordinal for c in storage.chunks.neighbours(first, "DEFAULT", 1)] == [0, 1]
    assert [c.text for c in storage.chunks.document_chunks(document_id, "DEFAULT")] == texts
    # A reader that stops early lets go of what it held.
    reader = storage.chunks.document_chunks(document_id, "DEFAULT")
    assert next(reader).text == texts[0]
    reader.close()  # type: ignore[attr-defined]
    assert storage.catalog.purge_document(document_id) == ids


# ---------------------------------------------------------------- the arms


def test_the_lexical_arm_ranks_by_bm25_over_weighted_columns(storage: Storage) -> None:
    document_id = add(storage, "body")
    ids = index(
        storage, document_id,
        ["the restore of a database backup", "restore restore restore everything", "unrelated words here"],
        heading="Backups", symbol="restore_database",
    )
    ranked = storage.lexical.ranked_matches(["restore", "backup"], "DEFAULT", limit=5)
    # Said three times in the body, "restore" outweighs a body that also holds "backup".
    assert [hit for hit, _ in ranked][:1] == [ids[1]] and {hit for hit, _ in ranked} == set(ids)
    assert all(score > 0 for _, score in ranked)
    # The heading and symbol columns count: every chunk holds "restore" there.
    assert storage.lexical.term_row_counts(["restore", "absent"], 10, generation=storage.lexical.indexed_chunk_count()) == {
        "restore": 3, "absent": 0,
    }
    rows, average = storage.lexical.bm25_statistics()
    assert rows == 3 and average > 0
    counts = storage.lexical.row_token_counts(ids)
    assert set(counts) == set(ids) and all(n > 0 for n in counts.values())
    texts = storage.lexical.column_texts([ids[2]])
    assert texts[ids[2]] == ("", "Backups", "restore_database", "unrelated words here")
    assert storage.lexical.COLUMN_WEIGHTS == (4.0, 3.0, 3.0, 1.0)
    assert storage.lexical.ranked_matches(["restore"], "DEFAULT", document_id="0" * 32, limit=5) == []


def test_the_vector_arm_compares_only_within_one_identity(storage: Storage) -> None:
    document_id = add(storage, "body")
    ids = index(storage, document_id, ["a", "b", "c"], vectors=[unit(1, 0), unit(0, 1), unit(1, 1)])
    hits = storage.vectors.search(unit(1, 0.1), IDENTITY, "DEFAULT", limit=2)
    assert [hit for hit, _ in hits] == [ids[0], ids[2]] and hits[0][1] > hits[1][1]
    assert storage.vectors.search(unit(1, 0), "other:model@1:native:8", "DEFAULT", limit=2) == []
    stored = storage.vectors.stored_vectors(ids, IDENTITY, DIM)
    assert np.allclose(stored[ids[1]], unit(0, 1))
    assert storage.vectors.stored_vectors(ids, IDENTITY, DIM + 1) == {}
    spec = chunks_of(document_id, ["b"])[0]
    reused = storage.vectors.committed_vectors(
        [spec.content_hash], identity=IDENTITY, dim=DIM, parser_version=3, chunker_version=2
    )
    assert np.allclose(reused[spec.content_hash], unit(0, 1))
    assert storage.vectors.committed_vectors(
        [spec.content_hash], identity=IDENTITY, dim=DIM, parser_version=4, chunker_version=2
    ) == {}
    assert storage.vectors.search(unit(1, 0), IDENTITY, "DEFAULT", document_id=document_id, limit=5)[0][0] == ids[0]
    storage.vectors.save()


# ---------------------------------------------------------------- purge and the queue


def test_a_purge_removes_every_trace_of_a_document(storage: Storage) -> None:
    document_id = add(storage, "body")
    ids = index(storage, document_id, ["purged words"])
    removed = storage.catalog.purge_document(document_id)
    assert removed == ids
    storage.vectors.note_removed(removed)
    assert storage.catalog.document(document_id) is None
    assert document_id not in storage.blobs.blob_ids()
    assert storage.chunks.served_chunks(ids, "DEFAULT") == {}
    assert storage.lexical.ranked_matches(["purged"], "DEFAULT", limit=5) == []
    assert storage.lexical.bm25_statistics()[0] == 0
    assert storage.vectors.search(unit(1, 1), IDENTITY, "DEFAULT", limit=5) == []
    assert storage.catalog.purge_document(document_id) is None
    assert storage.catalog.sweep_orphan_blobs() == 0


def test_the_queue_of_record(storage: Storage) -> None:
    first, second, third = (add(storage, f"doc {i}") for i in range(3))
    assert storage.catalog.pending_document_ids() == [first, second, third]
    assert storage.catalog.pending_document_ids(limit=2) == [first, second]
    storage.catalog.set_status(first, Status.EMBEDDING, progress=0.6)
    storage.catalog.set_status(second, Status.FAILED, reason="no_text")
    assert storage.catalog.reset_non_terminal() == 1
    assert storage.catalog.document(first).progress == 0.0  # type: ignore[union-attr]
    assert storage.catalog.pending_document_ids() == [first, third]
    index(storage, third, ["old parser"])
    # Built by another parser, or failed as no_text under an older one: stale.
    assert set(storage.catalog.stale_document_ids(parser_version=4, chunker_version=2, vector_identity=None, limit=10)) == {
        third, second,
    }
    assert storage.catalog.stale_document_ids(parser_version=3, chunker_version=2, vector_identity=IDENTITY, limit=10) == [
        second
    ]
    storage.catalog.record_extraction(second, 3, [])
    assert storage.catalog.stale_document_ids(parser_version=3, chunker_version=2, vector_identity=IDENTITY, limit=10) == []


# ---------------------------------------------------------------- OCR records


@dataclass(frozen=True)
class Page:
    page: int
    confidence: float | None
    words: int
    seconds: float
    reason: str | None


def test_ocr_records_are_replaced_at_each_extraction(storage: Storage) -> None:
    scanned = add(storage, "scan")
    other = add(storage, "other", "OPS")
    storage.catalog.record_extraction(scanned, 5, [Page(2, 0.4, 10, 0.5, None), Page(1, None, 0, 0.2, "ocr_no_text")])
    storage.catalog.record_extraction(other, 5, [Page(1, 0.95, 30, 0.4, None)])
    assert [(p.page, p.confidence, p.reason) for p in storage.catalog.ocr_pages(scanned)] == [
        (1, None, "ocr_no_text"), (2, 0.4, None),
    ]
    assert storage.catalog.low_confidence_document_ids(0.6) == [scanned]
    assert storage.catalog.low_confidence_document_ids(0.6, "OPS") == []
    assert storage.catalog.ocr_pages_read_recently("DEFAULT") == 1
    storage.catalog.record_extraction(scanned, 6, [Page(1, 0.9, 12, 0.1, None)])
    assert [(p.page, p.confidence) for p in storage.catalog.ocr_pages(scanned)] == [(1, 0.9)]
    storage.catalog.record_extraction("0" * 32, 6, [Page(1, 0.9, 12, 0.1, None)])  # gone: nothing recorded
    storage.catalog.purge_document(scanned)
    assert storage.catalog.ocr_pages(scanned) == []


# ---------------------------------------------------------------- sources


def test_a_source_finds_its_documents_by_path_and_follows_edits_and_renames(storage: Storage, tmp_path: Path) -> None:
    root = str(tmp_path / "notes")
    source = storage.sources.register_source(
        kind="folder", root=root, collection_id="DEFAULT", name="notes", root_identity=(9, 7)
    )
    assert source.root == root and source.name == "notes" and source.root_identity == (9, 7)
    with pytest.raises(SourceAlreadyRegistered):
        storage.sources.register_source(kind="folder", root=root, collection_id="DEFAULT", name="again")
    assert storage.sources.find_source(root, "DEFAULT") == source
    assert storage.sources.find_source(root, "OPS") is None
    assert [s.id for s in storage.sources.sources_at(root)] == [source.id]
    assert storage.sources.resolve_source("notes").id == source.id
    assert storage.sources.resolve_source(source.id[:8]).id == source.id

    data = b"# Runbook\n\nrotation steps"
    document_id = storage.sources.add_source_document(
        source.id, "DEFAULT", source_path="ops/runbook.md", display_name="ops/runbook.md", fmt="markdown", data=data,
        content_hash=hashlib.sha256(data).hexdigest(), state=state(len(data)),
    )
    held = storage.sources.documents_of(source.id)
    assert list(held) == ["ops/runbook.md"] and held["ops/runbook.md"].document_id == document_id
    look = held["ops/runbook.md"].state
    assert look is not None and (look.size, look.inode, look.device) == (len(data), 7, 9)
    assert storage.catalog.document_at("DEFAULT", "ops/runbook.md").id == document_id  # type: ignore[union-attr]
    ids = index(storage, document_id, ["rotation steps"])
    assert storage.sources.document_counts() == {source.id: {"Indexed": 1}}

    edited = b"# Runbook\n\nnew rotation steps"
    assert storage.sources.update_source_document(
        document_id, fmt="markdown", data=edited, content_hash=hashlib.sha256(edited).hexdigest(), state=state(30)
    )
    assert storage.blobs.read_bytes(document_id) == edited
    assert storage.catalog.document(document_id).status == "Pending"  # type: ignore[union-attr]
    assert list(storage.chunks.served_chunks(ids, "DEFAULT")) == ids  # the old index serves meanwhile

    assert storage.sources.move_source_document(document_id, source_path="archive/runbook.md", state=state(30))
    assert list(storage.sources.documents_of(source.id)) == ["archive/runbook.md"]
    assert storage.catalog.display_names([document_id]) == {document_id: "archive/runbook.md"}
    assert storage.chunks.served_chunks(ids, "DEFAULT")[ids[0]].source_path == "archive/runbook.md"
    # The path column of the lexical index follows the rename.
    assert [hit for hit, _ in storage.lexical.ranked_matches(["archive"], "DEFAULT", limit=5)] == ids
    assert storage.lexical.ranked_matches(["ops"], "DEFAULT", limit=5) == []
    assert storage.lexical.term_row_counts(["archive", "ops"], 10, generation=0) == {"archive": 1, "ops": 0}
    assert not storage.sources.move_source_document("0" * 32, source_path="x.md", state=state())

    storage.sources.record_file_state(document_id, state(31))
    assert storage.sources.documents_of(source.id)["archive/runbook.md"].state.size == 31  # type: ignore[union-attr]


def test_a_source_that_cannot_be_seen_flags_itself_and_the_documents_it_kept(storage: Storage, tmp_path: Path) -> None:
    source = storage.sources.register_source(kind="folder", root=str(tmp_path / "mnt"), collection_id="DEFAULT", name="mnt")
    kept = [
        storage.sources.add_source_document(
            source.id, "DEFAULT", source_path=f"f{i}.md", display_name=f"f{i}.md", fmt="markdown", data=f"x{i}".encode(),
            content_hash=hashlib.sha256(f"x{i}".encode()).hexdigest(), state=state(),
        )
        for i in range(2)
    ]
    storage.sources.record_reachability(source.id, reason="root_replaced", documents={kept[0]: "root_replaced"})
    flagged = storage.sources.get_source(source.id)
    assert flagged.unreachable_reason == "root_replaced" and flagged.unreachable_since is not None
    assert storage.sources.unreachable_documents() == {source.id: {kept[0]: "root_replaced"}}
    # A flag already raised keeps its first time.
    storage.sources.record_reachability(
        source.id, reason="root_empty", documents={kept[0]: "root_empty", kept[1]: "unreadable"}, root_identity=(1, 2)
    )
    again = storage.sources.get_source(source.id)
    assert again.unreachable_since == flagged.unreachable_since and again.root_identity == (1, 2)
    assert storage.sources.unreachable_documents(source.id) == {source.id: {kept[0]: "root_empty", kept[1]: "unreadable"}}
    storage.sources.record_reachability(source.id, reason=None, documents={})
    seen = storage.sources.get_source(source.id)
    assert seen.unreachable_reason is None and seen.unreachable_since is None
    assert storage.sources.unreachable_documents() == {}


def test_a_source_forgotten_without_purge_leaves_its_documents_loose(storage: Storage, tmp_path: Path) -> None:
    source = storage.sources.register_source(kind="git", root=str(tmp_path / "repo"), collection_id="DEFAULT", name="repo")
    storage.sources.set_watching(source.id, False)
    storage.sources.set_include_sensitive(source.id, True)
    storage.sources.set_watch_state({source.id: "polling"})
    storage.sources.record_scan(source.id, "completed", report_json='{"files": []}', last_commit="abc123")
    scanned = storage.sources.get_source(source.id)
    assert (scanned.watching, scanned.include_sensitive, scanned.watch_state, scanned.last_commit) == (
        False, True, "polling", "abc123"
    )
    assert storage.sources.last_scan_report(source.id) == '{"files": []}'
    assert storage.sources.registration_stamp() == ((source.id, False, True),)
    assert storage.sources.watched_sources() == []
    storage.sources.clear_watch_states()
    assert storage.sources.get_source(source.id).watch_state is None
    document_id = storage.sources.add_source_document(
        source.id, "DEFAULT", source_path="README.md", display_name="README.md", fmt="markdown", data=b"readme",
        content_hash=hashlib.sha256(b"readme").hexdigest(), state=state(),
    )
    with pytest.raises(Exception, match="stays in its collection"):
        storage.sources.move_to_collection(source.id, "OPS")
    assert storage.sources.unregister_source(source.id) == 0
    with pytest.raises(NotFound):
        storage.sources.get_source(source.id)
    loose = storage.sources.loose_document_at("DEFAULT", "README.md")
    assert loose is not None and loose.document_id == document_id
    again = storage.sources.register_source(kind="git", root=str(tmp_path / "repo"), collection_id="DEFAULT", name="repo")
    storage.sources.adopt_document(again.id, document_id)
    assert list(storage.sources.documents_of(again.id)) == ["README.md"]
    purged: list[str] = []
    assert storage.sources.unregister_source(again.id, purge=lambda d: purged.append(d) or True) == 1
    assert purged == [document_id]
    assert storage.sources.list_sources() == []


# ---------------------------------------------------------------- blobs


def test_blobs_stream_and_detect_tampering(opened: Opened) -> None:
    storage = opened.storage
    data = os.urandom(200_000)
    label = DocumentLabel(collection_id="default", display_name="one.bin", source_path=None, format="text")
    written = storage.blobs.write("blob-one", io.BytesIO(data), label=label, expected_sha256=hashlib.sha256(data).hexdigest())
    assert written == len(data)
    assert b"".join(storage.blobs.iter_plaintext("blob-one")) == data
    assert storage.blobs.verify("blob-one") == len(data)
    with pytest.raises(Exception, match="larger than the allowed limit"):
        storage.blobs.read_bytes("blob-one", max_bytes=1000)
    opened.tamper("blob-one")
    with pytest.raises(BlobCorrupt):
        storage.blobs.verify("blob-one")
    with pytest.raises(BlobCorrupt):
        storage.blobs.read_bytes("missing-blob")
    assert storage.blobs.delete("blob-one") and not storage.blobs.delete("blob-one")
    assert storage.blobs.blob_ids() == set()


# ---------------------------------------------------------------- the store itself


def test_the_store_opens_again_with_its_key_and_its_data(opened: Opened) -> None:
    document_id = add(opened.storage, "kept across opens", name="kept.md")
    key = opened.storage.node_key
    with opened.storage.session(), opened.storage.session():  # sessions nest
        assert opened.storage.catalog.document(document_id) is not None
    storage = opened.reopen()
    assert storage.node_key == key and storage.backend in ("sqlite", "postgresql")
    assert storage.catalog.display_names([document_id]) == {document_id: "kept.md"}
    lock = storage.lock_node()
    assert lock is not None and storage.node_running()
    assert storage.lock_node() is None
    lock.release()
    assert not storage.node_running()
