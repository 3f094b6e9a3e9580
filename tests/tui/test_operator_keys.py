"""k9s and lazygit habits beside the app's own keys: j/k/g/G and paging in every
list, the : command line, a name filter, sorting by a column, y to copy, the
events pane (in this process and from a running node's event stream), and a
re-index that reads as one."""

from __future__ import annotations

import asyncio

from textual.widgets import DataTable, Input, Static

from kbtui.tui.screens.add_files import AddFilesScreen
from kbtui.tui.screens.ask import AskScreen
from kbtui.tui.screens.command_line import CommandLineScreen
from kbtui.tui.screens.documents import DocumentsScreen
from kbtui.tui.screens.failures import FailuresScreen
from kbtui.tui.screens.help import HelpScreen
from kbtui.tui.screens.reader import ReaderScreen
from kbtui.tui.screens.search import SearchScreen
from kbtui.tui.screens.sources import SourcesScreen
from kbtui.tui.widgets.events_pane import EventsPane
from kbtui.tui.widgets.hit_list import HitList
from kbtui.tui.widgets.path_input import PathInput, PathSuggester
from kbtui.tui.widgets.reader_view import ReaderView
from store.catalog import add_document
from tests.api.serving import start_node
from tests.tui.conftest import fast_options, make_app, type_text, wait_until


def shown_names(screen: DocumentsScreen) -> list[str]:
    return [row.name for row in screen.rows.values()]


def counts_line(screen: DocumentsScreen) -> str:
    return str(screen.query_one("#documents-filter", Static).content)


