"""What each screen looks like, at 80x24 (an SSH terminal) and 120x40.

Deterministic: the sample corpus indexed with fixed ids and times, UTC, a fixed
clock, no node, no cursor blink, no timings. Update after a deliberate change
with ``pytest tests/tui/test_snapshots.py --snapshot-update`` and look at the
report before committing.
"""

from __future__ import annotations

import pytest

from kbtui.tui.screens.document import DocumentScreen
from kbtui.tui.screens.failures import FailuresScreen
from kbtui.tui.screens.preview import HitPreviewScreen
from kbtui.tui.screens.reader import ReaderScreen
from kbtui.tui.screens.search import SearchScreen
from kbtui.tui.widgets.reader_view import ReaderView
from tests.tui.conftest import deterministic_options, make_app, wait_until

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((120, 40), id="120x40")]


@pytest.fixture
def snapshot_app(indexed_node, utc):
    return make_app(indexed_node, deterministic_options())


async def documents_loaded(pilot) -> None:
    app = pilot.app
    await wait_until(lambda: app.mode == "viewer" and len(app.documents_screen.rows) == 6)
    await wait_until(lambda: "Indexed 6" in str(app.documents_screen.query_one("#documents-filter").content))


async def searched(pilot, query: str = "restore the database") -> SearchScreen:
    await documents_loaded(pilot)
    await pilot.press("slash")
    await wait_until(lambda: isinstance(pilot.app.screen, SearchScreen))
    screen = pilot.app.screen
    screen.query_one("#search-input").value = query  # typing is covered elsewhere; this is quicker
    await wait_until(lambda: screen.response is not None and screen.query_one("#search-results").option_count)
    return screen


@pytest.mark.parametrize("size", SIZES)
def test_documents(snap_compare, snapshot_app, size):
    async def run_before(pilot) -> None:
        await documents_loaded(pilot)
        await pilot.press("down", "down", "down")

    assert snap_compare(snapshot_app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_search_results(snap_compare, snapshot_app, size):
    async def run_before(pilot) -> None:
        await searched(pilot)

    assert snap_compare(snapshot_app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES[:1])
def test_search_explained(snap_compare, snapshot_app, size):
    async def run_before(pilot) -> None:
        await searched(pilot, "ssh keys")
        await pilot.press("down", "e")

    assert snap_compare(snapshot_app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_hit_preview(snap_compare, snapshot_app, size):
    async def run_before(pilot) -> None:
        await searched(pilot)
        await pilot.press("down", "enter")
        await wait_until(lambda: isinstance(pilot.app.screen, HitPreviewScreen) and pilot.app.screen.query(".-hit"))

    assert snap_compare(snapshot_app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize(
    ("size", "tab"),
    [
        pytest.param((80, 24), "1", id="history-80x24"),
        pytest.param((120, 40), "1", id="history-120x40"),
        pytest.param((80, 24), "2", id="sections-80x24"),
        pytest.param((80, 24), "3", id="chunks-80x24"),
    ],
)
def test_document_detail(snap_compare, snapshot_app, size, tab):
    async def run_before(pilot) -> None:
        await documents_loaded(pilot)
        await pilot.press("down", "down", "down", "enter")
        await wait_until(lambda: isinstance(pilot.app.screen, DocumentScreen) and pilot.app.screen.detail is not None)
        await pilot.press(tab)

    assert snap_compare(snapshot_app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_sources_with_nothing_registered(snap_compare, snapshot_app, size):
    async def run_before(pilot) -> None:
        await documents_loaded(pilot)
        await pilot.press("i")
        await wait_until(lambda: "No sources yet" in str(pilot.app.screen.query_one("#sources-summary").content))

    assert snap_compare(snapshot_app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("key", ["question_mark", "c", "a", "R"], ids=["help", "collections", "add", "confirm"])
def test_dialogs(snap_compare, snapshot_app, size, key):
    async def run_before(pilot) -> None:
        await documents_loaded(pilot)
        await pilot.press(key)
        await wait_until(lambda: pilot.app.screen is not pilot.app.documents_screen)
        await pilot.pause(0.2)

    assert snap_compare(snapshot_app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_reader_at_the_hit(snap_compare, snapshot_app, size):
    async def run_before(pilot) -> None:
        await searched(pilot, "restore the database")
        await pilot.press("down", "v")
        await wait_until(lambda: isinstance(pilot.app.screen, ReaderScreen) and pilot.app.screen.text is not None)
        view = pilot.app.screen.query_one(ReaderView)
        await wait_until(lambda: view.current_match is not None)
        await pilot.pause(0.2)

    assert snap_compare(snapshot_app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES[:1])
def test_failures(snap_compare, snapshot_app, size):
    async def run_before(pilot) -> None:
        await documents_loaded(pilot)
        await pilot.press("x")
        await wait_until(lambda: isinstance(pilot.app.screen, FailuresScreen))
        await pilot.pause(0.2)

    assert snap_compare(snapshot_app, terminal_size=size, run_before=run_before)
