"""Writers in one process queue on the process writer lock, never deadlock, and
give up with SQLite's own "database is locked" error after the busy timeout;
writers in different processes queue on the cross-process writer lock, so a
busy process cannot starve another."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
from peewee import OperationalError, fn

import store.db
from store import catalog
from store.db import database, thread_connection
from store.models import Document, Status, StatusHistory
from tests.conftest import write


def _add(node, path):
    return catalog.add_document(node.store, "DEFAULT", path, display_name=path.name, fmt="markdown")


def test_many_threads_writing_at_once_all_land(node, tmp_path):
    document_id = _add(node, write(tmp_path / "a.md", "# A\n\nbody")).document_id
    first = StatusHistory.select(fn.MAX(StatusHistory.id)).where(StatusHistory.document == document_id).scalar()
    errors: list[BaseException] = []

    def write_statuses() -> None:
        try:
            with thread_connection():
                for _ in range(25):
                    catalog.set_status(document_id, Status.EXTRACTING, progress=0.1)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write_statuses, daemon=True) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    # Every write landed: one history row each (the history keeps the newest, so count them by id).
    last = StatusHistory.select(fn.MAX(StatusHistory.id)).where(StatusHistory.document == document_id).scalar()
    assert last - first == 8 * 25


def test_a_writer_waits_at_most_the_busy_timeout(node, monkeypatch):
    monkeypatch.setattr(store.db, "BUSY_TIMEOUT_MS", 200)
    holding, release = threading.Event(), threading.Event()

    def hold_a_transaction() -> None:
        with thread_connection(), database.atomic():
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold_a_transaction, daemon=True)
    holder.start()
    assert holding.wait(10)
    with pytest.raises(OperationalError, match="database is locked"):
        with database.atomic():
            pass
    release.set()
    holder.join(10)
    with database.atomic():  # the lock is free again once the holder commits
        pass


def test_nested_and_failed_transactions_release_the_writer(node, tmp_path):
    document_id = _add(node, write(tmp_path / "a.md", "# A\n\nbody")).document_id
    with database.atomic():
        with database.atomic():  # a savepoint inside, not a second lock
            catalog.set_status(document_id, Status.CHUNKING)
    with pytest.raises(RuntimeError):
        with database.atomic():
            catalog.set_status(document_id, Status.FAILED)
            raise RuntimeError("rolled back")
    assert Document.get_by_id(document_id).status == Status.CHUNKING.value

    done = threading.Event()

    def write_from_another_thread() -> None:
        with thread_connection():
            catalog.set_status(document_id, Status.EMBEDDING)
        done.set()

    threading.Thread(target=write_from_another_thread, daemon=True).start()
    assert done.wait(10), "the writer lock was left held"
    assert Document.get_by_id(document_id).status == Status.EMBEDDING.value


HAMMER = """
import sys, threading, time
from pathlib import Path
from store import open_store
from store.db import database, thread_connection

open_store(Path(sys.argv[1]))
stop = threading.Event()

def write_back_to_back() -> None:
    with thread_connection():
        while not stop.is_set():
            with database.atomic():
                database.execute_sql(
                    "INSERT INTO node_meta(key, value) VALUES ('hammer', x'00') "
                    "ON CONFLICT(key) DO UPDATE SET value = x'01'"
                )
                held = time.perf_counter()
                while time.perf_counter() - held < 0.02:  # a transaction's worth of work (a big commit)
                    pass

threads = [threading.Thread(target=write_back_to_back) for _ in range(4)]
for thread in threads:
    thread.start()
print("writing", flush=True)
sys.stdin.read()  # until the test closes our stdin
stop.set()
for thread in threads:
    thread.join()
"""


def test_a_process_writing_back_to_back_does_not_starve_another(node):
    """Four threads in another process hand the write lock to each other back
    to back (as a busy pipeline does). SQLite alone lets this process in only
    when its busy handler's sleeps happen to land in a gap: it waited seconds,
    up to the whole busy timeout ("the database stayed locked"). Queued on the
    cross-process writer lock it is woken as soon as the holder commits."""
    hammer = subprocess.Popen(
        [sys.executable, "-c", HAMMER, str(node.config.home)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert hammer.stdout.readline().strip() == "writing", hammer.stderr.read()
        waits = []
        for _ in range(20):
            started = time.monotonic()
            with database.atomic():
                database.execute_sql(
                    "INSERT INTO node_meta(key, value) VALUES ('victim', x'00') "
                    "ON CONFLICT(key) DO UPDATE SET value = x'02'"
                )
            waits.append(time.monotonic() - started)
    finally:
        hammer.stdin.close()
        hammer.wait(timeout=60)
    assert hammer.returncode == 0, hammer.stderr.read()
    assert max(waits) < 1.0, f"waited up to {max(waits):.2f} s for the write lock (mean {sum(waits) / len(waits):.3f} s)"
