"""The actor pipeline with real actors on a real file database."""

from __future__ import annotations

import pykka

from actors.embedder import Embedder
from actors.events import Accepted, AdmissionChanged, AlreadyQueued, Busy, DocumentStatusChanged
from actors.listener import EventListener
from store import catalog
from store.db import database
from store.fts import integrity_check
from store.models import Chunk, Document, StatusHistory, Vector
from tests.actors.conftest import (
    ControlledEmbedder,
    Recorder,
    add_documents,
    all_indexed,
    statuses,
    wait_until,
)


def indexed_transitions(document_id: str) -> int:
    return StatusHistory.select().where(
        (StatusHistory.document == document_id) & (StatusHistory.status == "Indexed")
    ).count()


def test_500_documents_through_a_16_slot_queue(make_node, tmp_path):
    node = make_node(admission_queue_capacity=16, max_in_flight=4)
    ids = add_documents(node, tmp_path, 500)
    recorder = Recorder.start()
    with node.pipeline(listeners=[recorder]) as runtime:
        answers = [runtime.admit(i) for i in ids]
        wait_until(all_indexed(ids), timeout=240)
        events = recorder.ask("events")

    assert any(isinstance(a, Busy) and a.retry_after_s == 5 for a in answers), "a full queue answers Busy"
    assert any(isinstance(a, Accepted) for a in answers)
    depths = [e.queue_depth for e in events if isinstance(e, AdmissionChanged)]
    assert depths and max(depths) <= 16
    assert all(indexed_transitions(i) == 1 for i in ids), "every document indexed exactly once"
    assert Chunk.select().count() == sum(d.chunk_count for d in Document.select())
    assert Vector.select().count() == Chunk.select().count()
    assert integrity_check()
    indexed_events = {e.document_id for e in events if isinstance(e, DocumentStatusChanged) and e.status == "Indexed"}
    assert indexed_events == set(ids)


def test_admission_is_idempotent(make_node, tmp_path):
    node = make_node(max_in_flight=1)
    embedder = ControlledEmbedder()
    node.embedder = embedder
    embedder.gate.clear()  # hold the pipeline so documents stay queued
    first, second = add_documents(node, tmp_path, 2)
    with node.pipeline() as runtime:
        wait_until(lambda: embedder.entered.is_set())
        assert isinstance(runtime.admit(first), AlreadyQueued)  # in flight
        assert isinstance(runtime.admit(second), AlreadyQueued)  # queued by the start-up sweep
        embedder.gate.set()
        wait_until(all_indexed([first, second]))
    assert indexed_transitions(first) == indexed_transitions(second) == 1


def test_start_up_resets_interrupted_documents_and_finishes_them(make_node, tmp_path):
    node = make_node()
    ids = add_documents(node, tmp_path, 5)
    for document_id, status in zip(ids, ["Extracting", "Chunking", "Embedding", "Pending", "Extracting"], strict=True):
        catalog.set_status(document_id, catalog.Status(status))
    with node.pipeline():
        wait_until(all_indexed(ids))


def test_documents_added_by_another_process_are_picked_up_by_the_drain_sweep(make_node, tmp_path):
    node = make_node(drain_sweep_interval_s=0.1)
    with node.pipeline():
        # Rows written while the node runs, without telling it (as `kbtui add` in another process does).
        ids = add_documents(node, tmp_path, 3)
        wait_until(all_indexed(ids))


def test_a_listener_that_raises_does_not_stop_anything(make_node, tmp_path):
    class Exploding(EventListener):
        def on_document_status_changed(self, event):
            raise RuntimeError("listener bug")

    node = make_node()
    ids = add_documents(node, tmp_path, 5)
    exploding = Exploding.start()
    recorder = Recorder.start()
    with node.pipeline(listeners=[exploding, recorder]):
        wait_until(all_indexed(ids))
        assert exploding.is_alive()
        seen = {e.document_id for e in recorder.ask("events") if isinstance(e, DocumentStatusChanged) and e.status == "Indexed"}
    assert seen == set(ids)


