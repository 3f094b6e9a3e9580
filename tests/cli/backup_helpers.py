"""What the backup, restore and recover tests share: a knowledge base to back
up, its answers to searches, real kbtui processes, and checks on a catalog."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

from kbtui.config import Config
from kbtui.node import Node
from tests.conftest import write


def kbtui_process(home: Path, *args: str, pause_at: str | None = None, marker: Path | None = None) -> subprocess.Popen:
    """``kbtui ARGS`` as a child process; with ``pause_at`` it stops at that
    fault point (writing ``marker``) so that a test can kill -9 it there."""
    env = {**os.environ, "KBTUI_HOME": str(home), "KBTUI_EMBEDDING_PROVIDER": "hash"}
    if pause_at is not None:
        env |= {"KBTUI_FAULT_PAUSE_AT": pause_at, "KBTUI_FAULT_MARKER": str(marker)}
    return subprocess.Popen(
        [sys.executable, "-m", "kbtui", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_for(predicate, timeout: float = 120.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} not reached in {timeout:.0f} s")


def kill_9_when_paused(process: subprocess.Popen, marker: Path) -> None:
    try:
        wait_for(lambda: marker.exists() or process.poll() is not None, what="the pause point")
        assert process.poll() is None, f"the process ended before its pause point: {process.communicate()}"
        process.kill()  # SIGKILL
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)


def write_corpus(folder: Path, count: int, *, word: str = "zorblax", start: int = 0, paragraphs: int = 1) -> None:
    """``count`` markdown files, each findable by its own word (``{word}{n}``)."""
    for n in range(start, start + count):
        body = "".join(
            f"## Part {p}\n\nthe {word}{n} procedure, step {p}: check the relay and the gauge before noon.\n\n"
            for p in range(paragraphs)
        )
        write(folder / f"part{n // 50}" / f"note{n}.md", f"# Note {n}\n\n{body}")


def top_documents(home: Path, queries: list[str], collection: str = "DEFAULT", limit: int = 3) -> dict[str, list[str]]:
    """The ids of the best documents each query finds, best first."""
    node = Node.open(Config.load(home), read_only=True)
    try:
        return {
            q: [hit.document_id for hit in node.search(q, collection, limit=limit, per_document=True).hits]
            for q in queries
        }
    finally:
        node.close()


def catalog_rows(home: Path, sql: str, params: tuple = ()) -> list[tuple]:
    with closing(sqlite3.connect(home / "kb.sqlite3", timeout=30)) as connection:
        return connection.execute(sql, params).fetchall()


def assert_none_half(home: Path) -> None:
    """The catalog is whole and every document is Indexed (with all its chunks,
    vectors and full-text rows) or Pending with none."""
    assert catalog_rows(home, "PRAGMA integrity_check") == [("ok",)]
    catalog_rows(home, "INSERT INTO chunk_fts(chunk_fts, rank) VALUES ('integrity-check', 1)")
    for doc_id, status, chunk_count in catalog_rows(home, "SELECT id, status, chunk_count FROM document"):
        chunks, vectors, fts = catalog_rows(
            home,
            "SELECT (SELECT count(*) FROM chunk WHERE document_id = ?),"
            " (SELECT count(*) FROM vector JOIN chunk ON chunk.id = vector.chunk_id WHERE document_id = ?),"
            " (SELECT count(*) FROM chunk_fts WHERE document_id = ?)",
            (doc_id, doc_id, doc_id),
        )[0]
        assert status in ("Indexed", "Pending"), f"document {doc_id} is {status}"
        if status == "Indexed":
            assert chunks == vectors == fts == chunk_count > 0, doc_id
        else:
            assert chunks == vectors == fts == 0, f"half-visible Pending document {doc_id}"


def file_digests(directory: Path) -> dict[str, str]:
    """Every file under ``directory`` and a digest of its bytes."""
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*")) if p.is_file()
    }