def test_vim_keys_move_in_every_list_and_k_no_longer_opens_ask(indexed_node, utc):
    app = make_app(indexed_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            documents = app.documents_screen
            await wait_until(lambda: len(documents.rows) == 6)
            table = documents.query_one("#documents", DataTable)
            assert app.focused is table
            await pilot.press("j", "j")
            assert table.cursor_row == 2
            await pilot.press("k")
            assert table.cursor_row == 1 and not isinstance(app.screen, AskScreen)
            await pilot.press("G")
            assert table.cursor_row == 5
            await pilot.press("g")
            assert table.cursor_row == 0
            await pilot.press("ctrl+d")
            assert table.cursor_row == 5  # a page down (the six rows fit one page)
            await pilot.press("ctrl+u")
            assert table.cursor_row == 0

            await pilot.press("slash")
            await wait_until(lambda: isinstance(app.screen, SearchScreen))
            await type_text(pilot, "ssh")
            search = app.screen
            hits = search.query_one(HitList)
            await wait_until(lambda: hits.option_count >= 3)
            await pilot.press("down")  # into the results
            await pilot.press("j", "j")
            assert hits.highlighted == 2
            await pilot.press("k")
            assert hits.highlighted == 1
            await pilot.press("G")
            assert hits.highlighted == hits.option_count - 1
            await pilot.press("g")
            assert hits.highlighted == 0

            await pilot.press("v")
            await wait_until(lambda: isinstance(app.screen, ReaderScreen) and app.screen.text is not None)
            view = app.screen.query_one(ReaderView)
            await pilot.press("G")
            await wait_until(lambda: view.scroll_offset.y == view.max_scroll_y)
            if view.max_scroll_y:
                await pilot.press("k")
                await wait_until(lambda: view.scroll_offset.y == view.max_scroll_y - 1)

            await pilot.press("A")  # Ask has its own key now
            await wait_until(lambda: isinstance(app.screen, AskScreen))

    asyncio.run(run())


def test_the_command_line_completes_runs_and_refuses_what_it_does_not_know(indexed_node, utc):
    app = make_app(indexed_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(lambda: len(app.documents_screen.rows) == 6)
            await pilot.press("colon")
            await wait_until(lambda: isinstance(app.screen, CommandLineScreen))
            line = app.screen.query_one(Input)
            await type_text(pilot, "so")
            await pilot.press("tab")
            assert line.value == "sources "
            await pilot.press("enter")
            await wait_until(lambda: isinstance(app.screen, SourcesScreen))

            await pilot.press("colon")
            await wait_until(lambda: isinstance(app.screen, CommandLineScreen))
            await type_text(pilot, "nonsense")
            await pilot.press("enter")
            matches = app.screen.query_one("#command-matches", Static)
            assert isinstance(app.screen, CommandLineScreen)  # still open, saying why
            assert "no command 'nonsense'" in str(matches.content)
            await pilot.press("escape")
            await wait_until(lambda: isinstance(app.screen, SourcesScreen))

            await pilot.press("colon")
            await type_text(pilot, "fail")
            await pilot.press("enter")
            await wait_until(lambda: isinstance(app.screen, FailuresScreen))

            await pilot.press("colon")
            await type_text(pilot, "documents ssh")  # a word after it filters the names
            await pilot.press("enter")
            await wait_until(lambda: isinstance(app.screen, DocumentsScreen) and shown_names(app.screen) == ["ssh-hardening.md"])

            await pilot.press("colon")
            await type_text(pilot, "q")
            await pilot.press("enter")
            await wait_until(lambda: not app.is_running)

    asyncio.run(run())


def test_f_filters_names_as_you_type_and_capitals_sort_by_a_column(indexed_node, utc):
    app = make_app(indexed_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            documents = app.documents_screen
            await wait_until(lambda: len(documents.rows) == 6)
            await pilot.press("f")
            await type_text(pilot, "md")
            assert len(documents.rows) == 4  # narrowed on every key, before Enter
            await type_text(pilot, " tls")
            assert shown_names(documents) == ["tls-certificate-rotation.md"]
            await pilot.press("enter")
            table = documents.query_one("#documents", DataTable)
            assert app.focused is table and "names: md tls (1 shown; Esc clears)" in counts_line(documents)
            await pilot.press("escape")
            assert len(documents.rows) == 6

            await pilot.press("Z")  # by size, smallest first
            sizes = [row.size_bytes for row in documents.rows.values()]
            assert sizes == sorted(sizes)
            assert str(table.ordered_columns[2].label) == "Size ▲"
            await pilot.press("Z")  # again: largest first
            assert [row.size_bytes for row in documents.rows.values()] == sorted(sizes, reverse=True)
            await pilot.press("N")
            names = shown_names(documents)
            assert names == sorted(names, key=str.casefold)
            await pilot.press("N", "N")  # descending, then the catalog's order again
            assert documents.sort is None

    asyncio.run(run())


def test_y_copies_the_selected_documents_id_and_Y_its_path(indexed_node, utc):
    app = make_app(indexed_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            documents = app.documents_screen
            await wait_until(lambda: len(documents.rows) == 6)
            await pilot.press("j")
            row = documents.selected_row()
            await pilot.press("y")
            assert app.clipboard == row.document_id
            await pilot.press("Y")
            assert app.clipboard == "kubernetes-node-drain.md"  # no source path (added as a file): its name

    asyncio.run(run())


def test_a_reindex_reads_as_re_indexing_while_the_old_index_serves(indexed_node, utc):
    app = make_app(indexed_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(100, 24)):
            documents = app.documents_screen
            await wait_until(lambda: len(documents.rows) == 6)
            indexed_node.reindex(None, collection_id="DEFAULT")  # every document back in the queue
            await wait_until(lambda: all(row.status == "Pending" for row in documents.rows.values()))
            await wait_until(lambda: "6 re-indexing (serving the old index)" in counts_line(documents))
            assert "Pending" not in counts_line(documents)  # never read as a lost index
            table = documents.query_one("#documents", DataTable)
            assert str(table.get_row_at(0)[1]) == "re-indexing"
            hint = str(documents.query_one("#documents-hint", Static).content)
            assert hint.startswith("re-indexing (serving the old index)")
            assert len(indexed_node.search("ssh keys", "DEFAULT").hits) > 0  # and it does serve

    asyncio.run(run())


def test_the_events_pane_shows_the_nodes_log_lines_in_process(tui_node, tmp_path):
    app = make_app(tui_node, fast_options())

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(lambda: app.mode == "node")
            await pilot.press("l")
            pane = app.documents_screen.query_one(EventsPane)
            await wait_until(lambda: any("pipeline started" in line.text for line in pane.lines))

    asyncio.run(run())


def test_as_a_client_the_events_pane_follows_the_running_nodes_log_lines(tui_node, tmp_path):
    broken = tmp_path / "corpus" / "broken.pdf"
    broken.parent.mkdir()
    broken.write_bytes(b"%PDF-1.7\n" + b"\x00garbage" * 64)
    served = start_node(tui_node.config.home)
    try:
        app = make_app(tui_node, fast_options())

        async def run() -> None:
            async with app.run_test(size=(100, 30)) as pilot:
                await wait_until(lambda: app.mode == "client" and app.events_live)
                await pilot.press("colon")
                await type_text(pilot, "events")
                await pilot.press("enter")
                pane = app.documents_screen.query_one(EventsPane)
                app.add_path(str(broken.parent), "DEFAULT")
                # The other process fails the document and logs it; its stream brings the line here.
                await wait_until(lambda: any("failed: extract_corrupt" in line.text for line in pane.lines), timeout=60)
                shown = "\n".join(line.text for line in pane.lines)
                assert "broken.pdf" not in shown  # a log line never names a file
                await pilot.press("q")

        asyncio.run(run())
    finally:
        served.stop()


def test_help_at_80x24_says_it_scrolls_and_the_footer_always_shows_the_help_key(indexed_node, utc):
    app = make_app(indexed_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(60, 20)) as pilot:
            await wait_until(lambda: len(app.documents_screen.rows) == 6)
            footer = app.documents_screen.query_one("KeysFooter")
            await wait_until(lambda: footer.query(".footer-right"))
            await pilot.pause()
            right = footer.query(".footer-right").last()
            assert right.region.right == 60 and "?" in str(right.query("FooterKey").first().render())
            await pilot.resize_terminal(80, 24)
            await pilot.press("question_mark")
            await wait_until(lambda: isinstance(app.screen, HelpScreen))
            frame = app.screen.query_one("Vertical")
            await wait_until(lambda: "more below: j/↓ scrolls" in str(frame.border_subtitle))
            table = app.screen.query_one(DataTable)
            keys = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
            assert "j k  g G  ^d ^u" in keys  # the list keys, in one row

    asyncio.run(run())


def test_the_readers_status_line_names_the_section_of_the_match(tui_node, tmp_path):
    source = tmp_path / "guide.md"
    filler = "\n".join(f"line {n} of the alpha section" for n in range(30))
    source.write_text(f"# Guide\n\n## Alpha\n\n{filler}\n\n## Beta\n\nthe zebra crossing is painted white\n")
    document_id = add_document(tui_node.store, "DEFAULT", source, display_name="guide.md", fmt="markdown").document_id
    assert tui_node.index([document_id]) == {document_id: "Indexed"}
    app = make_app(tui_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(lambda: len(app.documents_screen.rows) == 1)
            await pilot.press("slash")
            await type_text(pilot, "zebra")
            await wait_until(lambda: isinstance(app.screen, SearchScreen) and app.screen.query_one(HitList).option_count)
            await pilot.press("down", "v")
            await wait_until(lambda: isinstance(app.screen, ReaderScreen) and app.screen.text is not None)
            view = app.screen.query_one(ReaderView)
            await wait_until(lambda: view.current_match is not None)
            status = app.screen.query_one("#reader-status", Static)
            await wait_until(lambda: "Guide › Beta" in str(status.content))
            assert view.top_offset < view.matches[0][0]  # the context above it is from another section

    asyncio.run(run())


def test_y_copies_from_the_search_hit_the_reader_and_the_detail_too(indexed_node, utc):
    app = make_app(indexed_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(lambda: len(app.documents_screen.rows) == 6)
            await pilot.press("slash")
            await type_text(pilot, "ssh")
            await wait_until(lambda: isinstance(app.screen, SearchScreen) and app.screen.response is not None)
            await pilot.press("down")
            hit = app.screen.response.hits[0]
            await pilot.press("Y")
            assert app.clipboard == "ssh-hardening.md"
            await pilot.press("v")
            await wait_until(lambda: isinstance(app.screen, ReaderScreen) and app.screen.text is not None)
            await pilot.press("y")
            assert app.clipboard == hit.document_id
            await pilot.press("escape", "escape", "escape")
            await wait_until(lambda: app.screen is app.documents_screen)
            await pilot.press("enter")
            await wait_until(lambda: getattr(app.screen, "detail", None) is not None)
            await pilot.press("y")
            assert app.clipboard == app.documents_screen.selected_document_id()

    asyncio.run(run())


def test_tab_in_the_add_dialog_completes_what_is_typed_even_before_a_suggestion_arrives(tui_node, tmp_path,
                                                                                         monkeypatch):
    (tmp_path / "corpus-one").mkdir()
    (tmp_path / "cor-other").mkdir()
    suggest = PathSuggester.get_suggestion

    async def slowly(self, value):  # a slow disk (or a network mount): suggestions arrive late
        await asyncio.sleep(0.5)
        return await suggest(self, value)

    monkeypatch.setattr(PathSuggester, "get_suggestion", slowly)
    app = make_app(tui_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(lambda: app.mode == "viewer")
            await pilot.press("a")
            await wait_until(lambda: isinstance(app.screen, AddFilesScreen))
            box = app.screen.query_one(PathInput)
            box.value = str(tmp_path) + "/co"
            await pilot.press("r")
            await wait_until(lambda: box._suggestion.endswith("cor-other/"))  # what "cor" suggested
            await pilot.press("p", "tab")  # typed on; Tab before "corp"'s suggestion could arrive
            assert box.value == str(tmp_path / "corpus-one") + "/"

    asyncio.run(run())