def test_embedder_batches_span_documents(make_node, tmp_path):
    node = make_node(max_embedding_batch_size=32, max_in_flight=16)
    embedder = ControlledEmbedder()
    node.embedder = embedder
    embedder.gate.clear()
    ids = add_documents(node, tmp_path, 12, words=10)  # one chunk each
    with node.pipeline():
        wait_until(lambda: embedder.entered.is_set())
        # Let the other documents reach the embedder's inbox while the first batch is held.
        embedder_actor = pykka.ActorRegistry.get_by_class(Embedder)[0]
        wait_until(lambda: embedder_actor.actor_inbox.qsize() >= 11)
        embedder.gate.set()
        wait_until(all_indexed(ids))
    assert sum(embedder.calls) == 12
    assert len(embedder.calls) < 12 and max(embedder.calls) > 1


def test_an_unavailable_embedder_leaves_documents_pending_then_they_index(make_node, tmp_path):
    node = make_node(embedding_retry_initial_s=0.3, drain_sweep_interval_s=0.1)
    embedder = ControlledEmbedder()
    embedder.down = True
    node.embedder = embedder
    ids = add_documents(node, tmp_path, 3)
    with node.pipeline() as runtime:
        wait_until(lambda: any(
            d.failure_reason == "embedder_unavailable" for d in Document.select().where(Document.id.in_(ids))
        ))
        assert set(statuses(ids).values()) <= {"Pending", "Extracting", "Chunking", "Embedding"}
        assert runtime.state().paused_for_s >= 0
        embedder.down = False
        wait_until(all_indexed(ids))
    assert all(d.failure_reason is None for d in Document.select())


def test_a_document_deleted_while_in_flight_does_not_come_back(make_node, tmp_path):
    node = make_node()
    embedder = ControlledEmbedder()
    node.embedder = embedder
    embedder.gate.clear()
    doomed, survivor = add_documents(node, tmp_path, 2)
    with node.pipeline() as runtime:
        wait_until(lambda: embedder.entered.is_set())
        assert catalog.purge_document(node.store, doomed) is not None
        embedder.gate.set()
        wait_until(all_indexed([survivor]))
        wait_until(lambda: runtime.state().in_flight == 0)
    assert Document.get_or_none(Document.id == doomed) is None
    assert Chunk.select().where(Chunk.document == doomed).count() == 0
    assert doomed not in node.store.blobs.blob_ids()


def test_shutdown_leaves_unfinished_documents_for_the_next_start(make_node, tmp_path):
    node = make_node()
    embedder = ControlledEmbedder()
    node.embedder = embedder
    embedder.gate.clear()
    ids = add_documents(node, tmp_path, 3)
    runtime = node.pipeline().start()
    wait_until(lambda: embedder.entered.is_set())
    runtime.stop(drain_timeout_s=0.2)
    assert not all_indexed(ids)()
    assert "Embedding" in statuses(ids).values()
    embedder.gate.set()
    node.embedder = ControlledEmbedder()
    with node.pipeline():
        wait_until(all_indexed(ids))


def test_only_one_node_runs_per_data_directory(make_node):
    import pytest

    from actors.runtime import NodeAlreadyRunning

    node = make_node()
    with node.pipeline():
        with pytest.raises(NodeAlreadyRunning):
            node.pipeline().start()


def test_pykka_never_logs_message_contents(make_node, tmp_path, caplog):
    import logging

    caplog.set_level(logging.DEBUG)
    node = make_node()
    ids = add_documents(node, tmp_path, 2)
    with node.pipeline() as runtime:
        wait_until(all_indexed(ids))
        runtime.admission.tell(object())  # an unexpected message: pykka would log it whole
        # A failing proxy call makes pykka log a traceback.
        ref = pykka.ActorRegistry.get_all()[0]
        ref.tell("unique4421 secret text")
    assert "unique4421" not in caplog.text
    assert "unique0" not in caplog.text
    assert database.execute_sql("PRAGMA integrity_check").fetchone()[0] == "ok"
