"""Every error and failure line names the file: in the TUI (a path that cannot
be added, the failed document's line, the failures view) and in the CLI."""

from __future__ import annotations

import asyncio

from textual.widgets import Static

from kbtui.tui.screens.failures import FailuresScreen
from tests.api.serving import kbtui
from tests.tui.conftest import fast_options, make_app, wait_until


def broken_and_fine(folder):
    folder.mkdir()
    (folder / "broken.pdf").write_bytes(b"%PDF-1.7\n" + b"\x00garbage" * 64)
    (folder / "fine.md").write_text("# Fine\n\nnothing wrong here\n")
    return folder


def test_the_tui_names_the_file_that_failed_or_could_not_be_added(tui_node, tmp_path):
    folder = broken_and_fine(tmp_path / "corpus")
    app = make_app(tui_node, fast_options())

    async def run() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_until(lambda: app.mode == "node")
            app.add_path(str(tmp_path / "nowhere.md"), "DEFAULT")
            await wait_until(lambda: any("nowhere.md" in str(n.message) for n in app._notifications))
            app.add_path(str(folder), "DEFAULT")
            documents = app.documents_screen
            await wait_until(lambda: any(r.status == "Failed" for r in documents.rows.values()))
            failed = next(r for r in documents.rows.values() if r.status == "Failed")
            while documents.selected_document_id() != failed.document_id:
                await pilot.press("j")
            hint = str(documents.query_one("#documents-hint", Static).content)
            assert hint.startswith("broken.pdf: extract_corrupt: ")
            await pilot.press("x")
            await wait_until(lambda: isinstance(app.screen, FailuresScreen) and app.screen.rows)
            why = str(app.screen.query_one("#failures-why", Static).content)
            assert why.startswith("broken.pdf: extract_corrupt: ")

    asyncio.run(run())


def test_the_cli_names_the_file_that_failed_or_does_not_exist(home, tmp_path):
    folder = broken_and_fine(tmp_path / "corpus")
    missing = kbtui(home, "add", str(folder), str(tmp_path / "nowhere.md"))
    assert missing.returncode == 2
    assert missing.stderr.strip() == f"kbtui: {tmp_path / 'nowhere.md'}: no such file or directory"
    added = kbtui(home, "add", str(folder), COLUMNS="200")
    assert added.returncode == 1
    failed = [line for line in added.stdout.splitlines() if line.startswith("failed ")]
    assert len(failed) == 1 and failed[0].startswith("failed broken.pdf (") and "extract_corrupt" in failed[0]
