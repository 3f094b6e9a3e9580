"""Fixtures for the terminal UI: a real node on a temp data dir, the app driven by
Textual's pilot, and a deterministic configuration for snapshots."""

from __future__ import annotations

import asyncio
import calendar
import dataclasses
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pykka
import pytest

from kbtui.config import Config
from kbtui.extract import format_for
from kbtui.node import Node
from kbtui.tui.app import KbtuiApp, TuiOptions
from store.db import database
from tests.conftest import on_postgres

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# 2026-03-14 09:30 UTC: every time the snapshots show is this or derived from it.
FIXED_NOW = float(calendar.timegm((2026, 3, 14, 9, 30, 0)))


def deterministic_options(**overrides: object) -> TuiOptions:
    """No node, no cursor blink, no timings, no remembered choices, a fixed clock."""
    values: dict[str, object] = dict(
        run_node=False, cursor_blink=False, show_timings=False, remember_preferences=False,
        clock=lambda: FIXED_NOW,
    )
    values.update(overrides)
    return TuiOptions(**values)  # type: ignore[arg-type]


def fast_options(**overrides: object) -> TuiOptions:
    """The real behaviour with short intervals, so tests do not wait long."""
    values: dict[str, object] = dict(poll_interval_s=0.2, flush_interval_s=0.05, search_debounce_s=0.05,
                                     cursor_blink=False, remember_preferences=False)
    values.update(overrides)
    return TuiOptions(**values)  # type: ignore[arg-type]


@pytest.fixture
def tui_node(home: Path) -> Iterator[Node]:
    """A node on an empty temp data dir with the hash embedder; actors stopped after."""
    node = Node.open(Config.load(home))
    yield node
    pykka.ActorRegistry.stop_all()
    node.close()


@pytest.fixture(scope="session")
def indexed_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir holding the indexed sample corpus, built once; tests copy it."""
    home = tmp_path_factory.mktemp("indexed") / "kbhome"
    node = Node.open(dataclasses.replace(Config.load(home), embedding_provider="hash"))
    try:
        indexed_examples(node)
    finally:
        pykka.ActorRegistry.stop_all()
        node.close()
    return home


@pytest.fixture
def indexed_node(home: Path, request: pytest.FixtureRequest) -> Iterator[Node]:
    """A node on a copy of the indexed sample corpus (fixed ids and times); on
    the PostgreSQL pass, the corpus indexed into the test's own database (the
    template is a SQLite data directory)."""
    if on_postgres():
        node = Node.open(Config.load(home))
        assert set(node.index(add_examples(node)).values()) == {"Indexed"}
    else:
        shutil.copytree(request.getfixturevalue("indexed_template"), home)
        node = Node.open(Config.load(home))
    yield node
    pykka.ActorRegistry.stop_all()
    node.close()


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local time is UTC for the test (snapshots show times)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@contextmanager
def sequential_ids() -> Iterator[None]:
    """Document ids 000…001, 000…002, … while adding (the snapshots show ids)."""
    counter = iter(range(1, 1_000_000))
    original = uuid.uuid4
    uuid.uuid4 = lambda: uuid.UUID(int=next(counter))  # type: ignore[assignment]
    try:
        yield
    finally:
        uuid.uuid4 = original  # type: ignore[assignment]


def add_examples(node: Node, collection_id: str = "DEFAULT", *, names: list[str] | None = None) -> list[str]:
    """Add the bundled sample corpus (or some of it) as Pending documents; return their ids."""
    paths = sorted(p for p in EXAMPLES.iterdir() if format_for(p.name))
    if names is not None:
        paths = [p for p in paths if p.name in names]
    return [
        node.store.catalog.add_document(collection_id, p, display_name=p.name, fmt=format_for(p.name) or "text").document_id
        for p in paths
    ]


def indexed_examples(node: Node) -> list[str]:
    """The sample corpus added with fixed ids and indexed (by a pipeline run now), at fixed times."""
    with sequential_ids():
        ids = add_examples(node)
    statuses = node.index(ids)
    assert set(statuses.values()) == {"Indexed"}
    with database.atomic():
        database.execute_sql("UPDATE document SET created_at = ?, updated_at = ?, indexed_at = ?",
                             [FIXED_NOW - 600, FIXED_NOW - 300, FIXED_NOW - 300])
        database.execute_sql("UPDATE status_history SET at = ?", [FIXED_NOW - 300])
    return ids


def copy_examples(target: Path) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    for path in EXAMPLES.iterdir():
        shutil.copy(path, target / path.name)
    return target


async def wait_until(predicate: Callable[[], object], *, timeout: float = 15.0, step: float = 0.05) -> None:
    """Let the app run until ``predicate()`` is true (fails the test on timeout)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("the UI did not get there in time")
        await asyncio.sleep(step)


async def type_text(pilot, text: str) -> None:
    """Type ``text`` key by key, as a person would."""
    await pilot.press(*[{" ": "space", "/": "slash", ".": "full_stop", "-": "minus", "_": "underscore"}.get(c, c) for c in text])


def make_app(node: Node, options: TuiOptions) -> KbtuiApp:
    return KbtuiApp(node, options=options)
