"""Node when no node runs; client of the running node otherwise; viewer when told not to index."""

from __future__ import annotations

import asyncio

from textual.widgets import Static

from store.node_lock import node_running
from tests.tui.conftest import add_examples, copy_examples, fast_options, make_app, wait_until


def header_line(app) -> str:
    return str(app.documents_screen.query_one("#ingest-summary", Static).content)


def test_with_a_node_running_elsewhere_the_ui_is_its_client(tui_node, tmp_path):
    corpus = copy_examples(tmp_path / "corpus")
    # The other node: a real pipeline holding the node lock for this data dir.
    with tui_node.pipeline():
        app = make_app(tui_node, fast_options())

        async def run() -> None:
            async with app.run_test(size=(120, 40)) as pilot:
                await wait_until(lambda: app.mode == "client")
                assert app.runtime is None  # this process does not index
                app.add_path(str(corpus / "ssh-hardening.md"), "DEFAULT")
                documents = app.documents_screen
                await wait_until(lambda: len(documents.rows) == 1)
                # The running node picks the Pending row up; the poller sees it finish.
                await wait_until(lambda: next(iter(documents.rows.values())).status == "Indexed")
                await wait_until(lambda: "○ client DEFAULT" in header_line(app) and "queue 0/256" in header_line(app))
                await pilot.press("q")

        asyncio.run(run())
        assert node_running(tui_node.config.home)  # quitting the client leaves the node alone
    assert not node_running(tui_node.config.home)


def test_told_not_to_run_a_node_added_documents_wait_as_pending(tui_node):
    app = make_app(tui_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(80, 24)):
            await wait_until(lambda: app.mode == "viewer")
            add_examples(tui_node, names=["ssh-hardening.md"])
            documents = app.documents_screen
            await wait_until(lambda: len(documents.rows) == 1)
            await asyncio.sleep(0.5)
            assert next(iter(documents.rows.values())).status == "Pending"
            assert "added documents wait as Pending" in header_line(app)
            assert not node_running(tui_node.config.home)

    asyncio.run(run())


def test_the_header_counts_what_the_node_admits(tui_node, tmp_path):
    corpus = copy_examples(tmp_path / "corpus")
    app = make_app(tui_node, fast_options())

    async def run() -> None:
        async with app.run_test(size=(120, 40)):
            await wait_until(lambda: app.mode == "node")
            app.add_path(str(corpus), "DEFAULT")
            await wait_until(lambda: app.queue is not None and app.queue.accepted == 6)
            await wait_until(lambda: "6 accepted, 0 rejected" in header_line(app))
            await wait_until(lambda: app.finished_total == 6)
            assert "● node DEFAULT" in header_line(app)

    asyncio.run(run())
