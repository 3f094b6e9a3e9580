"""Throughput of the local embedder (all-MiniLM-L6-v2 int8 ONNX) on 256-token chunks.

Prints chunks/s at the configured batch size (default 32) and the latency of
one short query. Run:

    .venv/bin/python benchmarks/embed.py [--chunks 256] [--batch 32] [--threads 0] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kbtui.embedding.local import MAX_TOKENS, LocalEmbedder  # noqa: E402

WORDS = ["the", "node", "drains", "its", "pods", "before", "the", "kernel", "upgrade", "and", "the", "operator", "rotates", "every", "certificate", "that", "expires", "within", "thirty", "days", "while", "backups", "stream", "to", "the", "archive", "with", "point", "in", "time", "recovery"]


def chunk_of_tokens(embedder: LocalEmbedder, rng: np.random.Generator, tokens: int) -> str:
    """A prose chunk that tokenizes to at least ``tokens`` word pieces (then truncated at the window)."""
    tokenizer = embedder._loaded()[1]
    words: list[str] = []
    while len(tokenizer.encode(" ".join(words)).ids) < tokens:
        words.extend(rng.choice(WORDS, 16).tolist())
    return " ".join(words)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=256)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=0, help="onnxruntime intra-op threads (0: per core)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    embedder = LocalEmbedder(threads=args.threads, batch_size=args.batch)
    started = time.perf_counter()
    embedder.warm()
    load_s = time.perf_counter() - started
    rng = np.random.default_rng(3)
    texts = [chunk_of_tokens(embedder, rng, MAX_TOKENS) for _ in range(args.chunks)]
    embedder.embed_documents(texts[: args.batch])  # first-run allocations out of the timing

    started = time.perf_counter()
    for start in range(0, len(texts), args.batch):
        embedder.embed_documents(texts[start : start + args.batch])
    elapsed = time.perf_counter() - started

    query_times = []
    for _ in range(50):
        started = time.perf_counter()
        embedder.embed_query("how do I rotate the ingress certificate")
        query_times.append(time.perf_counter() - started)

    row = {
        "model": embedder.identity.model,
        "tokens_per_chunk": MAX_TOKENS,
        "batch": args.batch,
        "chunks": len(texts),
        "chunks_per_s": round(len(texts) / elapsed, 1),
        "query_p50_ms": round(float(np.percentile(query_times, 50)) * 1000, 2),
        "query_p95_ms": round(float(np.percentile(query_times, 95)) * 1000, 2),
        "load_s": round(load_s, 2),
    }
    width = max(len(k) for k in row)
    for key, value in row.items():
        print(f"{key.ljust(width)}  {value}")
    if args.json:
        args.json.write_text(json.dumps(row, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
