"""A poll result handled while the app shuts down is dropped, not applied to a half-removed screen.

CI once caught the poll worker's result arriving after shutdown had removed the documents
screen's status line but before the screen itself had unmounted.
"""

from __future__ import annotations

import asyncio

from textual.widget import Widget

from kbtui.tui.messages import CatalogPolled
from tests.tui.conftest import add_examples, fast_options, make_app, wait_until


def test_a_poll_result_during_shutdown_does_not_crash_the_app(tui_node):
    add_examples(tui_node, names=["ssh-hardening.md"])
    snapshot = tui_node.snapshot("DEFAULT", with_queue=False)
    app = make_app(tui_node, fast_options(run_node=False))
    delivered_mid_teardown: list[bool] = []

    class LastToLeave(Widget):
        """Holds the screen's teardown open, as a loaded machine does, and delivers the late poll."""

        async def on_unmount(self) -> None:
            await asyncio.sleep(0.2)  # the siblings, the status line among them, are gone by now
            delivered_mid_teardown.append(not app.documents_screen.query("#documents-filter"))
            app.on_catalog_polled(CatalogPolled(snapshot))

    async def run() -> None:
        async with app.run_test(size=(80, 24)):
            await wait_until(lambda: len(app.documents_screen.rows) == 1)
            await app.documents_screen.mount(LastToLeave())

    asyncio.run(run())  # run_test re-raises whatever a handler raised during shutdown
    assert delivered_mid_teardown == [True]
