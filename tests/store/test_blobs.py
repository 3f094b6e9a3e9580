"""The encrypted blob store: round trips, and every kind of damage is detected."""

from __future__ import annotations

import hashlib
import io
import os

import pytest

from store.blobs import SEGMENT_SIZE, TAG_SIZE, BlobFile, BlobStore, DocumentLabel, FileChanged, open_name, seal_name
from store.errors import BlobCorrupt
from tests.store.legacy_blobs import write_legacy_blob

KEY = bytes(range(32))
OTHER_KEY = bytes(reversed(range(32)))
LABEL = DocumentLabel("DEFAULT", "report.pdf", None, "pdf")


@pytest.fixture
def blobs(tmp_path):
    return BlobStore(tmp_path / "blobs", KEY)


@pytest.mark.parametrize(
    "size", [0, 1, SEGMENT_SIZE - 1, SEGMENT_SIZE, SEGMENT_SIZE + 1, 3 * SEGMENT_SIZE, 1_000_003]
)
def test_round_trip_of_every_size(blobs, size):
    data = os.urandom(size)
    assert blobs.write_bytes("doc1", data, label=LABEL) == size
    assert blobs.read_bytes("doc1") == data


def test_blob_on_disk_does_not_contain_the_plaintext(blobs):
    secret = b"the quarterly numbers are confidential " * 100
    blobs.write_bytes("doc1", secret, label=LABEL)
    raw = blobs.path_for("doc1").read_bytes()
    assert b"confidential" not in raw


def test_reading_streams_one_segment_at_a_time(blobs):
    blobs.write_bytes("doc1", os.urandom(5 * SEGMENT_SIZE + 10), label=LABEL)
    parts = list(blobs.iter_plaintext("doc1"))
    assert max(len(p) for p in parts) == SEGMENT_SIZE
    assert len(parts) == 6


def test_a_flipped_bit_is_detected(blobs):
    blobs.write_bytes("doc1", b"hello world" * 1000, label=LABEL)
    path = blobs.path_for("doc1")
    raw = bytearray(path.read_bytes())
    raw[100] ^= 0x01
    path.write_bytes(bytes(raw))
    with pytest.raises(BlobCorrupt):
        blobs.read_bytes("doc1")


@pytest.mark.parametrize("cut", ["segment_boundary", "mid_segment", "header"])
def test_truncation_is_detected(blobs, cut):
    blobs.write_bytes("doc1", os.urandom(3 * SEGMENT_SIZE), label=LABEL)
    path = blobs.path_for("doc1")
    raw = path.read_bytes()
    header = 32
    keep = {
        "segment_boundary": header + 2 * (SEGMENT_SIZE + TAG_SIZE),
        "mid_segment": header + SEGMENT_SIZE // 2,
        "header": 10,
    }[cut]
    path.write_bytes(raw[:keep])
    with pytest.raises(BlobCorrupt):
        blobs.read_bytes("doc1")


def test_a_blob_copied_over_another_documents_blob_fails(blobs):
    blobs.write_bytes("doc1", b"first document", label=LABEL)
    blobs.write_bytes("doc2", b"second document", label=LABEL)
    blobs.path_for("doc2").write_bytes(blobs.path_for("doc1").read_bytes())
    with pytest.raises(BlobCorrupt):
        blobs.read_bytes("doc2")
    assert blobs.read_bytes("doc1") == b"first document"


def test_another_key_cannot_read(blobs, tmp_path):
    blobs.write_bytes("doc1", b"data", label=LABEL)
    with pytest.raises(BlobCorrupt):
        BlobStore(tmp_path / "blobs", OTHER_KEY).read_bytes("doc1")


def test_a_missing_blob_is_a_clear_error(blobs):
    with pytest.raises(BlobCorrupt, match="missing"):
        blobs.read_bytes("nope")


def test_a_file_changing_while_written_stores_nothing(blobs):
    with pytest.raises(FileChanged):
        blobs.write("doc1", io.BytesIO(b"actual bytes"), label=LABEL, expected_sha256="0" * 64)
    assert not blobs.path_for("doc1").exists()
    assert list(blobs.root.iterdir()) == []


def test_writes_leave_no_temp_files(blobs):
    blobs.write_bytes("doc1", b"x" * 10, label=LABEL)
    blobs.write_bytes("doc1", b"y" * 10, label=LABEL)  # overwrite is atomic too
    assert [p.name for p in blobs.root.iterdir()] == ["doc1"]
    assert blobs.read_bytes("doc1") == b"y" * 10


def test_display_names_round_trip_and_are_bound_to_their_document():
    sealed = seal_name(KEY, "doc1", "Quarterly report – März.pdf")
    assert b"Quarterly" not in sealed
    assert open_name(KEY, "doc1", sealed) == "Quarterly report – März.pdf"
    with pytest.raises(BlobCorrupt):
        open_name(KEY, "doc2", sealed)
    with pytest.raises(BlobCorrupt):
        open_name(OTHER_KEY, "doc1", sealed)
    tampered = sealed[:-1] + bytes([sealed[-1] ^ 1])
    with pytest.raises(BlobCorrupt):
        open_name(KEY, "doc1", tampered)


