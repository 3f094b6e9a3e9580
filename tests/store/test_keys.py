"""The node key's life cycle: created once, private, and never silently replaced."""

from __future__ import annotations

import os
import stat

import pytest

from store import open_store
from store.blobs import BlobStore, DocumentLabel
from store.errors import KeyProblem


def test_first_open_creates_a_private_key(tmp_path):
    store = open_store(tmp_path / "home")
    key_file = tmp_path / "home" / "node.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert len(key_file.read_bytes()) == 32
    store.close()
    again = open_store(tmp_path / "home")
    assert again.node_key == store.node_key
    again.close()


def test_a_wrong_key_is_refused(tmp_path):
    open_store(tmp_path / "home").close()
    key_file = tmp_path / "home" / "node.key"
    key_file.write_bytes(os.urandom(32))
    with pytest.raises(KeyProblem, match="does not match"):
        open_store(tmp_path / "home")


def test_a_missing_key_with_existing_data_is_refused_and_not_recreated(tmp_path):
    open_store(tmp_path / "home").close()
    key_file = tmp_path / "home" / "node.key"
    key_file.unlink()
    with pytest.raises(KeyProblem, match="missing"):
        open_store(tmp_path / "home")
    assert not key_file.exists()


def test_a_missing_key_with_only_blobs_left_is_refused(tmp_path):
    home = tmp_path / "home"
    BlobStore(home / "blobs", os.urandom(32)).write_bytes("doc1", b"x", label=DocumentLabel("DEFAULT", "x", None, "text"))
    with pytest.raises(KeyProblem, match="missing"):
        open_store(home)
    assert not (home / "node.key").exists()


def test_a_key_readable_by_others_is_refused(tmp_path):
    open_store(tmp_path / "home").close()
    key_file = tmp_path / "home" / "node.key"
    key_file.chmod(0o644)
    with pytest.raises(KeyProblem, match="chmod 600"):
        open_store(tmp_path / "home")


def test_a_damaged_key_file_is_refused(tmp_path):
    open_store(tmp_path / "home").close()
    (tmp_path / "home" / "node.key").write_bytes(b"short")
    with pytest.raises(KeyProblem, match="damaged"):
        open_store(tmp_path / "home")
