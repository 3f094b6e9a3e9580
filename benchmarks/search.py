"""Search latency at 10k, 100k and 1M chunks of Zipfian text (see search_corpus.py).

Per size, on the cached synthetic knowledge base:

* lexical arm (the planned query of ``kbtui.retrieval.lexical``) against the
  naive FTS5 query (bm25 over the OR of every query word, scoped) — per query
  mix: rare words, natural questions ("what is the ..."), only very common
  words, and long queries — with its top-10 overlap with exact BM25 over the
  query's words that are not stop words (the naive query without them,
  computed once per corpus and cached beside it);
* vector arm (the service's vector entry point: the ANN index when the store
  has one, else the exact SQLite scan) against exact brute force in numpy in
  the same run: latency and recall@10;
* whole search (``SearchService.search``, hybrid, 10 hits), excluding query
  embedding (the query vector is ready) and including it (the query also
  goes through the configured local provider, when it is installed).

The databases are built once into a cache folder outside the repository
(``--cache``, default the user cache dir) and reused. Prints a table;
``--json PATH`` writes the records. Absolute times are noisy on a shared
machine: compare within one run.

    .venv/bin/python benchmarks/search.py --sizes 10000 100000 1000000 [--json out.json]
    .venv/bin/python benchmarks/search.py --prepare-only   # build the caches (1M: long), then stop
    .venv/bin/python benchmarks/search.py --store postgresql --sizes 100000   # PostgreSQL beside SQLite
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import platformdirs

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_corpus import DIM, VECTOR_IDENTITY, SyntheticCorpus, clustered_vectors, open_or_build  # noqa: E402

from kbtui.config import Config  # noqa: E402
from kbtui.embedding import VectorIdentity  # noqa: E402
from kbtui.retrieval.fts_query import STOP_WORDS, parse_query  # noqa: E402
from kbtui.retrieval.lexical import lexical_candidates  # noqa: E402
from kbtui.retrieval.search import SearchRequest, SearchService  # noqa: E402
from store import fts  # noqa: E402
from store.blobs import BlobStore  # noqa: E402
from store.db import database, open_database  # noqa: E402
from store.fts_match import any_of  # noqa: E402
from store.models import SERVED_DOCUMENT_SQL  # noqa: E402
from store.opening import Store  # noqa: E402
from store.sqlite import SqliteLexical  # noqa: E402

POOL = 40
LIMIT = 10
COLLECTION = "DEFAULT"


@dataclass(frozen=True)
class Query:
    mix: str
    text: str
    vector: np.ndarray


def query_mixes(corpus: SyntheticCorpus, per_mix: int, seed: int) -> list[Query]:
    rng = np.random.default_rng(seed + 99)
    words = corpus.vocabulary

    def pick(low: int, high: int, count: int) -> list[str]:
        return [words[i] for i in rng.integers(low, high, count)]

    openers = ["what is the", "how do i", "where are the", "why is the", "when was the"]
    queries = []
    for _ in range(per_mix):
        queries.append(("rare", " ".join(pick(3_000, len(words), 2))))
        queries.append(("question", f"{openers[rng.integers(len(openers))]} {' '.join(pick(200, 8_000, 2))}"))
        queries.append(("common_only", " ".join(pick(0, 60, int(rng.integers(2, 5))))))
        queries.append(("long", " ".join(pick(0, 100, 4) + pick(100, 3_000, 3) + pick(3_000, len(words), 1))))
    topics = rng.integers(0, corpus.topics.shape[0], len(queries))
    vectors = clustered_vectors(rng, corpus.topics, topics)
    return [Query(mix, text, vectors[i]) for i, (mix, text) in enumerate(queries)]


class PreparedQueryEmbedder:
    """Answers embed_query with the query's prepared vector (the benchmark's own
    identity); with ``model`` set, each query is also embedded by that real
    provider first, so its cost is inside the measured time."""

    def __init__(self, vectors: dict[str, np.ndarray], model=None) -> None:
        self.vectors = vectors
        self.model = model
        provider, rest = VECTOR_IDENTITY.split(":", 1)
        self._identity = VectorIdentity(provider, "clustered", "v1", "native", DIM)

    @property
    def identity(self) -> VectorIdentity:
        return self._identity

    def canonical(self) -> str:
        return VECTOR_IDENTITY

    @property
    def context_window(self) -> int | None:
        return None

    def embed_documents(self, texts):
        raise NotImplementedError

    def embed_query(self, text: str) -> np.ndarray:
        if self.model is not None:
            self.model.embed_query(text)
        return self.vectors[text]


def naive_lexical(text: str, limit: int) -> list[int]:
    """The unplanned arm: bm25 over the OR of every query word, scoped."""
    expression = any_of(list(parse_query(text).words))
    if expression is None:
        return []
    rows = database.execute_sql(
        f"SELECT f.rowid, bm25(chunk_fts, {fts._WEIGHTS_SQL}) AS s FROM chunk_fts AS f {fts._SCOPE_SQL} "
        "AND chunk_fts MATCH ? ORDER BY s LIMIT ?",
        [COLLECTION, COLLECTION, expression, limit],
    ).fetchall()
    return [r[0] for r in rows]


def exact_bm25(text: str) -> list[int]:
    """Exact BM25 top 10 over the query's words that are not stop words (all
    of them when every word is one), scoped: the lexical arm's reference."""
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


