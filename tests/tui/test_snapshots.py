"""What each screen looks like, at 60x20 (a narrow split), 80x24 (an SSH terminal)
and 120x40, and at 80x24 drawn in ASCII (a C locale, the Linux console).

Deterministic: the sample corpus indexed with fixed ids and times, UTC, a fixed
clock, no node, no cursor blink, no timings. Update after a deliberate change
with ``pytest tests/tui/test_snapshots.py --snapshot-update`` and look at the
report before committing.
"""

from __future__ import annotations

import pytest

from kbtui.reads import Status
from kbtui.tui.ascii import wants_ascii
from kbtui.tui.screens.document import DocumentScreen
from kbtui.tui.screens.failures import FailuresScreen
from kbtui.tui.screens.preview import HitPreviewScreen
from kbtui.tui.screens.reader import ReaderScreen
from kbtui.tui.screens.search import SearchScreen
from kbtui.tui.widgets.reader_view import ReaderView
from store.catalog import set_status
from tests.tui.conftest import deterministic_options, make_app, wait_until

FAILED_ONE = "00000000000000000000000000000003"  # on-call-handbook.txt in the indexed sample corpus

SIZES = [pytest.param((60, 20), id="60x20"), pytest.param((80, 24), id="80x24"), pytest.param((120, 40), id="120x40")]


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


@pytest.mark.parametrize("size", SIZES[1:2])
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


DIALOGS = (("c", "collections"), ("a", "add"), ("R", "confirm"))


@pytest.mark.parametrize(
    ("size", "key"),
    [*[pytest.param(size.values[0], "question_mark", id=f"help-{size.id}") for size in SIZES],
     *[pytest.param(size, key, id=f"{name}-{size[0]}x{size[1]}") for size in ((80, 24), (120, 40)) for key, name in DIALOGS]],
)
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


@pytest.mark.parametrize("size", SIZES)
def test_failures(snap_compare, indexed_node, utc, size):
    set_status(FAILED_ONE, Status.FAILED, reason="extract_corrupt")
    app = make_app(indexed_node, deterministic_options())

    async def run_before(pilot) -> None:
        await wait_until(lambda: app.mode == "viewer" and len(app.documents_screen.rows) == 6)
        await pilot.press("x")
        await wait_until(lambda: isinstance(pilot.app.screen, FailuresScreen) and pilot.app.screen.rows)
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_documents_in_ascii_under_a_c_locale(snap_compare, indexed_node, utc):
    """What LANG=C (or TERM=linux) gets: every border, glyph and mark in ASCII, columns aligned."""
    assert wants_ascii({"LANG": "C", "TERM": "xterm"}, utf8_mode=False)
    app = make_app(indexed_node, deterministic_options(ascii_only=True))

    async def run_before(pilot) -> None:
        await documents_loaded(pilot)
        await pilot.press("down", "question_mark")
        await wait_until(lambda: pilot.app.screen is not pilot.app.documents_screen)
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
