"""The Nodes view: M (or :nodes) lists the nodes of the knowledge base and
keeps them fresh (the list is read off the UI thread every two seconds)."""

from __future__ import annotations

import asyncio

from textual.widgets import DataTable

from kbtui.tui.screens.nodes import NodesScreen
from tests.tui.conftest import fast_options, make_app, wait_until


def test_the_nodes_screen_lists_the_running_node_and_goes_back(tui_node):
    app = make_app(tui_node, fast_options())

    async def run() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_until(lambda: app.mode == "node")
            await pilot.press("M")
            await wait_until(lambda: isinstance(app.screen, NodesScreen))
            screen = app.screen
            table = screen.query_one("#nodes-table", DataTable)
            await wait_until(lambda: table.row_count == 1 and "alive" in str(table.get_row_at(0)[3]))
            row = [str(cell) for cell in table.get_row_at(0)]
            assert row[0] == tui_node.node_id()[:8] and row[2] == "pipeline"
            assert row[8] == "hash:feature-hash@v1:native:256"
            # Refreshed in the background: the heartbeat column is read again.
            first = screen.records
            await wait_until(lambda: screen.records is not first, timeout=10)
            await pilot.press("escape")
            await wait_until(lambda: not isinstance(app.screen, NodesScreen))
            # The command line opens it too.
            await pilot.press("colon")
            await pilot.press("n", "o", "d", "e", "s", "enter")
            await wait_until(lambda: isinstance(app.screen, NodesScreen))

    asyncio.run(run())
