"""Keys that work everywhere: / search, Esc back, ? help, c collections, the palette, q quit."""

from __future__ import annotations

import asyncio

from textual.command import CommandList, CommandPalette
from textual.widgets import DataTable, Input

from kbtui.tui.screens.collections import CollectionsScreen
from kbtui.tui.screens.document import DocumentScreen
from kbtui.tui.screens.documents import DocumentsScreen
from kbtui.tui.screens.help import HelpScreen
from kbtui.tui.screens.search import SearchScreen
from store.models import Document
from tests.tui.conftest import add_examples, fast_options, make_app, type_text, wait_until


def test_slash_reaches_search_from_a_deeper_screen_and_esc_walks_back(indexed_node, utc):
    first = Document.select().order_by(Document.created_at, Document.id).first().id
    app = make_app(indexed_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(lambda: len(app.documents_screen.rows) == 6)
            await pilot.press("enter")  # the first document
            await wait_until(lambda: isinstance(app.screen, DocumentScreen))
            assert app.screen.document_id == first
            await pilot.press("slash")
            await wait_until(lambda: isinstance(app.screen, SearchScreen))
            await pilot.pause()
            assert isinstance(app.focused, Input) and app.focused.id == "search-input"
            await type_text(pilot, "q")  # typed into the search box, not quitting
            assert app.screen.query_one(Input).value == "q"
            await pilot.press("escape")
            await wait_until(lambda: isinstance(app.screen, DocumentScreen))
            await pilot.press("escape")
            await wait_until(lambda: isinstance(app.screen, DocumentsScreen))
            await pilot.press("slash")  # the search screen kept its text
            await wait_until(lambda: isinstance(app.screen, SearchScreen))
            assert app.screen.query_one(Input).value == "q"

    asyncio.run(run())


def test_help_lists_the_keys_of_the_screen_and_the_app(tui_node):
    app = make_app(tui_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("question_mark")
            await wait_until(lambda: isinstance(app.screen, HelpScreen))
            table = app.screen.query_one(DataTable)
            rows = {str(table.get_row_at(i)[0]): str(table.get_row_at(i)[1]) for i in range(table.row_count)}
            assert rows["a"] == "Add" and rows["d"] == "Delete" and rows["/"] == "Search" and rows["q"] == "Quit"
            assert rows["c"] == "Collection" and rows["i"] == "Sources" and rows["A"] == "Ask"
            await pilot.press("q")  # closes the help, does not quit
            await wait_until(lambda: isinstance(app.screen, DocumentsScreen))
            assert app.is_running

    asyncio.run(run())


def test_switching_collection_shows_its_documents(tui_node):
    add_examples(tui_node, "DEFAULT", names=["ssh-hardening.md"])
    add_examples(tui_node, "RUNBOOKS", names=["kubernetes-node-drain.md", "postgres-backup-restore.md"])
    app = make_app(tui_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            documents = app.documents_screen
            await wait_until(lambda: len(documents.rows) == 1 and app.known_collections == ("DEFAULT", "RUNBOOKS"))
            await pilot.press("c")
            await wait_until(lambda: isinstance(app.screen, CollectionsScreen))
            await pilot.press("down", "enter")
            await wait_until(lambda: app.collection_id == "RUNBOOKS" and len(documents.rows) == 2)
            assert {r.name for r in documents.rows.values()} == {"kubernetes-node-drain.md", "postgres-backup-restore.md"}
            # A new collection by name: canonicalised, and empty.
            await pilot.press("c")
            await wait_until(lambda: isinstance(app.screen, CollectionsScreen))
            await pilot.press("tab")
            await type_text(pilot, "new one")
            await pilot.press("enter")
            await pilot.pause()
            assert "may only contain" in str(app.screen.query_one("#collections-problem").content)
            await pilot.press("escape")
            await wait_until(lambda: isinstance(app.screen, DocumentsScreen))
            assert app.collection_id == "RUNBOOKS"

    asyncio.run(run())


def test_the_palette_offers_every_action_and_runs_them(tui_node):
    add_examples(tui_node, names=["ssh-hardening.md", "tls-certificate-rotation.md"])
    app = make_app(tui_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_until(lambda: len(app.documents_screen.rows) == 2)
            await pilot.press("ctrl+p")
            await wait_until(lambda: isinstance(app.screen, CommandPalette))
            await type_text(pilot, "delete document")
            # The palette gathers matches asynchronously; Enter runs the only one.
            await wait_until(lambda: app.screen.query_one(CommandList).option_count == 1)
            await pilot.press("enter")
            await wait_until(lambda: app.screen.__class__.__name__ == "ConfirmScreen")
            await pilot.press("y")
            await wait_until(lambda: len(app.documents_screen.rows) == 1)
            assert Document.select().count() == 1

            from kbtui.tui.commands import palette_commands

            titles = {c.title for c in palette_commands(app)}
            for wanted in ("Search", "Add files", "Reindex all documents", "Sources", "Ask a question",
                           "Switch collection", "Toggle explain", "Keys", "Quit", "Show Failed documents"):
                assert wanted in titles
            assert "Delete document tls-certificate-rotation.md" in titles

    asyncio.run(run())
