"""Benchmark: ``kbtui doctor`` authenticating every encrypted source.

Builds a data directory holding ``--small`` small documents (a few hundred
bytes each) and ``--mib`` MiB of larger ones (``--file-mib`` each), stored as
a folder source (encrypted blobs and catalog rows; nothing indexed: doctor
reads sources, not the index). Then times, in one run:

- ``doctor`` (decrypt and authenticate every source, hash its bytes),
- ``doctor --quick`` (each source there with a blob header),
- the first again as a process (``kbtui doctor``), start-up included,

and prints seconds per GiB of sources and MiB/s.

    python benchmarks/doctor.py [--mib 512] [--file-mib 8] [--small 1000] [--json PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kbtui.config import Config  # noqa: E402
from kbtui.node import Node, examine_data_directory  # noqa: E402

WORDS = "alpha beta gamma delta service restart rotate certificate backup restore node disk".split()
MIB = 1 << 20
GIB = 1 << 30


def make_folder(root: Path, *, small: int, mib: int, file_mib: int) -> None:
    rng = random.Random(7)
    for number in range(small):
        folder = root / f"area-{number % 50:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note-{number:05d}.md").write_text(f"# Note {number}\n\n{' '.join(rng.choices(WORDS, k=40))}\n")
    line = (" ".join(rng.choices(WORDS, k=200)) + "\n").encode()
    for number in range(mib // file_mib):
        with open(root / f"large-{number:04d}.txt", "wb") as out:
            for _ in range(file_mib * MIB // len(line)):
                out.write(line)


def build(home: Path, folder: Path) -> int:
    node = Node.open(dataclasses.replace(Config.load(home), embedding_provider="hash"))
    try:
        report = node.add_source(folder, "DEFAULT").report
    finally:
        node.close()
    return len(report.pending_document_ids)


def timed(action) -> tuple[float, object]:
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=512, help="MiB of large documents")
    parser.add_argument("--file-mib", type=int, default=8, help="size of each large document (MiB, under 16)")
    parser.add_argument("--small", type=int, default=1000, help="number of small documents")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="kbtui-doctor-bench-") as scratch:
        folder, home = Path(scratch) / "docs", Path(scratch) / "home"
        make_folder(folder, small=args.small, mib=args.mib, file_mib=args.file_mib)
        documents = build(home, folder)
        blob_bytes = sum(entry.stat().st_size for entry in os.scandir(home / "blobs") if entry.is_file())
        full_s, full = timed(lambda: examine_data_directory(home))
        quick_s, quick = timed(lambda: examine_data_directory(home, quick=True))
        env = {**os.environ, "KBTUI_HOME": str(home)}
        process_s, done = timed(lambda: subprocess.run(
            [sys.executable, "-m", "kbtui", "doctor"], env=env, capture_output=True, check=False
        ))
        assert full.healthy and quick.healthy and done.returncode == 0, "the benchmark base must be healthy"

    gib = blob_bytes / GIB
    rows = [
        ("doctor (authenticate)", full_s),
        ("doctor --quick", quick_s),
        ("kbtui doctor (process)", process_s),
    ]
    print(f"{documents} documents, {blob_bytes / MIB:,.0f} MiB of encrypted sources")
    print(f"{'check':<26}{'seconds':>10}{'s per GiB':>12}{'MiB/s':>10}")
    for name, seconds in rows:
        print(f"{name:<26}{seconds:>10.2f}{seconds / gib:>12.2f}{blob_bytes / MIB / seconds:>10.0f}")
    if args.json:
        args.json.write_text(json.dumps({
            "documents": documents,
            "blob_bytes": blob_bytes,
            "results": [{"check": name, "seconds": s, "seconds_per_gib": s / gib} for name, s in rows],
        }, indent=2))


if __name__ == "__main__":
    main()
