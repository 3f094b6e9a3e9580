"""Every error and failure line names the file: in the TUI (a path that cannot
be added, the failed document's line, the failures view) and in the CLI."""

from __future__ import annotations

import asyncio
import subprocess
import sys

from textual.widgets import Static

from kbtui.tui.screens.failures import FailuresScreen
from tests.api.serving import kbtui, kbtui_env, start_node
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


def test_status_follow_names_the_document_that_failed_and_shows_the_nodes_log_lines(home, tmp_path):
    folder = broken_and_fine(tmp_path / "corpus")
    node = start_node(home)
    follow = subprocess.Popen([sys.executable, "-m", "kbtui", "status", "--follow"], env=kbtui_env(home, COLUMNS="200"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "node: running" in follow.stdout.readline()
        assert kbtui(home, "add", str(folder), "--no-wait").returncode == 0
        failed = logged = None
        for line in follow.stdout:  # until both lines came (in whichever order)
            if " failed broken.pdf (" in line:
                failed = line
            if "INFO actors.stage: document" in line and "failed: extract_corrupt" in line:
                logged = line  # the node's own log line: its id and reason code, never the name
            if failed and logged:
                break
        assert failed is not None and "extract_corrupt" in failed
        assert logged is not None and "broken.pdf" not in logged
    finally:
        follow.kill()
        follow.wait(timeout=30)
        node.stop()
