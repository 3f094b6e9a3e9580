"""Benchmark: importing a real tree committed into a temporary Git repository.

By default the tree is a copy of this interpreter's site-packages (thousands
of files of every kind: sources, docs, licences, binaries, caches), committed
into a fresh repository. Measured, each in a fresh knowledge base:

* first import, scan + encrypted blobs + rows only;
* first import including indexing with the hash embedder;
* a re-import with nothing changed (nothing may be re-queued or embedded);
* a re-import after changing 1 % of the imported files.

Prints a table; ``--json PATH`` also writes the numbers. Absolute times are
noisy on a shared machine: compare rates within one run.

    python benchmarks/repo_import.py [--source DIR] [--max-files N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kbtui.cli.sources import index_pending  # noqa: E402
from kbtui.config import Config  # noqa: E402
from kbtui.node import Node  # noqa: E402
from kbtui.sources.repositories import import_repository, register_repository  # noqa: E402
from kbtui.sources.scan import ScanLimits  # noqa: E402
from kbtui.sources.sync import SyncReport as ImportReport  # noqa: E402


@dataclass(frozen=True)
class Measurement:
    name: str
    seconds: float
    scan_seconds: float  # scan + blobs + rows; the rest of ``seconds`` is indexing
    listed: int
    added: int
    updated: int
    unchanged: int
    skipped: int
    indexed: int
    embed_calls: int

    @property
    def listed_per_s(self) -> float:
        return self.listed / self.seconds if self.seconds else 0.0

    @property
    def imported_per_s(self) -> float:
        return (self.added + self.updated + self.unchanged) / self.seconds if self.seconds else 0.0


class CountingEmbedder:
    def __init__(self, inner) -> None:
        self.inner = inner
        self.calls = 0

    identity = property(lambda self: self.inner.identity)
    context_window = property(lambda self: self.inner.context_window)

    def embed_documents(self, texts):
        self.calls += 1
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        return self.inner.embed_query(text)


def build_repository(source: Path, target: Path, max_files: int | None) -> int:
    """Copy up to ``max_files`` files of ``source`` (links kept as links) and commit them."""
    copied = 0
    for directory, subdirectories, files in os.walk(source):
        subdirectories.sort()
        relative = Path(directory).relative_to(source)
        for name in sorted(files):
            if max_files is not None and copied >= max_files:
                break
            origin = Path(directory) / name
            destination = target / relative / name
            destination.parent.mkdir(parents=True, exist_ok=True)
            if origin.is_symlink():
                destination.symlink_to(os.readlink(origin))
            elif origin.is_file():
                shutil.copyfile(origin, destination)
            else:
                continue
            copied += 1
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=target, check=True)
    # -f: site-packages trees can carry their own .gitignore files; the benchmark wants them all tracked.
    subprocess.run([*git, "add", "-A", "-f", "."], cwd=target, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "tree"], cwd=target, check=True)
    return copied


def open_node(home: Path) -> Node:
    node = Node.open(Config(home=home, embedding_provider="hash"))
    node.embedder = CountingEmbedder(node.embedder)
    return node


def run_import(node: Node, repository_id: str, limits: ScanLimits, name: str, *, index: bool) -> Measurement:
    before = node.embedder.calls
    started = time.perf_counter()
    report: ImportReport = import_repository(node.store, repository_id, "BENCH", limits, purge=node.purge)
    scan_seconds = time.perf_counter() - started
    failed = index_pending(node, report.pending_document_ids, quiet=True) if index else []
    seconds = time.perf_counter() - started
    return Measurement(
        name=name,
        seconds=seconds,
        scan_seconds=scan_seconds,
        listed=report.listed,
        added=report.added.count,
        updated=report.updated.count,
        unchanged=report.unchanged.count,
        skipped=sum(t.count for t in report.skipped.values()),
        indexed=len(report.pending_document_ids) - len(failed) if index else 0,
        embed_calls=node.embedder.calls - before,
    )


def change_some_files(repo: Path, node: Node, fraction: float) -> int:
    from store.models import Document

    paths = sorted(d.source_path for d in Document.select(Document.source_path).where(Document.source_path.is_null(False)))
    step = max(1, round(1 / fraction))
    changed = 0
    for source_path in paths[::step]:
        with open(repo / source_path, "a", encoding="utf-8") as handle:
            handle.write("\nappended by the benchmark\n")
        changed += 1
    return changed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=Path(sysconfig.get_paths()["purelib"]),
                        help="tree to copy into the repository (default: site-packages)")
    parser.add_argument("--max-files", type=int, default=None, help="copy at most this many files")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)

    with tempfile.TemporaryDirectory(prefix="kbtui-bench-") as scratch:
        scratch_path = Path(scratch)
        repo = scratch_path / "repo"
        repo.mkdir()
        t0 = time.perf_counter()
        copied = build_repository(args.source, repo, args.max_files)
        build_s = time.perf_counter() - t0
        config = Config(home=scratch_path / "unused")
        limits = ScanLimits(config.repository_max_file_bytes, config.repository_max_total_bytes)

        results: list[Measurement] = []
        scan_only = open_node(scratch_path / "home-scan")
        try:
            repository_id = register_repository(scan_only.store, repo).id
            results.append(run_import(scan_only, repository_id, limits, "first import (scan+blobs+rows)", index=False))
        finally:
            scan_only.close()

        full = open_node(scratch_path / "home-full")
        try:
            repository_id = register_repository(full.store, repo).id
            results.append(run_import(full, repository_id, limits, "first import + indexing", index=True))
            results.append(run_import(full, repository_id, limits, "re-import, no change", index=True))
            changed = change_some_files(repo, full, 0.01)
            results.append(run_import(full, repository_id, limits, f"re-import, {changed} changed", index=True))
        finally:
            full.close()

    header = f"{'measurement':<34} {'s':>7} {'scan s':>7} {'listed':>7} {'listed/s':>9} {'added':>6} {'upd':>5} {'unch':>6} {'skip':>6} {'kept/s':>8} {'embeds':>7}"
    print(f"tree: {copied} files copied and committed in {build_s:.1f} s")
    print(header)
    print("-" * len(header))
    for m in results:
        print(
            f"{m.name:<34} {m.seconds:>7.2f} {m.scan_seconds:>7.2f} {m.listed:>7} {m.listed_per_s:>9.0f} {m.added:>6} {m.updated:>5} "
            f"{m.unchanged:>6} {m.skipped:>6} {m.imported_per_s:>8.0f} {m.embed_calls:>7}"
        )
    first, no_change = results[0], results[2]
    print(f"no-change re-import is {first.seconds / no_change.seconds:.1f}x faster than the first scan "
          f"and {results[1].seconds / no_change.seconds:.1f}x faster than the first import with indexing")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "files_copied": copied,
            "results": [
                {**m.__dict__, "listed_per_s": m.listed_per_s, "imported_per_s": m.imported_per_s} for m in results
            ],
        }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
