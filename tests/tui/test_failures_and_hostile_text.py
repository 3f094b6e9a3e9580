"""Failures become notifications (content-free); hostile names and text show inert; no text in logs."""

from __future__ import annotations

import asyncio
import logging

from textual.widgets import DataTable, Static

from kbtui.tui.screens.search import SearchScreen
from store import catalog
from tests.tui.conftest import fast_options, make_app, type_text, wait_until

CANARY = "zqxcanary"


def notifications(app) -> list[str]:
    return [n.message for n in app._notifications]


def test_a_bad_path_is_a_notification_not_a_crash(tui_node, tmp_path):
    app = make_app(tui_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(80, 24)):
            await wait_until(lambda: app.mode == "viewer")
            app.add_path(str(tmp_path / f"missing-{CANARY}"), "DEFAULT")
            await wait_until(lambda: notifications(app))
            # Named as typed, on the operator's screen (the canary check: never in a log).
            assert notifications(app) == [f"{tmp_path / f'missing-{CANARY}'}: no such file or directory"]
            assert app.is_running

    asyncio.run(run())


def test_files_refused_mid_add_are_counted_by_reason_not_a_crash(tui_node, tmp_path, monkeypatch):
    import os

    from kbtui.sources.scan import SourceScan

    folder = tmp_path / "folder"
    for name in ("a", "b", "c", "d"):
        (folder / f"{CANARY}-{name}.md").parent.mkdir(exist_ok=True)
        (folder / f"{CANARY}-{name}.md").write_text(f"# {name}\n\ntext {name}\n")
    examine = SourceScan._examine

    def swapped_after_listing(self, raw, *args):
        if raw == f"{CANARY}-b.md".encode():
            (folder / f"{CANARY}-b.md").unlink()  # deleted between listing and opening
        if raw == f"{CANARY}-c.md".encode():
            (folder / f"{CANARY}-c.md").unlink()
            os.mkfifo(folder / f"{CANARY}-c.md")  # a FIFO swapped in: must not block
        return examine(self, raw, *args)

    monkeypatch.setattr(SourceScan, "_examine", swapped_after_listing)
    app = make_app(tui_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(80, 24)):
            await wait_until(lambda: app.mode == "viewer")
            app.add_path(str(folder), "DEFAULT")
            await wait_until(lambda: notifications(app))
            assert notifications(app)[0].startswith("2 added, 2 skipped (1 not_regular, 1 vanished)")
            assert app.is_running

    asyncio.run(run())


def test_an_unexpected_search_error_names_its_type_only(tui_node):
    def broken_search(query, collection_id, **options):
        raise RuntimeError(f"failed while handling {query}")

    tui_node.search = broken_search
    app = make_app(tui_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(lambda: app.mode == "viewer")
            await pilot.press("slash")
            await wait_until(lambda: isinstance(app.screen, SearchScreen))
            await type_text(pilot, CANARY)
            await wait_until(lambda: notifications(app))
            assert set(notifications(app)) == {"search failed (RuntimeError)"}
            await wait_until(lambda: str(app.screen.query_one("#search-status").content) == "Search failed (RuntimeError).")

    asyncio.run(run())


def test_names_that_could_reorder_or_hide_text_are_shown_escaped(tui_node, tmp_path):
    source = tmp_path / "plain.md"
    source.write_text("# Notes\n\nSome text.\n")
    catalog.add_document(tui_node.store, "DEFAULT", source, display_name="invoice\u202efdp.exe\nsecond line", fmt="markdown")
    app = make_app(tui_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(120, 40)):
            documents = app.documents_screen
            await wait_until(lambda: documents.query_one("#documents", DataTable).row_count == 1)
            name = str(documents.query_one("#documents", DataTable).get_row_at(0)[0])
            assert name == "invoice\\u202efdp.exe\\nsecond line"

    asyncio.run(run())


def test_no_document_text_name_or_query_reaches_a_log(tui_node, tmp_path, caplog):
    folder = tmp_path / f"docs-{CANARY}"
    folder.mkdir()
    (folder / f"{CANARY}.md").write_text(f"# {CANARY} heading\n\nBody with {CANARY} inside.\n")
    app = make_app(tui_node, fast_options())
    caplog.set_level(logging.DEBUG)

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(lambda: app.mode == "node")
            app.add_path(str(folder), "DEFAULT")
            await wait_until(lambda: any(r.status == "Indexed" for r in app.documents_screen.rows.values()))
            await pilot.press("slash")
            await wait_until(lambda: isinstance(app.screen, SearchScreen))
            await type_text(pilot, CANARY)
            await wait_until(lambda: "1 hit in DEFAULT" in str(app.screen.query_one("#search-status", Static).content))

    asyncio.run(run())
    assert caplog.records  # the pipeline did log (ids and counts)
    assert CANARY not in caplog.text
