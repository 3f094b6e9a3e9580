"""Benchmark: end-to-end ingestion through the actor pipeline vs the embedder alone.

For each N, a fresh knowledge base gets N generated Markdown documents
(Zipfian vocabulary, one to four sections each). Measured in one run:

* pipeline: admit all, wait until every document is Indexed (extract, chunk,
  embed in batches, atomic commit), documents/s and chunks/s;
* embedder alone: the same contextual chunk texts embedded directly in
  batches of ``max_embedding_batch_size`` (no DB, no actors), chunks/s;
* overhead = 1 - pipeline chunks/s / embedder chunks/s.

With the ``hash`` embedder the embedding is nearly free, so the pipeline rate
is the pipeline's own cost; with ``local`` the goal is an overhead within 10 %.

    python benchmarks/ingest.py [--provider hash|local] [--sizes 1000,10000] [--json PATH]

``--nodes 1,2,3`` measures many nodes on one PostgreSQL store instead (ingest_nodes.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kbtui.chunking import chunk_document  # noqa: E402
from kbtui.config import Config  # noqa: E402
from kbtui.extract import extract  # noqa: E402
from kbtui.follow import counting_in, follow_documents  # noqa: E402
from kbtui.node import Node  # noqa: E402
from store import catalog  # noqa: E402


@dataclass(frozen=True)
class Row:
    provider: str
    documents: int
    chunks: int
    add_s: float
    pipeline_s: float
    embedder_s: float

    @property
    def pipeline_docs_per_s(self) -> float:
        return self.documents / self.pipeline_s

    @property
    def pipeline_chunks_per_s(self) -> float:
        return self.chunks / self.pipeline_s

    @property
    def embedder_chunks_per_s(self) -> float:
        return self.chunks / self.embedder_s

    @property
    def overhead(self) -> float:
        return 1 - self.pipeline_chunks_per_s / self.embedder_chunks_per_s


def make_vocabulary(rng: random.Random, size: int = 5000) -> tuple[list[str], list[float]]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 10))) for _ in range(size)]
    weights = [1 / (rank + 1) for rank in range(size)]  # Zipf, s = 1
    return words, weights


def write_documents(folder: Path, count: int, seed: int = 7) -> list[Path]:
    rng = random.Random(seed)
    words, weights = make_vocabulary(rng)
    paths = []
    for i in range(count):
        sections = []
        for s in range(rng.randint(1, 4)):
            body = " ".join(rng.choices(words, weights, k=rng.randint(60, 220)))
            sections.append(f"## Section {s} of document {i}\n\n{body}\n")
        path = folder / f"doc{i:06d}.md"
        path.write_text(f"# Document {i}\n\n" + "\n".join(sections))
        paths.append(path)
    return paths


def measure(provider: str, count: int, workdir: Path) -> Row:
    home = workdir / f"{provider}-{count}"
    docs = workdir / f"docs-{count}"
    if not docs.exists():
        docs.mkdir()
        write_documents(docs, count)
    paths = sorted(docs.iterdir())
    config = dataclasses.replace(Config.load(home), embedding_provider=provider, reindex_interval_s=0)
    node = Node.open(config)
    try:
        started = time.perf_counter()
        ids = [
            catalog.add_document(node.store, "DEFAULT", p, display_name=p.name, fmt="markdown").document_id
            for p in paths
        ]
        add_s = time.perf_counter() - started

        node.embedder.embed_query("warm up")
        texts = []
        for path, document_id in zip(paths, ids, strict=True):
            _, chunks = chunk_document(
                document_id, extract(path.read_bytes(), "markdown"),
                settings=config.chunking, context_window=node.embedder.context_window,
            )
            texts.extend(c.contextual_content for c in chunks)
        # The embedder alone is timed before and after the pipeline and averaged,
        # so a change in machine load during the run biases neither side.
        embedder_before = time_embedder(node, texts, config.max_embedding_batch_size)
        started = time.perf_counter()
        with node.pipeline():
            result = follow_documents(
                ids, show_progress=sys.stderr.isatty(), stall_timeout_s=600, count=counting_in(node.store.catalog)
            )
        pipeline_s = time.perf_counter() - started
        if result.counts.get("Indexed", 0) != count:
            raise SystemExit(f"not every document was indexed: {result.counts}")

        embedder_after = time_embedder(node, texts, config.max_embedding_batch_size)
        return Row(provider, count, len(texts), add_s, pipeline_s, (embedder_before + embedder_after) / 2)
    finally:
        node.close()


def time_embedder(node: Node, texts: list[str], batch: int) -> float:
    started = time.perf_counter()
    for i in range(0, len(texts), batch):
        node.embedder.embed_documents(texts[i : i + batch])
    return time.perf_counter() - started


def main() -> None:
    if "--nodes" in sys.argv[1:]:
        import ingest_nodes

        ingest_nodes.main(sys.argv[1:])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--provider", default="hash")
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="kbtui-bench-ingest-") as tmp:
        for count in (int(n) for n in args.sizes.split(",")):
            rows.append(measure(args.provider, count, Path(tmp)))
    header = f"{'provider':8} {'docs':>6} {'chunks':>7} {'add s':>7} {'pipeline s':>10} {'docs/s':>8} {'chunks/s':>9} {'embedder chunks/s':>17} {'overhead':>8}"
    print(header)
    for r in rows:
        print(
            f"{r.provider:8} {r.documents:>6} {r.chunks:>7} {r.add_s:>7.1f} {r.pipeline_s:>10.1f} "
            f"{r.pipeline_docs_per_s:>8.1f} {r.pipeline_chunks_per_s:>9.1f} {r.embedder_chunks_per_s:>17.1f} {r.overhead:>8.1%}"
        )
    if args.json:
        args.json.write_text(json.dumps([{**dataclasses.asdict(r), "overhead": r.overhead} for r in rows], indent=2))


if __name__ == "__main__":
    os.environ.setdefault("KBTUI_LOG_LEVEL", "WARNING")
    main()