def exact_references(corpus: SyntheticCorpus, queries: list[Query], per_mix: int) -> dict[str, list[int]]:
    """Exact BM25 per query, cached beside the corpus (slow at 1M: every matching row is scored)."""
    path = corpus.home / f"exact-bm25-{per_mix}-{corpus_seed(corpus)}.json"
    if path.exists():
        cached = json.loads(path.read_text())
        if all(q.text in cached for q in queries):
            return cached
    print(f"  exact BM25 for {len(queries)} queries (once per corpus) ...", file=sys.stderr)
    found = {q.text: exact_bm25(q.text) for q in queries}
    path.write_text(json.dumps(found))
    return found


def corpus_seed(corpus: SyntheticCorpus) -> str:
    return corpus.home.name.rsplit("-s", 1)[-1]


def top_overlap(found: list[int], expected: list[int]) -> float:
    """Share of the exact top 10 that ``found`` also has (1.0 when both are empty)."""
    if not expected:
        return float(not found)
    return len(set(found) & set(expected)) / min(LIMIT, len(expected))


def timed(fn) -> tuple[float, object]:
    started = time.perf_counter()
    result = fn()
    return (time.perf_counter() - started) * 1000, result


def summary(size: int, measure: str, samples: list[float], **extra: object) -> dict[str, object]:
    return {
        "size": size,
        "measure": measure,
        "queries": len(samples),
        "p50_ms": round(float(np.percentile(samples, 50)), 2) if samples else None,
        "p95_ms": round(float(np.percentile(samples, 95)), 2) if samples else None,
        "max_ms": round(max(samples), 2) if samples else None,
        **extra,
    }


def exact_matrix(size: int) -> tuple[np.ndarray, np.ndarray]:
    """Every in-scope vector in memory: the brute-force ground truth."""
    rows = database.execute_sql(
        "SELECT v.chunk_id, v.embedding FROM vector AS v JOIN chunk AS c ON c.id = v.chunk_id "
        "JOIN document AS d ON d.id = c.document_id WHERE v.identity = ? AND c.collection_id = ? "
        f"AND d.collection_id = ? AND {SERVED_DOCUMENT_SQL}",
        [VECTOR_IDENTITY, COLLECTION, COLLECTION],
    )
    ids = np.empty(size, np.int64)
    matrix = np.empty((size, DIM), np.float32)
    count = 0
    for chunk_id, blob in rows:
        ids[count] = chunk_id
        matrix[count] = np.frombuffer(blob, "<f4")
        count += 1
    return ids[:count], matrix[:count]


def corpus_store(home: Path) -> Store:
    """The benchmark corpus as the SQLite store (its catalog already open on this thread)."""
    return Store(home=home, db=database, blobs=BlobStore(home / "blobs", bytes(32)), node_key=bytes(32))


def local_model():
    try:
        from kbtui.embedding import make_provider

        model = make_provider("local")
        model.embed_query("warm up")
        return model
    except Exception:  # noqa: BLE001 - not installed in this build: excluded-only numbers
        return None


