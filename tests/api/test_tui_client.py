"""A TUI in client mode follows the running node's event stream, and serves the
API itself once it takes over."""

from __future__ import annotations

import asyncio
import json
import os
import signal

from tests.api.serving import answers, kbtui, start_node
from tests.conftest import write
from tests.tui.conftest import fast_options, make_app, tui_node, wait_until  # noqa: F401 - the fixture


def test_a_client_tui_lives_on_the_node_s_events_and_takes_over_when_it_stops(tui_node, tmp_path):  # noqa: F811
    node = start_node(tui_node.config.home)
    asked_for_queue: list[bool] = []
    snapshot = tui_node.snapshot

    def recording_snapshot(collection_id, *, with_queue):
        asked_for_queue.append(with_queue)
        return snapshot(collection_id, with_queue=with_queue)

    tui_node.snapshot = recording_snapshot
    app = make_app(tui_node, fast_options())

    async def run() -> None:
        async with app.run_test(size=(120, 40)):
            await wait_until(lambda: app.mode == "client" and app.events_live)
            await wait_until(lambda: app.queue is not None)  # the stream's first frame: the queue
            asked_for_queue.clear()
            added = await asyncio.to_thread(kbtui, tui_node.config.home, "add", "--no-wait",
                                            str(write(tmp_path / "a.md", "# A\n\nthe tapir runbook")), "--json")
            document_id = json.loads(added.stdout)[0]["document_id"]
            # Terminal statuses are counted from events only (a polling client never sees them).
            await wait_until(lambda: app.finished_total == 1, timeout=30)
            # The list catches up with the event a moment later (on a busy machine, after a refresh).
            await wait_until(lambda: getattr(app.documents_screen.rows.get(document_id), "status", None) == "Indexed")
            assert app.queue.accepted == 1
            assert asked_for_queue and not any(asked_for_queue)  # the status file was never read

            await asyncio.to_thread(node.stop, signal.SIGTERM)
            await wait_until(lambda: app.mode == "node", timeout=60)  # took over
            await wait_until(lambda: app.api is not None)
            assert answers(tui_node.config.home / "api.sock")
            status = await asyncio.to_thread(kbtui, tui_node.config.home, "status", "--json")
            assert json.loads(status.stdout)["queue"]["pid"] == os.getpid()

    try:
        asyncio.run(run())
    finally:
        node.stop()
    assert not (tui_node.config.home / "api.sock").exists()  # the app's API went with it
