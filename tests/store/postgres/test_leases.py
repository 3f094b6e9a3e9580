"""Leases on one real PostgreSQL, between two nodes' stores (two data
directories, the key copied): claims never overlap, a lease that runs out is
taken over, the old holder's writes are refused, and jobs run on one node."""

from __future__ import annotations

import os
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from store.errors import PipelineHeldElsewhere, Superseded
from store.postgres.storage import PostgresStore, open_postgres_store
from store.records import Status


@pytest.fixture
def pair(tmp_path: Path, postgres_url: str) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    first_home, second_home = tmp_path / "a", tmp_path / "b"
    first = open_postgres_store(first_home, postgres_url)
    second_home.mkdir(mode=0o700)
    shutil.copy2(first_home / "node.key", second_home / "node.key")
    os.chmod(second_home / "node.key", stat.S_IRUSR | stat.S_IWUSR)
    second = open_postgres_store(second_home, postgres_url)
    try:
        yield first, second
    finally:
        first.close()
        second.close()


def _add(store: PostgresStore, count: int) -> list[str]:
    return [
        store.catalog.add_upload("DEFAULT", f"note {i}\n".encode(), display_name=f"n{i}.txt", fmt="text").document_id
        for i in range(count)
    ]


def _wait_for(condition: Callable[[], object], timeout: float = 30.0) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def test_two_nodes_never_claim_one_document(pair: tuple[PostgresStore, PostgresStore]) -> None:
    first, second = pair
    ids = _add(first, 10)
    for store in pair:
        store.coordination.join(role="pipeline", model_identity="hash:v1", lease_s=30)
    assert first.coordination.waiting(100) == 10
    mine = first.coordination.claim(4)
    theirs = second.coordination.claim(100)
    assert mine == ids[:4]  # oldest first
    assert sorted(theirs) == sorted(ids[4:]) and not set(mine) & set(theirs)
    assert first.coordination.claim(5) == [] and first.coordination.waiting(100) == 0
    # A lease given back is anyone's again.
    first.coordination.release(mine[:1])
    assert second.coordination.claim(5) == mine[:1]


def test_a_lease_that_runs_out_is_taken_over_and_the_old_holder_can_no_longer_write(
    pair: tuple[PostgresStore, PostgresStore],
) -> None:
    first, second = pair
    [document_id] = _add(first, 1)
    first.coordination.join(role="pipeline", model_identity="hash:v1", lease_s=1)
    second.coordination.join(role="pipeline", model_identity="hash:v1", lease_s=1)
    assert first.coordination.claim(1) == [document_id]
    assert first.catalog.set_status(document_id, Status.EXTRACTING, progress=0.1)
    # Renewed, it holds; not renewed (the node died, or lost the network), another node takes it.
    assert first.coordination.heartbeat([document_id], in_flight=1) == set()
    assert second.coordination.claim(1) == []
    assert _wait_for(lambda: second.coordination.claim(1)) == [document_id]
    history = first.catalog.history(document_id)
    assert [(h.status, h.reason) for h in history][-1] == ("Pending", "lease_expired")
    # The first node's stages, when they wake up, change nothing.
    assert first.coordination.heartbeat([document_id], in_flight=1) == {document_id}
    assert not first.catalog.set_status(document_id, Status.EMBEDDING, progress=0.5)
    with pytest.raises(Superseded):
        first.catalog.commit_index(
            document_id, sections=[], chunks=[], vectors=np.zeros((0, 4), np.float32), identity="hash:v1",
            parser_version=1, chunker_version=1,
        )
    # The holder's go through, and end the lease.
    assert second.catalog.set_status(document_id, Status.EXTRACTING, progress=0.1)
    assert second.catalog.commit_index(
        document_id, sections=[], chunks=[], vectors=np.zeros((0, 4), np.float32), identity="hash:v1",
        parser_version=1, chunker_version=1,
    ) == []
    document = second.catalog.document(document_id)
    assert document is not None and document.status == "Indexed"
    assert [h.status for h in second.catalog.history(document_id)].count("Indexed") == 1


def test_a_node_that_stops_gives_its_documents_back_at_once(pair: tuple[PostgresStore, PostgresStore]) -> None:
    first, second = pair
    ids = _add(first, 3)
    for store in pair:
        store.coordination.join(role="pipeline", model_identity="hash:v1", lease_s=60)
    claimed = first.coordination.claim(3)
    assert first.catalog.set_status(claimed[0], Status.CHUNKING, progress=0.3)
    first.coordination.leave()
    assert sorted(second.coordination.claim(10)) == sorted(ids)
    assert first.catalog.document(claimed[0]).status == "Pending"  # type: ignore[union-attr]
    states = {n.id: (n.alive, n.stopped_at is not None) for n in second.coordination.nodes()}
    assert states == {first.coordination.node_id: (False, True), second.coordination.node_id: (True, False)}


def test_nodes_that_embed_differently_are_refused_while_the_others_live(
    pair: tuple[PostgresStore, PostgresStore],
) -> None:
    first, second = pair
    first.coordination.join(role="pipeline", model_identity="local:minilm", lease_s=60)
    with pytest.raises(PipelineHeldElsewhere, match="must embed alike"):
        second.coordination.join(role="pipeline", model_identity="hash:v1", lease_s=60)
    first.coordination.leave()
    second.coordination.join(role="pipeline", model_identity="hash:v1", lease_s=60)


def test_a_single_runner_job_runs_on_one_node_at_a_time(pair: tuple[PostgresStore, PostgresStore]) -> None:
    first, second = pair
    with first.coordination.single_runner("stale-reindex") as mine:
        assert mine
        with second.coordination.single_runner("stale-reindex") as theirs:
            assert not theirs
        with second.coordination.single_runner("blob-sweep") as other_job:
            assert other_job
    with second.coordination.single_runner("stale-reindex") as theirs:
        assert theirs
