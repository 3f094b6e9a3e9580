"""Benchmark: key-to-screen latency of the terminal UI while 1,000 documents ingest.

The app runs headless under Textual's pilot as the node (the real actor
pipeline in this process, events through the bridge). It adds N generated
Markdown documents, then, while they ingest, sends keys the way a terminal
does (through the driver, one every ``--gap-ms``) and times each from the key
to the first frame composed after the key's effect is visible:

* ``table``: Down/Up on the documents table (1,000 rows updating live);
* ``search``: a character typed into the search box;
* ``results``: a query typed key by key (``--gap-ms`` apart), timed from its
  last key to the first frame showing the results for the whole query
  (type-ahead: the debounce, the search in its worker, the list drawn). The
  target is 150 ms while ingesting.

The same keys are timed again once ingestion has finished (idle), and the
table reports p50/p95/max of each and the ratio to idle. A frame counts when
the app hands a composed update to its driver (headless: not written) and the
key's effect is already in it.

    python benchmarks/tui_latency.py [--documents 1000] [--keys 120] [--provider hash] [--debounce-ms N] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import write_documents  # noqa: E402
from textual import events  # noqa: E402
from textual.widgets import DataTable, Input  # noqa: E402

from kbtui.config import Config  # noqa: E402
from kbtui.node import Node  # noqa: E402
from kbtui.tui.app import KbtuiApp, TuiOptions  # noqa: E402
from kbtui.tui.screens.search import SearchScreen  # noqa: E402


@dataclass(frozen=True)
class Row:
    phase: str  # ingesting | idle
    key: str  # table | search
    samples: int
    p50_ms: float
    p95_ms: float
    max_ms: float
    indexed_during: int  # documents that finished while the keys were sent


class FrameClock:
    """Times the first frame that shows a change: the app's hand-off of each
    composed frame to its driver is wrapped, and the awaited change is checked
    right there, so the frame is known to contain it."""

    def __init__(self, app: KbtuiApp) -> None:
        self.visible: Callable[[], bool] | None = None
        self.shown_at: float | None = None
        original = app._display

        def display(screen, renderable) -> None:  # noqa: ANN001
            original(screen, renderable)
            if renderable is not None and self.visible is not None and self.visible():
                self.shown_at = time.perf_counter()
                self.visible = None

        app._display = display  # type: ignore[method-assign]

    def expect(self, visible: Callable[[], bool]) -> None:
        self.shown_at = None
        self.visible = visible


async def key_latency(app: KbtuiApp, clock: FrameClock, key: str, visible: Callable[[], bool], timeout_s: float = 5.0) -> float:
    """Seconds from sending ``key`` to the first composed frame in which ``visible()`` holds."""
    event = events.Key(key, " " if key == "space" else key if len(key) == 1 else None)
    event.set_sender(app)
    clock.expect(visible)
    sent = time.perf_counter()
    app._driver.send_message(event)  # as a terminal would
    while clock.shown_at is None:
        if time.perf_counter() - sent > timeout_s:
            raise SystemExit(f"key {key!r} showed nothing within {timeout_s} s (value: {getattr(app.focused, 'value', None)!r})")
        await asyncio.sleep(0.001)
    return clock.shown_at - sent


def summarise(phase: str, key: str, samples: list[float], indexed_during: int) -> Row:
    ordered = sorted(samples)
    p95 = ordered[max(0, int(round(0.95 * len(ordered))) - 1)]
    return Row(phase, key, len(samples), statistics.median(ordered) * 1000, p95 * 1000, ordered[-1] * 1000, indexed_during)


async def measure_keys(app: KbtuiApp, clock: FrameClock, count: int, gap_s: float, phase: str) -> list[Row]:
    documents = app.documents_screen
    table = documents.query_one("#documents", DataTable)
    indexed_before = app.finished_total
    table_samples = []
    app.action_show_documents()
    await asyncio.sleep(0.2)
    table.focus()
    for i in range(count):
        key = "down" if (i // 10) % 2 == 0 else "up"
        before = table.cursor_row
        target = before + 1 if key == "down" else max(0, before - 1)
        if target == before:
            continue
        table_samples.append(await key_latency(app, clock, key, lambda t=target: table.cursor_row == t))
        await asyncio.sleep(gap_s)
    app.action_focus_search()
    await asyncio.sleep(0.3)
    search = app.get_screen("search")
    assert isinstance(search, SearchScreen)
    box = search.query_one("#search-input", Input)
    box.value = ""
    search_samples = []
    for i in range(count):
        char = "abcdefghij"[i % 10]
        if len(box.value) > 30:
            box.value = ""
        expected = box.value + char
        search_samples.append(await key_latency(app, clock, char, lambda e=expected: box.value == e))
        await asyncio.sleep(gap_s)
    results_samples = []
    for i in range(max(1, count // 6)):
        box.value = ""
        await asyncio.sleep(0.3)
        query = QUERIES[i % len(QUERIES)]
        for char in query[:-1]:
            await key_latency(app, clock, "space" if char == " " else char, lambda e=box.value + char: box.value == e)
            await asyncio.sleep(gap_s)
        results_samples.append(await key_latency(
            app, clock, query[-1],
            lambda q=query: search.answered_query == q and search.answered_generation == search.generation,
        ))
    indexed_during = app.finished_total - indexed_before
    if os.environ.get("TUI_LATENCY_TRACE"):
        print(phase, "table", " ".join(f"{x * 1000:.0f}" for x in table_samples), file=sys.stderr)
        print(phase, "search", " ".join(f"{x * 1000:.0f}" for x in search_samples), file=sys.stderr)
        print(phase, "results", " ".join(f"{x * 1000:.0f}" for x in results_samples), file=sys.stderr)
    return [
        summarise(phase, "table", table_samples, indexed_during),
        summarise(phase, "search", search_samples, indexed_during),
        summarise(phase, "results", results_samples, indexed_during),
    ]


# Type-ahead queries (words of the generated documents and of none).
QUERIES = ("rotate keys", "backup restore", "drain node", "disk quota", "pager escalation", "zebra")


async def run(documents: int, keys: int, gap_s: float, provider: str, workdir: Path,
              debounce_s: float | None = None) -> list[Row]:
    corpus = workdir / "docs"
    corpus.mkdir()
    write_documents(corpus, documents)
    config = dataclasses.replace(Config.load(workdir / "home"), embedding_provider=provider, reindex_interval_s=0)
    node = Node.open(config)
    options = TuiOptions(remember_preferences=False, cursor_blink=False)
    if debounce_s is not None:
        options = dataclasses.replace(options, search_debounce_s=debounce_s)
    app = KbtuiApp(node, options=options)
    try:
        async with app.run_test(size=(120, 40), headless=True) as pilot:
            clock = FrameClock(app)
            while app.mode != "node":
                await asyncio.sleep(0.05)
            app.add_path(str(corpus), app.collection_id)
            while len(app.documents_screen.rows) < 50:  # enough rows to move through; adding goes on
                await asyncio.sleep(0.1)
            rows = await measure_keys(app, clock, keys, gap_s, "ingesting")
            if app.finished_total >= documents:
                print("warning: ingestion finished before the keys did; use more documents", file=sys.stderr)
            deadline = time.monotonic() + 1800
            while app.finished_total < documents and time.monotonic() < deadline:
                await asyncio.sleep(0.5)
            await asyncio.sleep(1.0)
            rows += await measure_keys(app, clock, keys, gap_s, "idle")
            await pilot.press("q")
    finally:
        node.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--keys", type=int, default=120, help="keys of each kind per phase")
    parser.add_argument("--gap-ms", type=float, default=40.0, help="pause between keys")
    parser.add_argument("--provider", default="hash")
    parser.add_argument("--debounce-ms", type=float, default=None, help="the search box's debounce (default: the app's)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kbtui-bench-tui-") as tmp:
        debounce_s = None if args.debounce_ms is None else args.debounce_ms / 1000
        rows = asyncio.run(run(args.documents, args.keys, args.gap_ms / 1000, args.provider, Path(tmp), debounce_s))
    idle = {r.key: r for r in rows if r.phase == "idle"}
    print(f"{'phase':10} {'key':7} {'n':>4} {'p50 ms':>7} {'p95 ms':>7} {'max ms':>7} {'p95/idle':>8} {'indexed meanwhile':>17}")
    for r in rows:
        ratio = r.p95_ms / idle[r.key].p95_ms if idle.get(r.key) and idle[r.key].p95_ms else float("nan")
        print(f"{r.phase:10} {r.key:7} {r.samples:>4} {r.p50_ms:>7.1f} {r.p95_ms:>7.1f} {r.max_ms:>7.1f} {ratio:>8.2f} {r.indexed_during:>17}")
    if args.json:
        args.json.write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=2))


if __name__ == "__main__":
    os.environ.setdefault("KBTUI_LOG_LEVEL", "WARNING")
    main()
