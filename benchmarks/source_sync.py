"""Benchmark: keeping a folder source in sync.

1. Rescan of an unchanged folder of N files (default 10,000, in 100
   subfolders): the first scan reads and stores every file; the files are then
   indexed (hash embedder); a rescan with nothing changed must read no file,
   queue nothing and embed nothing. Target on the 2-core machines: under 2 s.
2. Watch latency: a node runs the pipeline and watches the folder; a file is
   saved with a word of its own, and the time until the document is Indexed
   with that word (Indexed is what search serves) is measured, save after
   save.

    python benchmarks/source_sync.py [--files N] [--saves N] [--json PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kbtui.config import Config  # noqa: E402
from kbtui.node import Node  # noqa: E402
from store.db import thread_connection  # noqa: E402
from store.models import Chunk, Document, Status  # noqa: E402

# A file whose times lie within this much of its scan is checked by content at
# the next one (store.sources.RACY_WINDOW_NS): the rescan must see settled files.
SETTLE_S = 2.5


class CountingEmbedder:
    """Delegates to the real embedder and counts the texts it is asked to embed."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.texts = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def embed_documents(self, texts):
        self.texts += len(texts)
        return self.inner.embed_documents(texts)


def make_folder(root: Path, files: int) -> None:
    for number in range(files):
        folder = root / f"area-{number % 100:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note-{number:05d}.md").write_text(
            f"# Note {number}\n\nRunbook step {number}: check service s{number % 37} and log l{number % 11}.\n"
        )


def rescan(home: Path, folder: Path, files: int) -> dict[str, float]:
    node = Node.open(dataclasses.replace(Config.load(home), embedding_provider="hash"))
    try:
        node.embedder = CountingEmbedder(node.embedder)
        started = time.perf_counter()
        first = node.add_source(folder, "DEFAULT")
        first_s = time.perf_counter() - started
        started = time.perf_counter()
        node.index_and_follow(first.report.pending_document_ids, show_progress=False)
        index_s = time.perf_counter() - started
        time.sleep(SETTLE_S)
        # One scan to record settled looks (the first read them within the racy window).
        node.sync_source(first.row.source.id)
        embedded_before = node.embedder.texts
        with node.pipeline() as runtime:
            started = time.perf_counter()
            report = node.sync_source(first.row.source.id)
            rescan_s = time.perf_counter() - started
            runtime.sweep_now()
            time.sleep(1.0)  # anything queued would start embedding by now
        return {
            "files": files,
            "first_scan_s": first_s,
            "index_s": index_s,
            "rescan_s": rescan_s,
            "rescan_files_per_s": report.listed / rescan_s,
            "rescan_unchanged": report.unchanged.count,
            "rescan_queued": len(report.pending_document_ids),
            "rescan_embedded_texts": node.embedder.texts - embedded_before,
        }
    finally:
        node.close()


def watch_latency(home: Path, folder: Path, saves: int) -> dict[str, float]:
    node = Node.open(dataclasses.replace(Config.load(home), embedding_provider="hash"))
    latencies: list[float] = []
    try:
        with node.pipeline(watch=True), thread_connection():
            deadline = time.monotonic() + 60
            while not any(row.watch == "events" for row in node.sources()):
                if time.monotonic() > deadline:
                    raise SystemExit("the node never started watching")
                time.sleep(0.1)
            target = folder / "area-00" / "watched.md"
            for number in range(saves):
                word = f"latencyword{number:04d}x"
                saved = time.perf_counter()
                target.write_text(f"# Watched\n\nthis save carries {word}\n")
                while not _indexed_with(word):
                    if time.perf_counter() - saved > 60:
                        raise SystemExit("a save was not indexed within 60 s")
                    time.sleep(0.02)
                latencies.append(time.perf_counter() - saved)
                time.sleep(0.3)  # separate saves, not one burst
    finally:
        node.close()
    latencies.sort()
    return {
        "saves": saves,
        "p50_s": statistics.median(latencies),
        "p95_s": latencies[max(0, int(len(latencies) * 0.95) - 1)],
        "max_s": latencies[-1],
    }


def _indexed_with(word: str) -> bool:
    document = Document.get_or_none(Document.source_path == "area-00/watched.md")
    if document is None or document.status != Status.INDEXED.value:
        return False
    return Chunk.select().where((Chunk.document == document.id) & Chunk.content.contains(word)).exists()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--saves", type=int, default=20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    logging.disable(logging.INFO)
    with tempfile.TemporaryDirectory() as scratch:
        home, folder = Path(scratch) / "kb", Path(scratch) / "notes"
        home.mkdir(mode=0o700)
        make_folder(folder, args.files)
        time.sleep(SETTLE_S)
        result = {"rescan": rescan(home, folder, args.files), "watch": watch_latency(home, folder, args.saves)}
    r, w = result["rescan"], result["watch"]
    print(f"{r['files']} files: first scan {r['first_scan_s']:.1f} s, indexing {r['index_s']:.1f} s")
    print(f"unchanged rescan: {r['rescan_s']:.2f} s ({r['rescan_files_per_s']:.0f} files/s), "
          f"{r['rescan_unchanged']} unchanged, {r['rescan_queued']} queued, {r['rescan_embedded_texts']} embedded")
    print(f"save to Indexed over {w['saves']} saves: p50 {w['p50_s']:.2f} s, p95 {w['p95_s']:.2f} s, max {w['max_s']:.2f} s")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
