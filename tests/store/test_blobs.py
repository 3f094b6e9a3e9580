"""The encrypted blob store: round trips, and every kind of damage is detected."""

from __future__ import annotations

import io
import os

import pytest

from store.blobs import SEGMENT_SIZE, TAG_SIZE, BlobStore, FileChanged, open_name, seal_name
from store.errors import BlobCorrupt

KEY = bytes(range(32))
OTHER_KEY = bytes(reversed(range(32)))


@pytest.fixture
def blobs(tmp_path):
    return BlobStore(tmp_path / "blobs", KEY)


@pytest.mark.parametrize(
    "size", [0, 1, SEGMENT_SIZE - 1, SEGMENT_SIZE, SEGMENT_SIZE + 1, 3 * SEGMENT_SIZE, 1_000_003]
)
def test_round_trip_of_every_size(blobs, size):
    data = os.urandom(size)
    assert blobs.write_bytes("doc1", data) == size
    assert blobs.read_bytes("doc1") == data


def test_blob_on_disk_does_not_contain_the_plaintext(blobs):
    secret = b"the quarterly numbers are confidential " * 100
    blobs.write_bytes("doc1", secret)
    raw = blobs.path_for("doc1").read_bytes()
    assert b"confidential" not in raw


def test_reading_streams_one_segment_at_a_time(blobs):
    blobs.write_bytes("doc1", os.urandom(5 * SEGMENT_SIZE + 10))
    parts = list(blobs.iter_plaintext("doc1"))
    assert max(len(p) for p in parts) == SEGMENT_SIZE
    assert len(parts) == 6


def test_a_flipped_bit_is_detected(blobs):
    blobs.write_bytes("doc1", b"hello world" * 1000)
    path = blobs.path_for("doc1")
    raw = bytearray(path.read_bytes())
    raw[100] ^= 0x01
    path.write_bytes(bytes(raw))
    with pytest.raises(BlobCorrupt):
        blobs.read_bytes("doc1")


@pytest.mark.parametrize("cut", ["segment_boundary", "mid_segment", "header"])
def test_truncation_is_detected(blobs, cut):
    blobs.write_bytes("doc1", os.urandom(3 * SEGMENT_SIZE))
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
    blobs.write_bytes("doc1", b"first document")
    blobs.write_bytes("doc2", b"second document")
    blobs.path_for("doc2").write_bytes(blobs.path_for("doc1").read_bytes())
    with pytest.raises(BlobCorrupt):
        blobs.read_bytes("doc2")
    assert blobs.read_bytes("doc1") == b"first document"


def test_another_key_cannot_read(blobs, tmp_path):
    blobs.write_bytes("doc1", b"data")
    with pytest.raises(BlobCorrupt):
        BlobStore(tmp_path / "blobs", OTHER_KEY).read_bytes("doc1")


def test_a_missing_blob_is_a_clear_error(blobs):
    with pytest.raises(BlobCorrupt, match="missing"):
        blobs.read_bytes("nope")


def test_a_file_changing_while_written_stores_nothing(blobs):
    with pytest.raises(FileChanged):
        blobs.write("doc1", io.BytesIO(b"actual bytes"), expected_sha256="0" * 64)
    assert not blobs.path_for("doc1").exists()
    assert list(blobs.root.iterdir()) == []


def test_writes_leave_no_temp_files(blobs):
    blobs.write_bytes("doc1", b"x" * 10)
    blobs.write_bytes("doc1", b"y" * 10)  # overwrite is atomic too
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