def run_size(corpus: SyntheticCorpus, per_mix: int, naive_per_mix: int, seed: int, model) -> list[dict[str, object]]:
    size = corpus.size
    open_database(corpus.database_path)
    fts.forget_row_counts()
    queries = query_mixes(corpus, per_mix, seed)
    records: list[dict[str, object]] = []
    terms_of = {q.text: parse_query(q.text) for q in queries}

    # Warm the page cache and the row-count cache as a running node would be.
    for q in queries:
        lexical_candidates(SqliteLexical(), terms_of[q.text], COLLECTION, document_id=None, limit=POOL)

    reference = exact_references(corpus, queries, per_mix)
    by_mix: dict[str, list[float]] = {}
    overlaps: dict[str, list[float]] = {}
    for q in queries:
        ms, found = timed(lambda: lexical_candidates(SqliteLexical(), terms_of[q.text], COLLECTION, document_id=None, limit=POOL))
        by_mix.setdefault(q.mix, []).append(ms)
        overlaps.setdefault(q.mix, []).append(top_overlap([c for c, _ in found.ranked[:LIMIT]], reference[q.text]))
    every = [x for v in overlaps.values() for x in v]
    records.append(summary(size, "lexical arm (planned), all mixes", [x for v in by_mix.values() for x in v],
                           bm25_overlap=round(float(np.mean(every)), 3)))
    for mix, samples in by_mix.items():
        records.append(summary(size, f"  lexical arm, {mix}", samples, bm25_overlap=round(float(np.mean(overlaps[mix])), 3)))
    naive: list[float] = []
    for mix in by_mix:
        for q in [q for q in queries if q.mix == mix][:naive_per_mix]:
            ms, _ = timed(lambda: naive_lexical(q.text, POOL))
            naive.append(ms)
    records.append(summary(size, "lexical naive (OR of all words)", naive))

    ids, matrix = exact_matrix(size)
    exact_times, truth = [], []
    for q in queries:
        ms, top = timed(lambda: ids[np.argsort(-(matrix @ q.vector))[:LIMIT]])
        exact_times.append(ms)
        truth.append(set(top.tolist()))
    records.append(summary(size, "vector exact numpy (in memory)", exact_times, recall_at_10=1.0))
    matrix = None  # free it before the index is loaded

    store = corpus_store(corpus.home)
    embedder = PreparedQueryEmbedder({q.text: q.vector for q in queries})
    service = SearchService(Config(home=corpus.home), embedder, store)
    index = store.vectors.index_for(VECTOR_IDENTITY, DIM)
    index.ensure_open()
    index.wait_ready()
    probe = list(zip(queries, truth, strict=True))
    arm_times, recalls = [], []
    for q, expected in probe:
        ms, found = timed(lambda: service._vector_candidates(q.vector, VECTOR_IDENTITY, SearchRequest(q.text, COLLECTION), POOL))
        arm_times.append(ms)
        recalls.append(len(expected & {c for c, _ in found[:LIMIT]}) / LIMIT)
    label = "vector arm (ANN index)"
    records.append(summary(size, label, arm_times, recall_at_10=round(float(np.mean(recalls)), 3)))

    whole = []
    for q, _ in probe:
        ms, _ = timed(lambda: service.search(SearchRequest(q.text, COLLECTION, limit=LIMIT)))
        whole.append(ms)
    records.append(summary(size, "whole search, embedding excluded", whole))
    if model is not None:
        with_model = SearchService(Config(home=corpus.home), PreparedQueryEmbedder(embedder.vectors, model), store)
        samples = []
        for q, _ in probe:
            ms, _ = timed(lambda: with_model.search(SearchRequest(q.text, COLLECTION, limit=LIMIT)))
            samples.append(ms)
        records.append(summary(size, "whole search, local query embedding included", samples))
        with_model.close()
    service.close()
    store.vectors.close()
    database.close()
    return records


