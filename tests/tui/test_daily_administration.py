"""Issue 20 in the terminal UI, finding by finding: quit, the reader, the preview,
the collections dialog, search keys, the ingestion view, failures, Ask, code
symbols and interrupted documents. (Quitting under the real model is in
test_tmux_quit.py; the CLI's findings are in tests/cli/test_daily_output.py.)"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools

from textual.widgets import DataTable, Input, Static

from kbtui.config import Config
from kbtui.node import Node
from kbtui.reads import Status
from kbtui.tui.batch import BatchTracker
from kbtui.tui.screens.ask import AskScreen
from kbtui.tui.screens.collections import CollectionsScreen
from kbtui.tui.screens.document import DocumentScreen
from kbtui.tui.screens.failures import FailuresScreen
from kbtui.tui.screens.preview import HitPreviewScreen
from kbtui.tui.screens.reader import JumpScreen, ReaderScreen
from kbtui.tui.screens.search import SearchScreen
from kbtui.tui.widgets.reader_view import ReaderView
from store.catalog import add_document, set_status
from tests.tui.conftest import add_examples, fast_options, make_app, type_text, wait_until


def notifications(app) -> list[str]:
    return [n.message for n in app._notifications]


async def search_for(app, pilot, query: str) -> SearchScreen:
    await pilot.press("slash")
    await wait_until(lambda: isinstance(app.screen, SearchScreen))
    screen = app.screen
    await type_text(pilot, query)
    await wait_until(lambda: screen.response is not None and screen.answered_query == query
                     and screen.query_one("#search-results").option_count)
    return screen


# ---------------------------------------------------------------- 1: quit


def test_the_first_q_says_at_once_what_drains_and_the_second_leaves(tui_node):
    app = make_app(tui_node, fast_options())

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(lambda: app.mode == "node")
            runtime = app.runtime
            stop = runtime.stop
            release = asyncio.Event()

            def slow_stop(*, drain_timeout_s=None):  # a drain that waits until hurried
                while not runtime._hurry.wait(0.05):
                    pass
                stop(drain_timeout_s=0)

            runtime.stop = slow_stop
            await pilot.press("q")
            await wait_until(lambda: any("Stopping the node" in n for n in notifications(app)), timeout=1.0)
            assert app.is_running and "q again: leave now" in notifications(app)[-1]
            await pilot.press("q")
            await wait_until(lambda: not app.is_running, timeout=2.0)
            release.set()

    asyncio.run(run())
    assert app.return_value == 0


# ---------------------------------------------------------------- 2 and 3: reader, preview


def test_the_preview_opens_on_the_hit_and_prints_the_overlap_once(indexed_node, utc):
    app = make_app(indexed_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(60, 20)) as pilot:
            await wait_until(lambda: app.mode == "viewer")
            await search_for(app, pilot, "pg_basebackup wal archive")
            await pilot.press("down", "enter")
            await wait_until(lambda: isinstance(app.screen, HitPreviewScreen) and app.screen.query(".-hit"))
            preview = app.screen
            hit = preview.query_one(".-hit")
            container = preview.query_one("#preview-chunks")
            await wait_until(lambda: hit.region.y - container.region.y <= 1)  # the hit at the top, not row 21
            texts = [str(w.content) for w in preview.query(".chunk")]
            for before, after in itertools.pairwise(texts):
                tail = before.split("\n", 1)[1][-60:].strip()
                assert tail not in after  # the chunker's overlap is shown once

    asyncio.run(run())


def test_the_reader_shows_the_whole_document_at_the_hit_and_steps_through_matches(indexed_node, utc):
    app = make_app(indexed_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(60, 16)) as pilot:
            await wait_until(lambda: app.mode == "viewer")
            search = await search_for(app, pilot, "drain")
            hit = search.response.hits[0]
            await pilot.press("down", "v")
            await wait_until(lambda: isinstance(app.screen, ReaderScreen) and app.screen.text is not None)
            reader = app.screen
            view = reader.query_one(ReaderView)
            text = reader.text
            whole = indexed_node.reader_text(hit.document_id, hit.collection_id)
            assert text.text == whole.text and len(text.text) > 2 * len(hit.text)  # all of it, not a chunk
            assert len(text.headings) >= 3
            start = text.offset_of(hit.chunk_id)
            await wait_until(lambda: view.current_match is not None)
            assert view.matches and view.matches[view.current_match][0] >= start
            first = view.current_match
            await pilot.press("n")
            assert view.current_match == (first + 1) % len(view.matches)
            await pilot.press("N", "N")
            assert view.current_match == (first - 1) % len(view.matches)
            assert "match" in str(reader.query_one("#reader-status", Static).content)
            await pilot.press("h")
            await wait_until(lambda: isinstance(app.screen, JumpScreen))
            await pilot.press("end", "enter")
            await wait_until(lambda: isinstance(app.screen, ReaderScreen))
            await wait_until(lambda: view.top_offset > 0)
            assert 0 <= view.row_of(text.headings[-1].offset) - view.scroll_offset.y < view.size.height

    asyncio.run(run())


def test_enter_on_a_chunk_reads_the_document_from_there(indexed_node, utc):
    app = make_app(indexed_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            documents = app.documents_screen
            await wait_until(lambda: len(documents.rows) == 6)
            name = "kubernetes-node-drain.md"
            document_id = next(r.document_id for r in documents.rows.values() if r.name == name)
            app.open_document(document_id)
            await wait_until(lambda: isinstance(app.screen, DocumentScreen) and app.screen.detail is not None)
            detail = app.screen.detail
            await pilot.press("3", "down", "down", "enter")
            await wait_until(lambda: isinstance(app.screen, ReaderScreen) and app.screen.text is not None)
            reader = app.screen
            assert reader.chunk_id == detail.chunks[2].chunk_id
            start = reader.text.offset_of(reader.chunk_id)
            view = reader.query_one(ReaderView)
            await wait_until(lambda: 0 <= view.row_of(start) - view.scroll_offset.y < view.size.height)

    asyncio.run(run())


# ---------------------------------------------------------------- 4, 5: collections, search keys


def test_typing_in_the_collections_dialog_makes_a_new_collection(tui_node):
    add_examples(tui_node, names=["ssh-hardening.md"])
    app = make_app(tui_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(lambda: len(app.documents_screen.rows) == 1)
            await pilot.press("c")
            await wait_until(lambda: isinstance(app.screen, CollectionsScreen))
            await type_text(pilot, "ops")
            await pilot.press("enter")
            await wait_until(lambda: app.collection_id == "OPS")

    asyncio.run(run())


def test_slash_again_replaces_the_query_and_enter_opens_the_first_hit(indexed_node, utc):
    app = make_app(indexed_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(lambda: app.mode == "viewer")
            search = await search_for(app, pilot, "restart")
            await pilot.press("escape")
            await pilot.press("slash")
            await wait_until(lambda: isinstance(app.screen, SearchScreen))
            await type_text(pilot, "ssh keys")
            assert search.query_one("#search-input", Input).value == "ssh keys"
            await pilot.press("enter")
            await wait_until(lambda: isinstance(app.screen, HitPreviewScreen))
            assert app.screen.hit == search.response.hits[0]
            assert search.answered_query == "ssh keys"

    asyncio.run(run())


# ---------------------------------------------------------------- 6, 7: ingestion view, failures


def test_the_list_follows_new_rows_and_a_batch_ends_with_a_summary(tui_node, tmp_path):
    app = make_app(tui_node, fast_options(run_node=False))
    for number in range(30):
        (tmp_path / f"n{number:02d}.md").write_text(f"# Note {number}\n\nword{number}")

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            documents = app.documents_screen
            table = documents.query_one("#documents", DataTable)
            await wait_until(lambda: app.mode == "viewer")
            for number in range(20):
                add_document(tui_node.store, "DEFAULT", tmp_path / f"n{number:02d}.md", display_name=f"n{number:02d}.md",
                             fmt="markdown")
            await wait_until(lambda: len(documents.rows) == 20)
            await pilot.pause(0.2)
            documents.following = True  # as after an add from this UI
            for number in range(20, 30):
                add_document(tui_node.store, "DEFAULT", tmp_path / f"n{number:02d}.md", display_name=f"n{number:02d}.md",
                             fmt="markdown")
            await wait_until(lambda: len(documents.rows) == 30)
            await wait_until(lambda: table.cursor_row == 29 and table.scroll_y > 0)  # the newest row is in view

    asyncio.run(run())
    tracker = BatchTracker()
    assert tracker.observe(0.0, {"Indexed": 5}, 5) is None
    tracker.note_skipped(2)
    assert tracker.observe(1.0, {"Indexed": 5, "Pending": 3}, 5) is None
    assert tracker.observe(2.0, {"Indexed": 7, "Embedding": 1}, 7) is None
    summary = tracker.observe(75.0, {"Indexed": 7, "Failed": 1}, 8)
    assert summary is not None and summary.text() == "3 added, 0 updated, 2 skipped, 1 failed in 1 min 14 s"


def test_failures_are_explained_and_can_be_retried_from_the_ui(tui_node, tmp_path):
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"not a pdf at all")
    document_id = add_document(tui_node.store, "DEFAULT", broken, display_name="broken.pdf", fmt="pdf").document_id
    assert tui_node.index([document_id]) == {document_id: "Failed"}
    app = make_app(tui_node, fast_options(run_node=False))
    retried: list[tuple[str, ...] | None] = []
    app.reindex_documents = lambda ids: retried.append(tuple(ids) if ids else None)  # type: ignore[method-assign]

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            documents = app.documents_screen
            await wait_until(lambda: len(documents.rows) == 1)
            hint = documents.query_one("#documents-hint", Static)
            await wait_until(lambda: "extract_corrupt: the parser could not read" in str(hint.content))
            await pilot.press("x")
            await wait_until(lambda: isinstance(app.screen, FailuresScreen) and app.screen.rows)
            reasons = str(app.screen.query_one("#failures-reasons", Static).content)
            assert "extract_corrupt ×1" in reasons and "damaged" in reasons
            await pilot.press("r")
            await wait_until(lambda: retried == [(document_id,)])

    asyncio.run(run())


# ---------------------------------------------------------------- 9: Ask without a chat model


def test_ask_says_there_is_no_chat_model_before_anything_is_typed(home):
    node = Node.open(dataclasses.replace(Config.load(home), chat_model=""))
    add_examples(node, names=["ssh-hardening.md"])
    node.index([r.document_id for r in node.documents()])
    app = make_app(node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(lambda: app.mode == "viewer")
            await pilot.press("A")
            await wait_until(lambda: isinstance(app.screen, AskScreen))
            ask = app.screen
            status = ask.query_one("#ask-status", Static)
            await wait_until(lambda: "No chat model is configured" in str(status.content))
            assert "Enter searches instead" in str(status.content)  # as the README says; not ctrl+s (XOFF)
            await type_text(pilot, "ssh keys")
            await pilot.press("enter")
            table = ask.query_one("#ask-results", DataTable)
            await wait_until(lambda: table.row_count > 0)
            assert table.columns[list(table.columns)[-1]].width >= 30  # at 80 columns: not a 20-column sliver

    try:
        asyncio.run(run())
    finally:
        node.close()


# ---------------------------------------------------------------- 10: code symbols


def test_a_code_hit_shows_its_symbol_in_the_preview(tui_node, tmp_path):
    source = tmp_path / "rotation.py"
    source.write_text("def rotate_certificates(days):\n    '''Renew the certificates before expiry.'''\n"
                      "    return days < 21\n\n\nclass Keyring:\n    pass\n")
    document_id = add_document(tui_node.store, "DEFAULT", source, display_name="rotation.py", fmt="code:python").document_id
    assert tui_node.index([document_id]) == {document_id: "Indexed"}
    app = make_app(tui_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_until(lambda: app.mode == "viewer")
            await search_for(app, pilot, "rotate_certificates")
            await pilot.press("enter")
            await wait_until(lambda: isinstance(app.screen, HitPreviewScreen) and app.screen.query(".-hit"))
            heading = str(app.screen.query_one("#preview-heading", Static).content)
            assert "ƒ rotate_certificates" in heading

    asyncio.run(run())


# ---------------------------------------------------------------- interrupted documents


def test_documents_left_mid_stage_show_as_interrupted(tui_node):
    ids = add_examples(tui_node, names=["ssh-hardening.md", "tls-certificate-rotation.md"])
    set_status(ids[0], Status.EMBEDDING, progress=0.6)  # a node stopped here
    app = make_app(tui_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(80, 24)):
            documents = app.documents_screen
            table = documents.query_one("#documents", DataTable)
            await wait_until(lambda: len(documents.rows) == 2)
            await wait_until(lambda: "interrupted — resumes at next start"
                             in str(documents.query_one("#documents-filter", Static).content))
            await wait_until(lambda: str(table.get_cell(ids[0], "status")) == "interrupted")
            assert str(table.get_cell(ids[1], "status")) == "Pending"

    asyncio.run(run())
