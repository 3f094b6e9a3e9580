"""hnswlib against an exact numpy scan at a given scale (default 100k vectors, width 384).

Reports build time, memory, p50/p95 query latency and recall@10 of hnswlib
(unfiltered, and filtered to collections holding a share of the index) against
exact float32 scans. The data are clustered unit vectors, like sentence
embeddings. Run:

    .venv/bin/python benchmarks/vectors.py --sizes 100000 [--json out.json]
    .venv/bin/python benchmarks/vectors.py --sizes 1000000   # about 25 minutes to build here
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import hnswlib
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from store.ann import HNSW_EF_SEARCH  # noqa: E402
from store.ann_graph import HNSW_EF_CONSTRUCTION, HNSW_M  # noqa: E402
from store.vectors import top_k  # noqa: E402

DIM = 384


def rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def clustered(rng: np.random.Generator, count: int, centres: np.ndarray, block: int = 50_000) -> np.ndarray:
    out = np.empty((count, centres.shape[1]), np.float32)
    for start in range(0, count, block):
        n = min(block, count - start)
        points = centres[rng.integers(0, centres.shape[0], n)] + 0.9 * rng.standard_normal((n, centres.shape[1]), np.float32)
        out[start : start + n] = points / np.linalg.norm(points, axis=1, keepdims=True)
    return out


def percentile_ms(samples: list[float], q: float) -> float:
    return float(np.percentile(samples, q) * 1000)


def run(size: int, queries: int, seed: int) -> list[dict[str, object]]:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(64, size // 500), DIM)).astype(np.float32)
    data = clustered(rng, size, centres)
    probe = clustered(rng, queries, centres)
    rows: list[dict[str, object]] = []

    # Exact scan: the ground truth and its cost.
    truth, exact_times = [], []
    for query in probe:
        started = time.perf_counter()
        scores = data @ query
        best = top_k(scores, 10)
        exact_times.append(time.perf_counter() - started)
        truth.append(set(best.tolist()))
    rows.append(
        {
            "size": size,
            "method": "exact numpy",
            "scope": "all",
            "build_s": 0.0,
            "memory_mib": round(data.nbytes / 2**20, 1),
            "p50_ms": round(percentile_ms(exact_times, 50), 2),
            "p95_ms": round(percentile_ms(exact_times, 95), 2),
            "recall_at_10": 1.0,
        }
    )

    before = rss_mib()
    index = hnswlib.Index(space="ip", dim=DIM)
    index.init_index(max_elements=size, ef_construction=HNSW_EF_CONSTRUCTION, M=HNSW_M)
    index.set_num_threads(os.cpu_count() or 1)
    started = time.perf_counter()
    for start in range(0, size, 20_000):
        index.add_items(data[start : start + 20_000], np.arange(start, min(size, start + 20_000)))
    build_s = time.perf_counter() - started
    memory = rss_mib() - before
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "index.hnsw"
        index.save_index(str(path))
        file_mib = path.stat().st_size / 2**20

    for ef in sorted({64, HNSW_EF_SEARCH, 256}):
        index.set_ef(ef)
        times, found = [], 0
        for query, expected in zip(probe, truth, strict=True):
            started = time.perf_counter()
            labels, _ = index.knn_query(query, k=10, num_threads=1)
            times.append(time.perf_counter() - started)
            found += len(expected & set(labels[0].tolist()))
        rows.append(
            {
                "size": size,
                "method": f"hnswlib ef={ef}",
                "scope": "all",
                "build_s": round(build_s, 1),
                "memory_mib": round(memory, 1),
                "file_mib": round(file_mib, 1),
                "p50_ms": round(percentile_ms(times, 50), 2),
                "p95_ms": round(percentile_ms(times, 95), 2),
                "recall_at_10": round(found / (10 * len(probe)), 3),
            }
        )

    # A collection filter: the scoped exact scan versus filtered hnswlib.
    index.set_ef(HNSW_EF_SEARCH)
    for share in (0.01, 0.05, 0.2):
        member = rng.random(size) < share
        mask = member.tobytes()
        scoped_ids = np.flatnonzero(member)
        scoped = data[scoped_ids]
        exact_times, times, found = [], [], 0
        for query in probe:
            started = time.perf_counter()
            expected = set(scoped_ids[top_k(scoped @ query, 10)].tolist())
            exact_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            labels, _ = index.knn_query(query, k=10, num_threads=1, filter=lambda label: mask[label] == 1)
            times.append(time.perf_counter() - started)
            found += len(expected & set(labels[0].tolist()))
        rows.append(
            {
                "size": size,
                "method": "exact numpy (in RAM)",
                "scope": f"{share:.0%}",
                "p50_ms": round(percentile_ms(exact_times, 50), 2),
                "p95_ms": round(percentile_ms(exact_times, 95), 2),
                "recall_at_10": 1.0,
            }
        )
        rows.append(
            {
                "size": size,
                "method": f"hnswlib filtered ef={HNSW_EF_SEARCH}",
                "scope": f"{share:.0%}",
                "p50_ms": round(percentile_ms(times, 50), 2),
                "p95_ms": round(percentile_ms(times, 95), 2),
                "recall_at_10": round(found / (10 * len(probe)), 3),
            }
        )
    return rows


def sqlite_scan(data: np.ndarray, probe: np.ndarray, rows: int) -> dict[str, object]:
    """The exact path for a small scope: read its rows by id from SQLite, then score.

    (What ``store.ann`` does below the exact-scan threshold.)
    """
    rows = min(rows, data.shape[0])
    with tempfile.TemporaryDirectory() as tmp:
        db = sqlite3.connect(Path(tmp) / "vectors.sqlite3")
        db.execute("CREATE TABLE vector (chunk_id INTEGER PRIMARY KEY, embedding BLOB NOT NULL)")
        db.executemany("INSERT INTO vector VALUES (?, ?)", ((i, data[i].tobytes()) for i in range(rows)))
        db.commit()
        ids = list(range(rows))
        times = []
        for query in probe[:20]:
            started = time.perf_counter()
            blobs = []
            for start in range(0, rows, 500):
                batch = ids[start : start + 500]
                marks = ", ".join("?" for _ in batch)
                blobs.extend(b for (b,) in db.execute(f"SELECT embedding FROM vector WHERE chunk_id IN ({marks})", batch))
            matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(rows, DIM)
            top_k(matrix @ query, 10)
            times.append(time.perf_counter() - started)
        db.close()
    return {
        "size": rows,
        "method": "exact from SQLite (by id)",
        "scope": f"{rows} rows",
        "p50_ms": round(percentile_ms(times, 50), 2),
        "p95_ms": round(percentile_ms(times, 95), 2),
        "recall_at_10": 1.0,
    }


def print_table(rows: list[dict[str, object]]) -> None:
    columns = ["size", "method", "scope", "build_s", "memory_mib", "file_mib", "p50_ms", "p95_ms", "recall_at_10"]
    widths = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for row in rows:
        print("  ".join(str(row.get(c, "")).ljust(widths[c]) for c in columns))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000", help="comma-separated vector counts (e.g. 100000,1000000)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sqlite-rows", type=int, default=10_000, help="scope size for the SQLite exact scan")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args()
    rows: list[dict[str, object]] = []
    for size in (int(s) for s in args.sizes.split(",")):
        rows.extend(run(size, args.queries, args.seed))
    if args.sqlite_rows > 0:
        rng = np.random.default_rng(args.seed)
        centres = rng.standard_normal((64, DIM)).astype(np.float32)
        rows.append(sqlite_scan(clustered(rng, args.sqlite_rows, centres), clustered(rng, 20, centres), args.sqlite_rows))
    print_table(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