def prepare(corpus: SyntheticCorpus) -> None:
    """Build (or load and catch up) the size's ANN index and save it beside the
    database, so a later run starts from the cache (the 1M build is long)."""
    open_database(corpus.database_path)
    vectors = corpus_store(corpus.home).vectors
    started = time.perf_counter()
    index = vectors.index_for(VECTOR_IDENTITY, DIM)
    index.ensure_open()
    index.wait_ready()
    vectors.close()  # saves the index if it changed
    print(f"  ANN index for {corpus.size:,} chunks ready in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    database.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--queries-per-mix", type=int, default=50)
    parser.add_argument("--naive-per-mix", type=int, default=10, help="naive FTS5 queries per mix (slow at 1M)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cache", type=Path, default=platformdirs.user_cache_path("kbtui") / "bench-search")
    parser.add_argument("--json", type=Path, help="also write the records here")
    parser.add_argument("--prepare-only", action="store_true", help="build the cached databases and ANN indexes, then stop")
    parser.add_argument("--store", choices=["sqlite", "postgresql"], default="sqlite",
                        help="postgresql: the PostgreSQL store beside SQLite, in one run (search_postgres.py)")
    args, rest = parser.parse_known_args()
    if args.store == "postgresql":
        import search_postgres

        search_postgres.main(sys.argv[1:])
        return
    if rest:
        parser.error(f"unrecognised arguments: {' '.join(rest)}")
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.prepare_only:
        for size in args.sizes:
            prepare(open_or_build(args.cache, size, args.seed, log=lambda line: print(line, file=sys.stderr)))
        return
    model = local_model()
    records: list[dict[str, object]] = []
    for size in args.sizes:
        corpus = open_or_build(args.cache, size, args.seed, log=lambda line: print(line, file=sys.stderr))
        records.extend(run_size(corpus, args.queries_per_mix, args.naive_per_mix, args.seed, model))
    print(
        f"{'size':>9}  {'measure':<46} {'n':>4} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'recall@10':>9} "
        f"{'bm25 top10':>10}"
    )
    for r in records:
        recall = r.get("recall_at_10")
        overlap = r.get("bm25_overlap")
        print(
            f"{r['size']:>9,}  {r['measure']:<46} {r['queries']:>4} {r['p50_ms']:>8} {r['p95_ms']:>8} "
            f"{r['max_ms']:>8} {'' if recall is None else recall:>9} {'' if overlap is None else overlap:>10}"
        )
    for line in target_lines(records):
        print(line)
    if args.json:
        args.json.write_text(json.dumps(records, indent=2))


# The targets at a million chunks on a 2-core machine.
TARGETS_AT = 1_000_000
LEXICAL_P95_MS = 50.0
LEXICAL_OVERLAP = 0.95  # top-10 agreement with exact BM25, question and long mixes
VECTOR_RECALL = 0.95
VECTOR_P95_MS = 5.0
WHOLE_P95_MS = 60.0


def target_lines(records: list[dict[str, object]]) -> list[str]:
    """Reached or missed, for each target, at the largest size measured (if 1M)."""
    at = [r for r in records if r["size"] == TARGETS_AT] or [
        r for r in records if r["size"] == max(int(x["size"]) for x in records)
    ]
    if not at:
        return []
    size = int(at[0]["size"])
    lexical = max(float(r["p95_ms"]) for r in at if str(r["measure"]).strip().startswith("lexical arm"))
    vector = next(r for r in at if str(r["measure"]).startswith("vector arm"))
    whole = next(r for r in at if r["measure"] == "whole search, embedding excluded")

    def verdict(ok: bool) -> str:
        return "reached" if ok else "MISSED"

    faithful = {
        mix: float(r["bm25_overlap"]) for r in at for mix in ("question", "long")
        if str(r["measure"]).strip() == f"lexical arm, {mix}"
    }
    return [
        "",
        f"targets (set for {TARGETS_AT:,} chunks) at {size:,} chunks:",
        f"  lexical top-10 overlap with exact BM25 >= {LEXICAL_OVERLAP} on questions and long queries: "
        + ", ".join(f"{mix} {value:.2f}" for mix, value in faithful.items())
        + f", {verdict(all(v >= LEXICAL_OVERLAP for v in faithful.values()))}",
        f"  lexical arm p95 <= {LEXICAL_P95_MS:.0f} ms in every mix: {lexical:.1f} ms, {verdict(lexical <= LEXICAL_P95_MS)}",
        f"  vector recall@10 >= {VECTOR_RECALL} at p95 <= {VECTOR_P95_MS:.0f} ms: {vector['recall_at_10']} at "
        f"{vector['p95_ms']} ms, "
        f"{verdict(float(vector['recall_at_10']) >= VECTOR_RECALL and float(vector['p95_ms']) <= VECTOR_P95_MS)}",
        f"  whole search p95 <= {WHOLE_P95_MS:.0f} ms (query embedding excluded): {whole['p95_ms']} ms, "
        f"{verdict(float(whole['p95_ms']) <= WHOLE_P95_MS)}",
    ]


if __name__ == "__main__":
    main()
