"""The operator's main flow, keyboard only: add → watch to Indexed → search →
open → delete, with this process running the node."""

from __future__ import annotations

import asyncio

from textual.widgets import DataTable, Static

from kbtui.tui.screens.add_files import AddFilesScreen
from kbtui.tui.screens.document import DocumentScreen
from kbtui.tui.screens.documents import DocumentsScreen
from kbtui.tui.screens.preview import HitPreviewScreen
from kbtui.tui.screens.search import SearchScreen
from kbtui.tui.widgets.path_input import PathInput
from store.models import Document, StatusHistory
from store.node_lock import node_running
from tests.tui.conftest import copy_examples, fast_options, make_app, type_text, wait_until


def cell_texts(table: DataTable, row: int) -> list[str]:
    return [str(cell) for cell in table.get_row_at(row)]


def test_add_watch_search_open_delete(tui_node, tmp_path):
    corpus = copy_examples(tmp_path / "corpus")
    app = make_app(tui_node, fast_options())

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(lambda: app.mode == "node")
            assert node_running(tui_node.config.home)
            documents = app.documents_screen

            await pilot.press("a")
            await wait_until(lambda: isinstance(app.screen, AddFilesScreen))
            path_input = app.screen.query_one(PathInput)
            path_input.value = str(corpus.parent) + "/co"
            await pilot.press("r")  # the directory's name, then Tab completes it
            await wait_until(lambda: path_input._suggestion.endswith("corpus/"))
            await pilot.press("tab")
            assert path_input.value == str(corpus) + "/"
            await pilot.press("enter")
            table = documents.query_one("#documents", DataTable)
            await wait_until(lambda: table.row_count == 6)
            await wait_until(lambda: all(row.status == "Indexed" for row in documents.rows.values())
                             and len(documents.rows) == 6)
            await wait_until(lambda: all("Indexed" in cell_texts(table, i)[1] for i in range(6)))
            names = [cell_texts(table, i)[0] for i in range(6)]
            assert "ssh-hardening.md" in names and "tls-certificate-rotation.md" in names  # whole at 80 columns
            await wait_until(lambda: "Indexed 6" in str(documents.query_one("#documents-filter", Static).content))

            await pilot.press("slash")
            await wait_until(lambda: isinstance(app.screen, SearchScreen))
            await type_text(pilot, "rotate tls")
            search = app.screen
            await wait_until(lambda: search.answered_query == "rotate tls"
                             and str(search.query_one("#search-status", Static).content).startswith("6 hits in DEFAULT"))
            assert search.query_one("#search-results").option_count == 6  # one per document
            assert "TLS certificate rotation" in search.response.hits[0].heading_path

            await pilot.press("down", "enter")
            await wait_until(lambda: isinstance(app.screen, HitPreviewScreen))
            preview = app.screen
            await wait_until(lambda: preview.query(".-hit"))
            shown = " ".join(str(w.content) for w in preview.query(".chunk"))
            assert "this hit" in shown and "neighbour" in shown

            await pilot.press("o")
            await wait_until(lambda: isinstance(app.screen, DocumentScreen) and app.screen.detail is not None)
            detail = app.screen
            document_id = detail.document_id
            meta = str(detail.query_one("#document-meta", Static).content)
            assert "tls-certificate-rotation.md" in meta and "Indexed" in meta

            await pilot.press("d")
            await pilot.pause()
            await pilot.press("y")
            await wait_until(lambda: isinstance(app.screen, HitPreviewScreen))
            await wait_until(lambda: document_id not in documents.rows)
            assert Document.get_or_none(Document.id == document_id) is None
            assert not StatusHistory.select().where(StatusHistory.document == document_id).exists()

            await pilot.press("escape", "escape")
            await wait_until(lambda: isinstance(app.screen, DocumentsScreen))
            assert table.row_count == 5
            await pilot.press("q")
            await wait_until(lambda: not node_running(tui_node.config.home))

    asyncio.run(run())
    assert app.return_code == 0


def test_reindex_one_and_the_filter(tui_node, tmp_path):
    corpus = copy_examples(tmp_path / "corpus")
    app = make_app(tui_node, fast_options())

    async def run() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(lambda: app.mode == "node")
            app.add_path(str(corpus), "DEFAULT")
            documents = app.documents_screen
            await wait_until(lambda: len(documents.rows) == 6 and all(r.status == "Indexed" for r in documents.rows.values()))
            table = documents.query_one("#documents", DataTable)
            selected = documents.selected_document_id()
            before = StatusHistory.select().where(StatusHistory.document == selected).count()

            await pilot.press("r")
            await wait_until(lambda: StatusHistory.select().where(StatusHistory.document == selected).count() >= before + 5)
            await wait_until(lambda: documents.rows[selected].status == "Indexed")

            await wait_until(lambda: documents.counts == {"Indexed": 6})  # the status line caught up
            await pilot.press("s")  # the empty statuses are skipped: straight to Indexed
            assert documents.status_filter == "Indexed"
            await wait_until(lambda: table.row_count == 6)
            await pilot.press("s")  # and back to all
            assert documents.status_filter is None
            await pilot.press("1")  # a direct key: Pending, none
            assert documents.status_filter == "Pending"
            await wait_until(lambda: table.row_count == 0)
            await pilot.press("6")
            assert documents.status_filter == "Failed"
            await pilot.press("escape")
            assert documents.status_filter is None

            await pilot.press("R")
            await pilot.pause()
            await pilot.press("n")  # the confirmation says no: nothing is queued
            await pilot.pause(0.3)
            assert all(r.status == "Indexed" for r in documents.rows.values())

    asyncio.run(run())


def test_quitting_while_ingesting_drains_and_releases_the_node(tui_node, tmp_path):
    corpus = copy_examples(tmp_path / "corpus")
    app = make_app(tui_node, fast_options())

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(lambda: app.mode == "node")
            app.add_path(str(corpus), "DEFAULT")
            await wait_until(lambda: Document.select().count() == 6)
            await pilot.press("q")
            await wait_until(lambda: not app.is_running)

    asyncio.run(run())
    assert app.return_code == 0
    assert not node_running(tui_node.config.home)
    # Drained: what was in flight finished; nothing is stuck half-way.
    statuses = {d.status for d in Document.select()}
    assert statuses <= {"Indexed", "Pending"}
