"""Benchmark: ``kbtui search`` as an operator runs it, with and without a running node.

Builds a knowledge base in a temporary data directory (the sample corpus in
examples/ plus ``--documents`` generated runbooks), then times whole
``kbtui search QUERY`` processes, from fork to exit, in one run:

* ``in-process``: no node runs; each process opens the catalog and loads the
  embedding model before it can embed the query;
* ``through node``: ``kbtui serve`` runs; each process asks it over the Unix
  socket, where the model is warm (``--json``, and again as text).

The first row times a bare Python process (``python -c 'import json, socket'``):
the floor any command stands on. Every row says its ratio to that floor,
measured in the same run (the target through a running node: at most 1.5).
Each row has wall and CPU time; CPU time is what a machine busy with other
work inflates least. Through the node, ``kbtui search`` in a pipe (tab-separated
lines) and with ``--json`` imports nothing heavy (``kbtui.cli.fast``); on a
terminal it loads click and rich first.

With ``--reranker`` a fake llama-server reranker (tests/retrieval/test_rerank.py)
is configured, and the table also counts the searches that reranked.

    python benchmarks/cli_search.py [--runs 40] [--documents 200] [--provider local] [--reranker] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUERIES = [
    "rotate certificates", "restore the database to a point in time", "drain a kubernetes node",
    "disk full incident", "on-call escalation", "ssh hardening", "backup retention policy",
    "certificate expiry monitoring", "failover the primary", "who gets paged at night",
]
WORDS = ("node drain pods kernel upgrade operator rotates certificate expires backups stream archive "
         "point in time recovery replica failover pager escalation disk quota inode journal").split()


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def build_corpus(directory: Path, documents: int) -> None:
    shutil.copytree(ROOT / "examples", directory)
    for i in range(documents):
        words = [WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(300)]
        (directory / f"runbook-{i:04}.md").write_text(
            f"# Runbook {i}\n\n## Steps\n\n{' '.join(words)}\n\n## Checks\n\n{' '.join(reversed(words))}\n"
        )


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kbtui", *args], env=env, capture_output=True, text=True, timeout=300)


def cpu_ms() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * 1000


def time_searches(env: dict[str, str], runs: int, *, json_output: bool = True) -> tuple[list[float], list[float], int]:
    """Wall and CPU milliseconds of ``runs`` search processes, and how many reranked.

    CPU time (the search process's own, user + system) is what a busy machine
    inflates least; wall time is what the operator waits."""
    times, cpu, reranked = [], [], 0
    for i in range(runs):
        cpu_before, started = cpu_ms(), time.perf_counter()
        answer = run(env, "search", QUERIES[i % len(QUERIES)], *(["--json"] if json_output else []))
        times.append((time.perf_counter() - started) * 1000)
        cpu.append(cpu_ms() - cpu_before)
        if answer.returncode != 0:
            raise SystemExit(f"kbtui search failed: {answer.stderr.strip()}")
        if json_output:
            hits = json.loads(answer.stdout)["hits"]
            reranked += bool(hits and hits[0]["score_kind"] == "Rerank")
    return times, cpu, reranked


def socket_answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(str(path))
            return True
        except OSError:
            return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=40, help="search processes per mode")
    parser.add_argument("--documents", type=int, default=200, help="generated runbooks besides examples/")
    parser.add_argument("--provider", default="local", choices=["local", "hash"])
    parser.add_argument("--reranker", action="store_true", help="configure a fake llama-server reranker")
    parser.add_argument("--json", metavar="PATH", help="also write one JSON record per mode to PATH")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="kbtui-bench-") as scratch:
        home = Path(scratch) / "home"
        env = {**os.environ, "KBTUI_HOME": str(home), "KBTUI_EMBEDDING_PROVIDER": args.provider}
        env.pop("KBTUI_NODE_API", None)
        server = None
        if args.reranker:
            from tests.retrieval.test_rerank import RerankServer

            server = RerankServer()
            home.mkdir(mode=0o700)
            (home / "config.toml").write_text(f'reranker_url = "{server.url}"\n')  # the default (adaptive) policy
        corpus = Path(scratch) / "corpus"
        build_corpus(corpus, args.documents)
        added = run(env, "add", str(corpus))
        if added.returncode != 0:
            raise SystemExit(f"kbtui add failed: {added.stderr.strip()}")

        run(env, "search", "warm the page cache")
        records = []
        # What any Python process costs here: the floor.
        floor_times, floor_cpu = [], []
        for _ in range(args.runs):
            cpu_before, started = cpu_ms(), time.perf_counter()
            subprocess.run([sys.executable, "-c", "import json, socket"], check=True)
            floor_times.append((time.perf_counter() - started) * 1000)
            floor_cpu.append(cpu_ms() - cpu_before)
        records.append(("python (floor)", floor_times, floor_cpu, 0))
        times, cpu, reranked = time_searches(env, args.runs)
        records.append(("in-process", times, cpu, reranked))

        node = subprocess.Popen([sys.executable, "-m", "kbtui", "serve"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while not socket_answers(home / "api.sock"):
                if time.monotonic() > deadline or node.poll() is not None:
                    raise SystemExit("kbtui serve did not start")
                time.sleep(0.1)
            for _ in range(3):  # the node's model and caches warm
                run(env, "search", "warm up the node")
            times, cpu, reranked = time_searches(env, args.runs)
            records.append(("through node", times, cpu, reranked))
            times, cpu, _ = time_searches(env, args.runs, json_output=False)
            records.append(("through node, tsv (pipe)", times, cpu, 0))
        finally:
            node.send_signal(signal.SIGTERM)
            node.wait(timeout=120)
            if server is not None:
                server.stop()

    load = round(os.getloadavg()[0], 1)
    floor_p50 = statistics.median(floor_times)
    rows = [
        {"mode": mode, "runs": len(times), "p50_ms": round(statistics.median(times), 1),
         "ratio_to_floor": round(statistics.median(times) / floor_p50, 2),
         "p95_ms": round(percentile(times, 0.95), 1), "min_ms": round(min(times), 1),
         "cpu_p50_ms": round(statistics.median(cpu), 1),
         "reranked": reranked if args.reranker and mode in ("in-process", "through node") else None,
         "provider": args.provider, "documents": args.documents + len(list((ROOT / "examples").iterdir())),
         "load_average": load}
        for mode, times, cpu, reranked in records
    ]
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    print(f"kbtui search, {rows[0]['documents']} documents, provider {args.provider}, {args.runs} runs each "
          f"(load average {load} on {os.cpu_count()} cores)")
    print(f"{'MODE':<27}{'P50 MS':>9}{'P95 MS':>9}{'MIN MS':>9}{'CPU P50':>9}{'× FLOOR':>9}"
          + ("  RERANKED" if args.reranker else ""))
    for row in rows:
        reranked = f"  {row['reranked']}/{row['runs']}" if row["reranked"] is not None else ""
        print(f"{row['mode']:<27}{row['p50_ms']:>9.1f}{row['p95_ms']:>9.1f}{row['min_ms']:>9.1f}"
              f"{row['cpu_p50_ms']:>9.1f}{row['ratio_to_floor']:>9.2f}{reranked}")


if __name__ == "__main__":
    main()
