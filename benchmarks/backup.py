"""Benchmark: backups of a 1,000-document knowledge base, and what they cost a serving node.

1. A base of N generated Markdown documents (default 1,000, 4-40 KiB each) is
   indexed with the hash embedder (the model is not the point here). ``--base
   DIR`` keeps it between runs.
2. ``kbtui serve`` runs on it; searches go to it through its API, one after
   another, first with nothing else running (idle), then while ``kbtui
   backup`` runs in its own process. Each search's latency is recorded with
   its time: the table gives the p50/p95 idle and during the backup, and the
   time during which the node's search p95 (per one-second window) stayed
   within 2x of idle, out of the backup's duration.
3. Throughput in MB/s (catalog plus sources) of the backup, of ``--verify``,
   of an incremental backup with nothing changed, and of a restore, each run
   as ``kbtui ... --json`` and timed by its own ``seconds`` (without Python's
   start-up). ``kbtui backup`` runs its work at a lower CPU priority.

    python benchmarks/backup.py [--documents 1000] [--base DIR] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kbtui.api.client import NodeClient, unix_endpoint  # noqa: E402
from kbtui.config import Config  # noqa: E402
from kbtui.node import Node  # noqa: E402
from store.restore import rebuild_vector_indexes  # noqa: E402

WINDOW_S = 1.0


def env_for(home: Path) -> dict[str, str]:
    return {**os.environ, "KBTUI_HOME": str(home), "KBTUI_EMBEDDING_PROVIDER": "hash", "KBTUI_LOG_LEVEL": "WARNING"}


def make_corpus(folder: Path, documents: int, min_kib: int, max_kib: int, rng: random.Random) -> list[str]:
    """Markdown documents over a Zipf-like made-up vocabulary, most common word first; returns it."""
    vocabulary = [f"{rng.choice('bdfgklmnprstvz')}{rng.choice('aeiou')}{rng.choice('lmnrst')}{n}" for n in range(4000)]
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    for number in range(documents):
        target = rng.randint(min_kib, max_kib) * 1024
        parts = [f"# Document {number}\n\n"]
        size = 0
        section = 0
        while size < target:
            section += 1
            words = rng.choices(vocabulary, weights, k=120)
            paragraph = f"## Section {section}\n\n{' '.join(words)}.\n\n"
            parts.append(paragraph)
            size += len(paragraph)
        path = folder / f"area-{number % 20:02d}" / f"doc-{number:05d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(parts))
    return vocabulary


def build_base(home: Path, documents: int, min_kib: int, max_kib: int) -> list[str]:
    rng = random.Random(7)
    corpus = home.parent / "corpus"
    words_file = home.parent / "words.json"
    if (home / "kb.sqlite3").exists() and words_file.exists():
        if not list((home / "vectors").glob("*.json")):
            rebuild_vector_indexes(home)
        return json.loads(words_file.read_text())
    shutil.rmtree(corpus, ignore_errors=True)
    words = make_corpus(corpus, documents, min_kib, max_kib, rng)
    os.environ["KBTUI_EMBEDDING_PROVIDER"] = "hash"
    node = Node.open(Config.load(home))
    try:
        started = time.perf_counter()
        added = node.add_source(corpus, "DEFAULT")
        node.index_and_follow(added.report.pending_document_ids, show_progress=True)
        print(f"base indexed in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    finally:
        node.close()
    rebuild_vector_indexes(home)  # saved, so the node loads it at once: searches measure the served path
    words_file.write_text(json.dumps(words))
    return words


def kbtui_json(home: Path, *args: str) -> tuple[dict, float]:
    """``kbtui ARGS --json`` as an operator runs it; its report, and the wall
    time it ended at (its ``seconds`` say how long the work took inside it)."""
    done = subprocess.run(
        [sys.executable, "-m", "kbtui", *args, "--json"], env=env_for(home), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"kbtui {args[0]} failed: {done.stderr.strip()[-400:]}")
    return json.loads(done.stdout), time.time()


class Searcher:
    """Searches the serving node one after another, recording (start time, latency)."""

    def __init__(self, home: Path, words: list[str]) -> None:
        self.client = NodeClient(unix_endpoint(home), Config.load(home))
        self.words = words
        self.rng = random.Random(11)
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def one(self) -> None:
        query = " ".join(self.rng.sample(self.words, 2))
        at, started = time.time(), time.perf_counter()
        self.client.search(query, "DEFAULT", limit=10)
        self.samples.append((at, time.perf_counter() - started))

    def run_for(self, seconds: float) -> list[float]:
        self.samples = []
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            self.one()
        return [latency for _, latency in self.samples]

    def start(self) -> None:
        self.samples = []
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.one()

    def stop(self) -> list[tuple[float, float]]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self.samples


def p(values: list[float], q: float) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def wait_for_node(searcher: Searcher, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            searcher.one()
            return
        except Exception:  # noqa: BLE001 - not serving yet
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--min-kib", type=int, default=4)
    parser.add_argument("--max-kib", type=int, default=40)
    parser.add_argument("--idle-s", type=float, default=15.0, help="How long to measure idle search latency.")
    parser.add_argument("--base", type=Path, help="Keep the indexed base here (reused when it exists).")
    parser.add_argument("--json", type=Path, help="Also write the results here.")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="kbtui-backup-bench-"))
    root = args.base or work / "base"
    home = root / "home"
    root.mkdir(parents=True, exist_ok=True)
    # Words a search narrows down with: the most common ones match most chunks.
    words = build_base(home, args.documents, args.min_kib, args.max_kib)[1000:3000]
    source_bytes = tree_bytes(home / "blobs") + (home / "kb.sqlite3").stat().st_size

    node = subprocess.Popen(
        [sys.executable, "-m", "kbtui", "serve"], env=env_for(home), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        searcher = Searcher(home, words)
        wait_for_node(searcher)
        searcher.run_for(3.0)  # warm: caches, the vector index loaded
        idle = searcher.run_for(args.idle_s)
        idle_p95 = p(idle, 95)

        destination = work / "backup"
        searcher.start()
        backup, ended = kbtui_json(home, "backup", str(destination))
        began = ended - backup["seconds"]  # the backup itself, not Python's start-up
        during = [(at, latency) for at, latency in searcher.stop() if began <= at < ended]
    finally:
        node.terminate()
        node.wait(timeout=120)

    backup_bytes = tree_bytes(destination)
    windows: list[float] = []
    start = began
    while start < ended:
        window = [latency for at, latency in during if start <= at < start + WINDOW_S]
        if window:
            windows.append(p(window, 95) if len(window) >= 2 else window[0])
        start += WINDOW_S
    within_s = sum(WINDOW_S for value in windows if value <= 2 * idle_p95)
    latencies = [latency for _, latency in during]

    verify, _ = kbtui_json(home, "backup", "--verify", str(destination))
    incremental, _ = kbtui_json(home, "backup", "--incremental", str(destination))
    restore, _ = kbtui_json(work / "restored", "restore", str(destination), "--key", str(home / "node.key"))
    restore_files_s = restore["seconds"] - restore["vector_index_seconds"]

    mb = 1024 * 1024
    results = {
        "documents": args.documents,
        "base_mb": source_bytes / mb,
        "backup_mb": backup_bytes / mb,
        "backup_s": backup["seconds"],
        "backup_mb_s": backup_bytes / mb / backup["seconds"],
        "verify_s": verify["seconds"],
        "verify_mb_s": verify["bytes"] / mb / verify["seconds"],
        "incremental_unchanged_s": incremental["seconds"],
        "restore_s": restore["seconds"],
        "restore_files_s": restore_files_s,  # verifying and copying; the rest builds the vector index
        "restore_files_mb_s": backup_bytes / mb / restore_files_s,
        "idle_searches": len(idle),
        "idle_p50_ms": p(idle, 50) * 1000,
        "idle_p95_ms": idle_p95 * 1000,
        "during_searches": len(latencies),
        "during_p50_ms": p(latencies, 50) * 1000,
        "during_p95_ms": p(latencies, 95) * 1000,
        "p95_ratio": p(latencies, 95) / idle_p95,
        "windows": len(windows),
        "within_2x_s": within_s,
        "within_2x_share": within_s / (len(windows) * WINDOW_S) if windows else float("nan"),
    }
    rows = [
        ("documents", f"{args.documents}"),
        ("base (catalog + sources)", f"{results['base_mb']:.1f} MB"),
        ("backup written", f"{results['backup_mb']:.1f} MB"),
        ("backup", f"{results['backup_s']:.2f} s, {results['backup_mb_s']:.1f} MB/s"),
        ("backup --verify", f"{results['verify_s']:.2f} s, {results['verify_mb_s']:.1f} MB/s"),
        ("backup --incremental, nothing changed", f"{results['incremental_unchanged_s']:.2f} s"),
        ("restore: verify and copy the files", f"{results['restore_files_s']:.2f} s, {results['restore_files_mb_s']:.1f} MB/s"),
        ("restore: all, with the vector index built", f"{results['restore_s']:.2f} s"),
        ("search idle p50 / p95", f"{results['idle_p50_ms']:.1f} / {results['idle_p95_ms']:.1f} ms ({len(idle)} searches)"),
        ("search during backup p50 / p95",
         f"{results['during_p50_ms']:.1f} / {results['during_p95_ms']:.1f} ms ({len(latencies)} searches)"),
        ("p95 during / idle", f"{results['p95_ratio']:.2f}x"),
        ("time p95 within 2x idle (1 s windows)",
         f"{within_s:.0f} of {len(windows) * WINDOW_S:.0f} s ({results['within_2x_share']:.0%})"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    shutil.rmtree(work, ignore_errors=True)  # a --base lives elsewhere and is kept


if __name__ == "__main__":
    main()
