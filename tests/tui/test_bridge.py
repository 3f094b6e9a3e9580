"""Pipeline events reach the UI as messages; floods collapse in the app's queue."""

from __future__ import annotations

import asyncio
import threading

import pykka
from textual.app import App

from actors.events import AdmissionChanged, DocumentReleased, DocumentStatusChanged
from actors.listener import publish
from kbtui.tui.bridge import TuiBridge, message_for
from kbtui.tui.messages import AdmissionUpdated, DocumentStatusUpdated


def progress(document_id: str, value: float, status: str = "Embedding") -> DocumentStatusChanged:
    return DocumentStatusChanged(document_id, "DEFAULT", status, value)


def admission(depth: int) -> AdmissionChanged:
    return AdmissionChanged(queue_depth=depth, queue_capacity=256, in_flight=1, accepted=depth, rejected=0)


def test_each_event_maps_to_its_message_and_others_to_none():
    status = message_for(progress("a", 0.5))
    assert isinstance(status, DocumentStatusUpdated) and status.event.document_id == "a"
    assert isinstance(message_for(admission(3)), AdmissionUpdated)
    assert message_for(DocumentReleased("a", "stopping")) is None


class Recorder(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, float]] = []
        self.depths: list[int] = []

    def on_document_status_updated(self, message: DocumentStatusUpdated) -> None:
        self.seen.append((message.event.document_id, message.event.progress))

    def on_admission_updated(self, message: AdmissionUpdated) -> None:
        self.depths.append(message.event.queue_depth)


def test_a_burst_for_one_document_collapses_to_its_latest_update():
    app = Recorder()

    async def run() -> None:
        async with app.run_test() as pilot:
            # Queued while the app is busy in this handler-free stretch: one burst.
            for step in range(50):
                app.post_message(DocumentStatusUpdated(progress("a", step / 50)))
            app.post_message(DocumentStatusUpdated(progress("b", 0.1)))
            for step in range(50):
                app.post_message(DocumentStatusUpdated(progress("a", 0.5 + step / 100)))
            for depth in range(30):
                app.post_message(AdmissionUpdated(admission(depth)))
            await pilot.pause()

    asyncio.run(run())
    assert app.seen == [("a", 49 / 50), ("b", 0.1), ("a", 0.5 + 49 / 100)]
    assert app.depths == [29]


def test_the_bridge_actor_posts_without_waiting_for_the_ui():
    posted: list[object] = []
    arrived = threading.Event()

    def post(message: object) -> bool:
        posted.append(message)
        if len(posted) == 2:
            arrived.set()
        return True

    bridge = TuiBridge.start(post)
    try:
        publish(progress("doc-1", 0.6))
        publish(admission(4))
        assert arrived.wait(5)
    finally:
        pykka.ActorRegistry.stop_all()
    assert isinstance(posted[0], DocumentStatusUpdated) and posted[0].event.document_id == "doc-1"
    assert isinstance(posted[1], AdmissionUpdated) and posted[1].event.queue_depth == 4
    assert not bridge.is_alive()