# ---------------------------------------------------------------- format 2: the sealed label


def test_a_blob_carries_its_documents_catalog_facts_sealed_inside(blobs):
    label = DocumentLabel("ops", "Runbook – März.md", "guides/runbook.md", "markdown")
    data = b"# Runbook\nrestart the service\n"
    blobs.write_bytes("doc1", data, label=label)
    with blobs.open("doc1") as blob:
        stored = blob.label()
    assert stored is not None
    assert (stored.document_id, stored.label, stored.size) == ("doc1", label, len(data))
    assert stored.content_hash == hashlib.sha256(data).hexdigest()
    raw = blobs.path_for("doc1").read_bytes()
    assert b"runbook" not in raw.lower() and b"ops" not in raw


def test_a_tampered_label_fails_authentication(blobs):
    blobs.write_bytes("doc1", b"content", label=LABEL)
    path = blobs.path_for("doc1")
    raw = bytearray(path.read_bytes())
    raw[-10] ^= 0x01  # inside the sealed label
    path.write_bytes(bytes(raw))
    with pytest.raises(BlobCorrupt):
        blobs.read_bytes("doc1")


def test_a_label_moved_onto_other_bytes_of_the_same_document_is_refused(blobs):
    blobs.write_bytes("doc1", b"version one", label=LABEL)
    old = blobs.path_for("doc1").read_bytes()
    blobs.write_bytes("doc1", b"version two", label=LABEL)
    new = blobs.path_for("doc1").read_bytes()
    old_label = old[-(int.from_bytes(old[-4:], "big") + 4):]
    new_content = new[: -(int.from_bytes(new[-4:], "big") + 4)]
    blobs.path_for("doc1").write_bytes(new_content + old_label)
    with pytest.raises(BlobCorrupt):
        blobs.read_bytes("doc1")


def test_a_format_1_blob_is_still_read(blobs):
    data = os.urandom(2 * SEGMENT_SIZE + 5)
    write_legacy_blob(blobs.root, KEY, "doc1", data)
    assert blobs.read_bytes("doc1") == data
    assert blobs.format_version("doc1") == 1
    with blobs.open("doc1") as blob:
        assert blob.label() is None


def test_reseal_upgrades_a_format_1_blob_with_its_label(blobs):
    data = os.urandom(SEGMENT_SIZE + 5)
    write_legacy_blob(blobs.root, KEY, "doc1", data)
    label = DocumentLabel("ops", "notes.txt", "notes.txt", "text")
    assert blobs.reseal("doc1", label, expected_sha256=hashlib.sha256(data).hexdigest())
    assert blobs.format_version("doc1") == 2
    assert blobs.read_bytes("doc1") == data
    with blobs.open("doc1") as blob:
        assert blob.label().label == label  # type: ignore[union-attr]
    assert blobs.blob_ids() == {"doc1"} and [p.name for p in blobs.root.iterdir()] == ["doc1"]


def test_reseal_leaves_a_blob_that_holds_other_bytes_alone(blobs):
    write_legacy_blob(blobs.root, KEY, "doc1", b"newer bytes")
    before = blobs.path_for("doc1").read_bytes()
    assert not blobs.reseal("doc1", LABEL, expected_sha256=hashlib.sha256(b"older bytes").hexdigest())
    assert blobs.path_for("doc1").read_bytes() == before
    assert not blobs.reseal("missing", LABEL, expected_sha256="0" * 64)


def test_relabelling_keeps_the_encrypted_content_as_it_is(blobs):
    data = os.urandom(3 * SEGMENT_SIZE)
    blobs.write_bytes("doc1", data, label=DocumentLabel("ops", "a.md", "a.md", "markdown"))
    before = blobs.path_for("doc1").read_bytes()
    moved = DocumentLabel("ops", "b/renamed.md", "b/renamed.md", "markdown")
    assert blobs.reseal("doc1", moved, expected_sha256=hashlib.sha256(data).hexdigest())
    after = blobs.path_for("doc1").read_bytes()
    content_end = len(before) - int.from_bytes(before[-4:], "big") - 4
    assert after[:content_end] == before[:content_end]
    with blobs.open("doc1") as blob:
        assert blob.label().label == moved  # type: ignore[union-attr]
    assert blobs.read_bytes("doc1") == data


def test_reseal_never_overwrites_a_blob_replaced_while_it_worked(blobs, monkeypatch):
    """An update in place that lands while an old blob is being upgraded wins:
    the upgrade's older bytes never replace it."""
    old, new = b"old bytes " * 10_000, b"new bytes, written meanwhile"
    write_legacy_blob(blobs.root, KEY, "doc1", old)
    real_plaintext = BlobFile.plaintext

    def update_meanwhile(self):
        blobs.write_bytes("doc1", new, label=LABEL)  # another writer replaces the blob
        yield from real_plaintext(self)

    monkeypatch.setattr(BlobFile, "plaintext", update_meanwhile)
    assert not blobs.reseal("doc1", LABEL, expected_sha256=hashlib.sha256(old).hexdigest())
    monkeypatch.undo()
    assert blobs.read_bytes("doc1") == new
    assert [p.name for p in blobs.root.iterdir()] == ["doc1"]
