"""Lexical engines side by side on the search benchmark's synthetic corpus
(``benchmarks/search_corpus.py``): top-10 overlap with exact BM25 and latency
per query mix.

* exact BM25 (the reference): FTS5 ``bm25()`` with the arm's column weights
  over every query word that is not a stop word, scoped, no plan: what the
  lexical arm would return with no latency bound.
* fts5 planned: today's lexical arm (``kbtui.retrieval.lexical``).
* tantivy: the same chunks in a tantivy index (block-max WAND), content and
  heading as fields (heading boosted 3, as FTS5 weighs it), the words
  analysed by tantivy's English stemmer; the best 200 overall, then the same
  SQLite scope check the FTS5 arm does. Its BM25 is per field (FTS5's is one
  score over weighted columns), so even an exact tantivy ranking does not
  reproduce FTS5's order exactly; ``tantivy vs own exact`` is 1.0 by
  construction (WAND is exact), the column shows how far the formulas differ.
* bm25s: eager sparse scoring over the content (in memory; no incremental
  updates), global top 40 then the scope filter.

    .venv/bin/python benchmarks/lexical_engines.py --size 200000 [--cache DIR] [--queries-per-mix 30]

The tantivy index and the corpus are cached under ``--cache``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import platformdirs

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from search import COLLECTION, query_mixes  # noqa: E402
from search_corpus import open_or_build  # noqa: E402

from kbtui.retrieval.fts_query import STOP_WORDS, any_of, parse_query  # noqa: E402
from kbtui.retrieval.lexical import lexical_candidates  # noqa: E402
from store import fts  # noqa: E402
from store.db import database, open_database  # noqa: E402
from store.sqlite import SqliteLexical  # noqa: E402

LIMIT = 10
POOL = 40
TANTIVY_DEPTH = 200


def exact_bm25(text: str) -> list[int]:
    words = [w for w in parse_query(text).words if w not in STOP_WORDS] or list(parse_query(text).words)
    expression = any_of(words)
    if expression is None:
        return []
    rows = database.execute_sql(
        f"SELECT f.rowid, bm25(chunk_fts, {fts._WEIGHTS_SQL}) AS s FROM chunk_fts AS f {fts._SCOPE_SQL} "
        "AND chunk_fts MATCH ? ORDER BY s LIMIT ?",
        [COLLECTION, COLLECTION, expression, LIMIT],
    ).fetchall()
    return [r[0] for r in rows]


def build_tantivy(path: Path, log=print):
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_integer_field("rowid", stored=True, indexed=True, fast=True)
    builder.add_text_field("heading", tokenizer_name="en_stem", index_option="freq")
    builder.add_text_field("content", tokenizer_name="en_stem", index_option="freq")
    schema = builder.build()
    if (path / "complete").exists():
        return tantivy.Index(schema, path=str(path)), schema
    path.mkdir(parents=True, exist_ok=True)
    index = tantivy.Index(schema, path=str(path))
    writer = index.writer(heap_size=512_000_000, num_threads=2)
    started = time.perf_counter()
    last = 0
    while True:
        rows = database.execute_sql(
            "SELECT id, heading_path, content FROM chunk WHERE id > ? ORDER BY id LIMIT 20000", [last]
        ).fetchall()
        if not rows:
            break
        for rowid, heading, content in rows:
            writer.add_document(tantivy.Document(rowid=rowid, heading=heading, content=content))
        last = rows[-1][0]
    writer.commit()
    writer.wait_merging_threads()
    (path / "complete").write_text("ok\n")
    log(f"  tantivy index built in {time.perf_counter() - started:.0f} s")
    index = tantivy.Index(schema, path=str(path))
    return index, schema


def tantivy_search(index, schema, analyzer, searcher, text: str) -> list[int]:
    import tantivy

    words = [w for w in parse_query(text).words if w not in STOP_WORDS] or list(parse_query(text).words)
    clauses = []
    for word in words:
        for token in analyzer.analyze(word):
            clauses.append((tantivy.Occur.Should, tantivy.Query.term_query(schema, "content", token)))
            clauses.append(
                (tantivy.Occur.Should, tantivy.Query.boost_query(tantivy.Query.term_query(schema, "heading", token), 3.0))
            )
    if not clauses:
        return []
    result = searcher.search(tantivy.Query.boolean_query(clauses), TANTIVY_DEPTH)
    ids = [searcher.doc(address)["rowid"][0] for _, address in result.hits]
    kept = fts._in_scope(ids, COLLECTION, None)
    return [i for i in ids if i in kept][:LIMIT]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=200_000)
    parser.add_argument("--queries-per-mix", type=int, default=30)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cache", type=Path, default=platformdirs.user_cache_path("kbtui") / "bench-search")
    parser.add_argument("--skip-bm25s", action="store_true")
    parser.add_argument("--only-fts5", action="store_true", help="measure only kbtui's FTS5 arm")
    parser.add_argument("--row-budget", type=int, default=None, help="override the arm's ROW_BUDGET")
    parser.add_argument("--completion-depth", type=int, default=None, help="override COMPLETION_DEPTH")
    args = parser.parse_args()
    from kbtui.retrieval import lexical

    if args.row_budget:
        lexical.ROW_BUDGET = args.row_budget
    if args.completion_depth:
        lexical.COMPLETION_DEPTH = args.completion_depth
    corpus = open_or_build(args.cache, args.size, args.seed, log=lambda line: print(line, file=sys.stderr))
    open_database(corpus.database_path)
    fts.forget_row_counts()
    queries = query_mixes(corpus, args.queries_per_mix, args.seed)
    cached = corpus.home / f"exact-bm25-{args.queries_per_mix}-{args.seed}.json"
    if cached.exists():
        reference = json.loads(cached.read_text())
    else:
        print(f"computing exact BM25 for {len(queries)} queries ...", file=sys.stderr)
        reference = {q.text: exact_bm25(q.text) for q in queries}
        cached.write_text(json.dumps(reference))

    def overlap(found: list[int], expected: list[int]) -> float:
        return len(set(found) & set(expected)) / max(1, min(LIMIT, len(expected))) if expected else float(not found)

    results: dict[str, dict[str, tuple[list[float], list[float]]]] = {}

    def measure(engine: str, run) -> None:
        for q in queries:
            run(q.text)  # warm
        for q in queries:
            started = time.perf_counter()
            found = run(q.text)
            ms = (time.perf_counter() - started) * 1000
            times, overlaps = results.setdefault(engine, {}).setdefault(q.mix, ([], []))
            times.append(ms)
            overlaps.append(overlap(found, reference[q.text]))

    terms = {q.text: parse_query(q.text) for q in queries}
    measure("fts5 arm (plan + completion)", lambda text: [
        c for c, _ in lexical_candidates(SqliteLexical(), terms[text], COLLECTION, document_id=None, limit=POOL).ranked[:LIMIT]
    ])

    if args.only_fts5:
        report(args, results)
        return
    import tantivy

    index, schema = build_tantivy(corpus.home / "tantivy-bench", log=lambda line: print(line, file=sys.stderr))
    index.reload()
    searcher = index.searcher()
    analyzer = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).filter(tantivy.Filter.lowercase()).filter(
        tantivy.Filter.stemmer("english")
    ).build()
    measure("tantivy (WAND) + scope check", lambda text: tantivy_search(index, schema, analyzer, searcher, text))

    if not args.skip_bm25s:
        import bm25s
        import Stemmer

        started = time.perf_counter()
        ids, texts = [], []
        for rowid, content in database.execute_sql("SELECT id, content FROM chunk ORDER BY id"):
            ids.append(rowid)
            texts.append(content)
        stemmer = Stemmer.Stemmer("porter")
        retriever = bm25s.BM25()
        retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
        texts = None
        print(f"  bm25s index built in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        id_array = np.array(ids)

        def bm25s_search(text: str) -> list[int]:
            tokens = bm25s.tokenize([text], stopwords="en", stemmer=stemmer, show_progress=False)
            if not tokens.vocab:
                return []
            docs, _ = retriever.retrieve(tokens, k=POOL, show_progress=False, n_threads=1)
            found = [int(id_array[i]) for i in docs[0]]
            kept = fts._in_scope(found, COLLECTION, None)
            return [i for i in found if i in kept][:LIMIT]

        measure("bm25s + scope check", bm25s_search)
    report(args, results)


def report(args, results) -> None:
    print(f"\n{args.size:,} chunks, {args.queries_per_mix} queries per mix; overlap = top-10 shared with exact BM25")
    print(f"{'engine':<30} {'mix':<12} {'overlap':>8} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for engine, mixes in results.items():
        for mix, (times, overlaps) in mixes.items():
            print(
                f"{engine:<30} {mix:<12} {np.mean(overlaps):>8.2f} {np.percentile(times, 50):>8.1f} "
                f"{np.percentile(times, 95):>8.1f} {max(times):>8.1f}"
            )


if __name__ == "__main__":
    main()
