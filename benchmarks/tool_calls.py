"""Cost of the agent tools: fencing throughput and tool-call overhead over plain search.

Builds a throw-away knowledge base (hash embedder) in a temp dir, then times
  - neutralise() on 50k characters of ASCII, accented Latin and CJK text;
  - search_knowledge_base against the Node.search it wraps (ratio = fencing
    and payload overhead), read_document (50k chars) and read_surrounding_chunks.

    python benchmarks/tool_calls.py [--documents N] [--repeat R] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kbtui.config import Config  # noqa: E402
from kbtui.node import Node  # noqa: E402
from kbtui.tools.fencing import neutralise  # noqa: E402
from kbtui.tools.knowledge import KnowledgeTools  # noqa: E402
from store import catalog  # noqa: E402

WORDS = ["certificate", "rotation", "backup", "restore", "kernel", "upgrade", "incident", "latency", "replica", "failover"]


def median_ms(action, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def build_corpus(node: Node, directory: Path, documents: int) -> list[str]:
    ids = []
    for n in range(documents):
        body = " ".join(f"{WORDS[(n * 7 + i) % len(WORDS)]} step{i % 50}" for i in range(2000))
        path = directory / f"doc{n}.md"
        path.write_text(f"# Runbook {n}\n\n## Steps\n\n{body}\n", encoding="utf-8")
        outcome = catalog.add_document(node.store, "DEFAULT", path, display_name=path.name, fmt="markdown")
        if node.ingest(outcome.document_id) != "Indexed":
            raise SystemExit("benchmark corpus failed to index")
        ids.append(outcome.document_id)
    return ids


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args()

    rows: list[tuple[str, float, str]] = []
    texts = {
        "ascii": ("The quick brown fox jumps over the lazy dog. " * 1200)[:50_000],
        "accented": ("Größenänderung der Zertifikate über Nacht. " * 1200)[:50_000],
        "cjk": ("東京都に住んでいます。証明書を更新する。" * 3000)[:50_000],
    }
    for name, text in texts.items():
        rows.append((f"neutralise 50k chars, {name}", median_ms(lambda t=text: neutralise(t), args.repeat), ""))

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["KBTUI_EMBEDDING_PROVIDER"] = "hash"
        node = Node.open(Config.load(Path(tmp) / "home"))
        try:
            ids = build_corpus(node, Path(tmp), args.documents)
            tools = KnowledgeTools(node, overlap_limit=node.config.chunking.overlap_chars)
            query = "certificate rotation failover"
            if len(node.search(query, "DEFAULT", limit=10).hits) != 10:
                raise SystemExit("benchmark query found fewer than 10 hits")
            # Interleaved in alternating order, so cache warmth favours neither side.
            search_samples, tool_samples = [], []
            for round_number in range(args.repeat):
                pair = [
                    (search_samples, lambda: node.search(query, "DEFAULT", limit=10)),
                    (tool_samples, lambda: tools.call("search_knowledge_base", {"query": query, "limit": 10})),
                ]
                for samples, action in pair if round_number % 2 else reversed(pair):
                    samples.append(median_ms(action, 1))
            search, tool = statistics.median(search_samples), statistics.median(tool_samples)
            expanded = median_ms(
                lambda: tools.call("search_knowledge_base", {"query": query, "limit": 10, "expand_neighbors": True}),
                args.repeat,
            )
            chunk_id = node.search(query, "DEFAULT", limit=1).hits[0].chunk_id
            read = median_ms(
                lambda: tools.call("read_document", {"document_id": ids[0], "collection": "DEFAULT", "max_chars": 50_000}),
                args.repeat,
            )
            around = median_ms(
                lambda: tools.call("read_surrounding_chunks", {"chunk_id": chunk_id, "collection": "DEFAULT", "window": 2}),
                args.repeat,
            )
        finally:
            node.close()
    rows += [
        ("Node.search, 10 hits", search, "1.00x"),
        ("search_knowledge_base, 10 hits", tool, f"{tool / search:.2f}x"),
        ("search_knowledge_base + neighbours", expanded, f"{expanded / search:.2f}x"),
        ("read_document, 50k chars", read, ""),
        ("read_surrounding_chunks, window 2", around, ""),
    ]

    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'median ms':>10}  vs search")
    for name, ms, ratio in rows:
        print(f"{name:<{width}}  {ms:>10.2f}  {ratio}")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(
            {"documents": args.documents, "repeat": args.repeat,
             "rows": [{"measure": n, "median_ms": round(ms, 3), "ratio": r or None} for n, ms, r in rows]},
            indent=2,
        ))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
