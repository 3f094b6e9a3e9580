"""Reading a source file: caps count the bytes read, never what stat() claims; one
opened descriptor is hashed while it is encrypted (issue 16, finding 4)."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest

from store import catalog
from store.files import Refusal, SourceFile, SourceRefused, open_source
from store.models import Document
from tests.conftest import write

KALLSYMS = Path("/proc/kallsyms")
PAGEMAP = Path("/proc/self/pagemap")


def _add(node, path: Path, *, max_bytes: int | None = None):
    return catalog.add_document(node.store, "DEFAULT", path, display_name=path.name, fmt="text", max_bytes=max_bytes)


def _nothing_stored(node) -> bool:
    return Document.select().count() == 0 and node.store.blobs.blob_ids() == set()


@pytest.mark.skipif(not KALLSYMS.exists(), reason="needs /proc/kallsyms")
def test_a_file_that_reports_size_zero_is_not_stored_past_the_cap(node):
    # /proc/kallsyms says 0 bytes and streams megabytes: it was stored whole
    # (5.4 MB) past a 1,000-byte cap when the cap trusted stat().
    assert KALLSYMS.stat().st_size == 0
    with pytest.raises(SourceRefused) as refused:
        _add(node, KALLSYMS, max_bytes=1000)
    assert refused.value.reason is Refusal.PSEUDO_FILE  # the right reason, found before reading anything
    assert _nothing_stored(node)


@pytest.mark.skipif(not PAGEMAP.exists(), reason="needs /proc/self/pagemap")
def test_an_endless_pseudo_file_is_refused_after_reading_a_bounded_amount(node, monkeypatch):
    # pagemap would stream hundreds of GiB; the read stops one byte past what it reported.
    bytes_read: list[int] = []
    real_read = SourceFile.read

    def counting(self: SourceFile, size: int = -1) -> bytes:
        try:
            return real_read(self, size)
        finally:
            bytes_read.append(self.bytes_read)

    monkeypatch.setattr(SourceFile, "read", counting)
    with pytest.raises(SourceRefused):
        _add(node, PAGEMAP, max_bytes=1 << 30)
    assert max(bytes_read) <= 8, "read far past what the file reported"
    assert _nothing_stored(node)


def test_the_cap_counts_bytes_read_even_when_stat_understates_them(tmp_path, monkeypatch):
    path = write(tmp_path / "grows.txt", "x" * 100)
    with open_source(path, max_bytes=150) as source:
        with open(path, "a") as handle:  # grows after the fstat, before the read
            handle.write("y" * 100)
        with pytest.raises(SourceRefused) as refused:
            source.read()
    assert refused.value.reason == Refusal.CHANGED
    assert source.bytes_read <= 101


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []
    worker = threading.Thread(target=lambda: _capture(outcome, lambda: open_source(fifo)), daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive(), "opening a FIFO blocked"
    assert isinstance(outcome[0], SourceRefused) and outcome[0].reason == Refusal.NOT_REGULAR


def test_a_symlink_is_never_followed(tmp_path):
    target = write(tmp_path / "target.md", "# T\n\ntext")
    link = tmp_path / "link.md"
    link.symlink_to(target)
    with pytest.raises(SourceRefused) as refused:
        open_source(link)
    assert refused.value.reason == Refusal.SYMLINK


def test_a_file_checked_then_swapped_is_refused(tmp_path):
    path = write(tmp_path / "a.md", "# A\n\nfirst")
    checked = os.stat(path, follow_symlinks=False)
    os.replace(write(tmp_path / "other.md", "# A\n\nreplacement"), path)  # another inode, same name
    with pytest.raises(SourceRefused) as refused:
        open_source(path, checked=checked)
    assert refused.value.reason == Refusal.SWAPPED


def test_stored_bytes_and_their_hash_come_from_one_read(node, tmp_path, monkeypatch):
    original = b"# Notes\n\n" + b"original line\n" * 20_000
    path = tmp_path / "notes.md"
    path.write_bytes(original)
    opened: list[int] = []
    real_open = os.open

    def counting_open(name, flags, *args, **kwargs):
        if os.fspath(name) == os.fspath(path):
            opened.append(flags)
        return real_open(name, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", counting_open)
    added = _add(node, path)
    assert len(opened) == 1, "the source was opened more than once"
    document = Document.get_by_id(added.document_id)
    assert document.content_hash == hashlib.sha256(original).hexdigest()
    assert node.store.blobs.read_bytes(added.document_id) == original


def test_a_file_rewritten_while_it_is_stored_stores_nothing(node, tmp_path, monkeypatch):
    path = tmp_path / "notes.md"
    path.write_bytes(b"# Notes\n\n" + b"a" * 300_000)
    os.utime(path, (1_000_000_000, 1_000_000_000))  # so the rewrite's time differs whatever the clock's grain
    real_read = SourceFile.read
    rewritten: list[bool] = []

    def rewrite_after_first_block(self: SourceFile, size: int = -1) -> bytes:
        block = real_read(self, size)
        if not rewritten:
            rewritten.append(True)
            with open(path, "r+b") as handle:  # same size, other bytes
                handle.seek(200_000)
                handle.write(b"b" * 1000)
        return block

    monkeypatch.setattr(SourceFile, "read", rewrite_after_first_block)
    with pytest.raises(SourceRefused) as refused:
        _add(node, path)
    assert refused.value.reason == Refusal.CHANGED
    assert _nothing_stored(node)
    assert [p for p in node.store.blobs.root.iterdir()] == []


def _capture(into: list[BaseException], action) -> None:
    try:
        action()
    except BaseException as exc:  # noqa: BLE001 - handed to the test thread
        into.append(exc)
