"""Offline study of the retrieval arms on a BEIR set already ingested by
``kbtui eval --home DIR``: the vector arm against whole-passage embedding,
and fusion rules over the arms' real candidate lists.

Reads the eval knowledge base (chunks, vectors, the FTS index) directly, so
a variant costs seconds, not a re-ingestion. Prints nDCG@10 per variant.

    .venv/bin/python benchmarks/retrieval_study.py --beir DIR --home EVAL_HOME [--cache DIR] [--fp32] \
        [--opening-weight 0.5]

* ``whole passage (int8)`` / ``(fp32)``: one vector per BEIR document, its
  title and text as sentence-transformers' BEIR recipe embeds it
  (``title + " " + text``, truncated at 256 word pieces), the baseline the
  vector arm is compared with. fp32 runs the reference numpy forward pass of
  the unquantised weights (slow: minutes).
* ``vector arm``: kbtui's chunk vectors, documents ranked by their best chunk
  (what ``kbtui eval`` measures), and variants of the document score.
* fusion rows: the lexical arm (``kbtui.retrieval.lexical``) and the exact
  vector arm over the same pool the service uses, fused per rule, documents
  by their best fused chunk; per-query nDCG@10 at each vector weight and
  known-item MRR (one-word queries whose word occurs in one document) are
  written to the cache folder for comparing weighting rules;
* the no-match floor: the top cosine of the real queries, of the same
  queries without their relevant documents, and of queries that mean
  nothing in the corpus (percentiles printed, values written).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import platformdirs

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kbtui.embedding.local import LocalEmbedder, locate_model_files  # noqa: E402
from kbtui.retrieval import fusion as fusion_module  # noqa: E402
from kbtui.retrieval.eval import beir_markdown, load_beir, ndcg_at_k  # noqa: E402
from kbtui.retrieval.fts_query import STOP_WORDS, parse_query  # noqa: E402
from kbtui.retrieval.lexical import lexical_candidates  # noqa: E402
from store import fts  # noqa: E402
from store.db import database, open_database  # noqa: E402
from store.sqlite import SqliteLexical  # noqa: E402

POOL = 40
COLLECTION = "EVAL"


def cached(path: Path, make):
    if path.exists():
        return np.load(path)
    value = make()
    np.save(path, value)
    return value


def fp32_vectors(texts: list[str]) -> np.ndarray:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "embedding"))
    from bert_reference import NumpyMiniLM  # noqa: PLC0415
    from tokenizers import Tokenizer  # noqa: PLC0415

    files = locate_model_files()
    tokenizer = Tokenizer.from_file(str(files.tokenizer))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=256)
    model = NumpyMiniLM(files.tokenizer.parent / "model.safetensors")
    return np.stack([model.sentence_vector(tokenizer.encode(t).ids) for t in texts]).astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--beir", type=Path)
    parser.add_argument("--home", type=Path)
    parser.add_argument("--compare-rules", nargs="+", metavar="SET",
                        help="only compare vector-weight rules over these sets' written per-query results")
    parser.add_argument("--leave-one-out", nargs="+", metavar="SET",
                        help="validate the vector-weight rule leave-one-set-out over these development sets' "
                             "written per-query results")
    parser.add_argument("--held-out", nargs="*", default=[], metavar="SET",
                        help="with --leave-one-out: sets never fitted on, scored with the rule fitted on all the others")
    parser.add_argument("--cache", type=Path, default=platformdirs.user_cache_path("kbtui") / "retrieval-study")
    parser.add_argument("--fp32", action="store_true")
    parser.add_argument("--opening-weight", type=float, default=0.0,
                        help="fusion rows: continuation chunks blended with their section's opening")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.compare_rules:
        compare_weight_rules(args.cache, args.compare_rules)
        return
    if args.leave_one_out:
        leave_one_set_out(args.cache, args.leave_one_out, args.held_out)
        return
    if args.beir is None or args.home is None:
        parser.error("--beir and --home are required (or --compare-rules)")
    collection = load_beir(args.beir)
    name = collection.name
    by_hash = {
        hashlib.sha256(beir_markdown(d).encode("utf-8")).hexdigest(): d.doc_id for d in collection.documents
    }
    open_database(args.home / "kb.sqlite3")
    label = {
        row[0]: by_hash.get(row[1])
        for row in database.execute_sql("SELECT id, content_hash FROM document WHERE status = 'Indexed'")
    }
    rows = database.execute_sql(
        "SELECT c.id, c.document_id, c.ordinal, v.embedding FROM chunk AS c JOIN vector AS v ON v.chunk_id = c.id "
        "ORDER BY c.id"
    ).fetchall()
    chunk_ids = np.array([r[0] for r in rows])
    chunk_doc = [label.get(r[1]) for r in rows]
    chunk_ordinal = np.array([r[2] for r in rows])
    matrix = np.stack([np.frombuffer(r[3], "<f4") for r in rows])
    queries = list(collection.queries.items())
    embedder = LocalEmbedder()
    query_vectors = cached(
        args.cache / f"{name}-queries-int8.npy", lambda: embedder.embed_documents([t for _, t in queries])
    )
    documents = [d for d in collection.documents if d.title.strip() or d.text.strip()]
    doc_ids = [d.doc_id for d in documents]
    whole_text = [(d.title + " " + d.text).strip() for d in documents]
    whole_int8 = cached(args.cache / f"{name}-whole-int8.npy", lambda: embedder.embed_documents(whole_text))
    results: dict[str, float] = {}

    def score_docs(variant: str, ranked_lists: list[list[str]]) -> None:
        results[variant] = float(np.mean([
            ndcg_at_k(ranked, collection.qrels[qid]) for (qid, _), ranked in zip(queries, ranked_lists, strict=False)
        ]))

    def whole_rank(vectors: np.ndarray, qv: np.ndarray) -> list[list[str]]:
        sims = qv @ vectors.T
        return [[doc_ids[i] for i in np.argsort(-row)[:10]] for row in sims]

    score_docs("whole passage (int8)", whole_rank(whole_int8, query_vectors))
    if args.fp32:
        whole_fp32 = cached(args.cache / f"{name}-whole-fp32.npy", lambda: fp32_vectors(whole_text))
        query_fp32 = cached(args.cache / f"{name}-queries-fp32.npy", lambda: fp32_vectors([t for _, t in queries]))
        score_docs("whole passage (fp32)", whole_rank(whole_fp32, query_fp32))
        score_docs("whole passage fp32 docs, int8 queries", whole_rank(whole_fp32, query_vectors))

    sims = query_vectors @ matrix.T
    first_chunk = chunk_ordinal == 0

    def doc_scores(row: np.ndarray, how: str) -> dict[str, float]:
        per: dict[str, list[float]] = defaultdict(list)
        for i in np.argsort(-row)[:400]:
            if chunk_doc[i] is not None:
                per[chunk_doc[i]].append(float(row[i]))
        if how == "max":
            return {d: s[0] for d, s in per.items()}
        if how == "max+0.1·second":
            return {d: s[0] + 0.1 * (s[1] if len(s) > 1 else 0) for d, s in per.items()}
        raise ValueError(how)

    for how in ("max", "max+0.1·second"):
        ranked = []
        for row in sims:
            scores = doc_scores(row, how)
            ranked.append(sorted(scores, key=lambda d: -scores[d])[:10])
        score_docs(f"vector arm, document = {how}", ranked)
    ranked = []
    for row in sims:
        masked = np.where(first_chunk, row, -9)
        ranked.append([chunk_doc[i] for i in np.argsort(-masked)[:10]])
    score_docs("vector arm, first chunk only", ranked)
    for penalty in (0.02, 0.04, 0.06, 0.1):
        ranked = []
        for row in sims:
            adjusted = np.where(first_chunk, row, row - penalty)
            ranked.append(list(dict.fromkeys(chunk_doc[i] for i in np.argsort(-adjusted)[:60]))[:10])
        score_docs(f"vector arm, continuation chunks -{penalty}", ranked)

    # The no-match floor: top cosine of answerable queries, of the same queries
    # without their relevant documents, and of queries that mean nothing here.
    relevant_mask = []
    for qid, _ in queries:
        relevant_docs = set(collection.qrels[qid])
        relevant_mask.append(np.array([d in relevant_docs for d in chunk_doc]))
    answerable_top = sims.max(axis=1)
    no_answer_top = np.array([np.where(mask, -1, row).max() for row, mask in zip(sims, relevant_mask, strict=False)])
    nonsense_vectors = embedder.embed_documents(NONSENSE)
    nonsense_top = (nonsense_vectors @ matrix.T).max(axis=1)
    calibration = {
        "answerable": answerable_top.tolist(), "no_answer": no_answer_top.tolist(), "nonsense": nonsense_top.tolist(),
    }
    (args.cache / f"{name}-top-cosines.json").write_text(json.dumps(calibration))
    for label_, values in calibration.items():
        q = np.percentile(values, [1, 2, 5, 25, 50, 75, 95])
        print(f"  top cosine {label_:<10} " + " ".join(f"{v:.2f}" for v in q) + "  (percentiles 1 2 5 25 50 75 95)")

    # Continuation chunks scored with their section's opening: (1-w) own + w first.
    section_rows = database.execute_sql("SELECT c.id, c.section_id FROM chunk AS c ORDER BY c.id").fetchall()
    section_of = {r[0]: r[1] for r in section_rows}
    first_of_section: dict[object, int] = {}
    for position, chunk_id in enumerate(chunk_ids):
        first_of_section.setdefault(section_of.get(int(chunk_id)), position)
    opener = np.array([first_of_section[section_of.get(int(c))] for c in chunk_ids])
    for w in (0.3, 0.5, 0.7):
        ranked = []
        for row in sims:
            blended = np.where(opener == np.arange(len(row)), row, (1 - w) * row + w * row[opener])
            ranked.append(list(dict.fromkeys(chunk_doc[i] for i in np.argsort(-blended)[:60]))[:10])
        score_docs(f"vector arm, continuation blended with opening w={w}", ranked)

    # ----------------------------------------------------------- fusion
    fts.forget_row_counts()
    lexical_lists = []
    for _, text in queries:
        result = lexical_candidates(SqliteLexical(), parse_query(text), COLLECTION, document_id=None, limit=POOL)
        lexical_lists.append((result.ranked, result.plan))
    vector_lists = []
    for row in sims:
        if args.opening_weight:
            w = args.opening_weight
            row = np.where(opener == np.arange(len(row)), row, (1 - w) * row + w * row[opener])
        top = np.argsort(-row)[:POOL]
        vector_lists.append([(int(chunk_ids[i]), float(row[i])) for i in top])
    doc_of_chunk = {int(c): d for c, d in zip(chunk_ids, chunk_doc, strict=False)}

    def per_document(fused) -> list[str]:
        seen: dict[str, None] = {}
        for chunk, _ in fused:
            doc = doc_of_chunk.get(int(chunk))
            if doc is not None and doc not in seen:
                seen[doc] = None
        return list(seen)[:10]

    score_docs("lexical arm", [per_document(lex) for lex, _ in lexical_lists])
    score_docs("vector arm (pool)", [per_document(vec) for vec in vector_lists])
    rules = study_rules()
    for rule_name, rule in rules.items():
        ranked = []
        for (lex, plan), vec, (_, text) in zip(lexical_lists, vector_lists, queries, strict=False):
            ranked.append(per_document(rule(lex, vec, plan, POOL, text)))
        score_docs(rule_name, ranked)
    # Per query: features and nDCG@10 of convex fusion at each vector weight (for choosing a rule).
    per_query = []
    for (qid, text), (lex, plan), vec in zip(queries, lexical_lists, vector_lists, strict=False):
        row = {"query": qid, "content_words": len([w for w in parse_query(text).words if w not in STOP_WORDS]),
               "ranked_words": len(plan.ranked), "top_cos": max(s_ for _, s_ in vec) if vec else None,
               "lexical_len": len(lex), "question": is_question(text)}
        for a in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0):
            unlisted = POOL - len(lex) if plan.ranked else 0
            fused = f_convex(vec, lex, unlisted, a) if lex and vec else (lex or vec)
            row[f"a{a}"] = ndcg_at_k(per_document(fused), collection.qrels[qid])
        per_query.append(row)
    (args.cache / f"{name}-per-query.json").write_text(json.dumps(per_query))

    # Known-item lookups: a word that occurs in one document only (an identifier, a name): MRR by weight.
    rng = np.random.default_rng(5)
    doc_words: dict[str, set[str]] = defaultdict(set)
    for d in documents:
        for w in set(re.findall(r"[a-z][a-z0-9_]{6,}", (d.title + " " + d.text).lower())):
            doc_words[w].add(d.doc_id)
    unique = sorted(w for w, ds in doc_words.items() if len(ds) == 1 and w not in STOP_WORDS)
    picked = [unique[i] for i in rng.choice(len(unique), size=min(100, len(unique)), replace=False)]
    known_vectors = embedder.embed_documents(picked)
    known = []
    for word, qv in zip(picked, known_vectors, strict=False):
        target = next(iter(doc_words[word]))
        row = qv @ matrix.T
        if args.opening_weight:
            w = args.opening_weight
            row = np.where(opener == np.arange(len(row)), row, (1 - w) * row + w * row[opener])
        vec = [(int(chunk_ids[i]), float(row[i])) for i in np.argsort(-row)[:POOL]]
        result = lexical_candidates(SqliteLexical(), parse_query(word), COLLECTION, document_id=None, limit=POOL)
        lex, plan = result.ranked, result.plan
        entry = {"query": word, "content_words": 1, "top_cos": float((qv @ matrix.T).max())}
        for a in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0):
            unlisted = POOL - len(lex) if plan.ranked else 0
            fused = f_convex(vec, lex, unlisted, a) if lex and vec else (lex or vec)
            ranked_docs = per_document(fused)
            entry[f"a{a}"] = 1.0 / (ranked_docs.index(target) + 1) if target in ranked_docs else 0.0
        known.append(entry)
    (args.cache / f"{name}-known-item.json").write_text(json.dumps(known))
    width = max(len(k) for k in results)
    print(f"{name}: {len(queries)} queries, {len(set(chunk_doc))} documents, {len(chunk_ids)} chunks")
    for key, value in results.items():
        print(f"  {key:<{width}}  {value:.3f}")
    (args.cache / f"{name}-results.json").write_text(json.dumps(results, indent=2))


def f_convex(vec, lex, unlisted, alpha):
    f = fusion_module
    return f.convex_fusion(f.ArmResult("vector", vec), f.ArmResult("lexical", lex, max(0, unlisted)), alpha)


def study_rules():
    """Fusion rules to compare: the shipped ones and candidates."""
    f = fusion_module

    def shipped(strategy):
        def rule(lex, vec, plan, pool, text):
            unlisted = pool - len(lex) if plan.ranked else 0
            if not lex or not vec:
                return lex or vec
            words = sum(w not in STOP_WORDS for w in parse_query(text).words)  # as search counts them
            alpha = f.vector_weight(vec[0][1], "all-MiniLM-L6-v2-int8", words)
            return f.fuse(strategy, f.ArmResult("lexical", lex, max(0, unlisted)), f.ArmResult("vector", vec), alpha=alpha)

        return rule

    rules = {f"shipped {s}": shipped(s) for s in f.FUSION_STRATEGIES}

    def convex_with(alpha_of):
        def rule(lex, vec, plan, pool, text):
            unlisted = pool - len(lex) if plan.ranked else 0
            if not lex or not vec:
                return lex or vec
            alpha = alpha_of(lex, vec, plan, text)
            return f.convex_fusion(f.ArmResult("vector", vec), f.ArmResult("lexical", lex, max(0, unlisted)), alpha)

        return rule

    def shipped_alpha(lex, vec, plan, text):
        return f.vector_weight(vec[0][1], "all-MiniLM-L6-v2-int8")

    for a in (0.5, 0.6, 0.7, 0.8, 0.9):
        rules[f"convex fixed {a}"] = convex_with(lambda *_, a=a: a)
    for q in (0.7, 0.8, 0.9):
        rules[f"question {q}, else top-cos"] = convex_with(
            lambda lex, vec, plan, text, q=q: q if is_question(text) else shipped_alpha(lex, vec, plan, text))
    for shift in (0.1, 0.2):
        rules[f"top-cos +{shift}"] = convex_with(
            lambda lex, vec, plan, text, shift=shift: min(0.9, max(0.2, shipped_alpha(lex, vec, plan, text) + shift)))
    return rules


WEIGHTS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def compare_weight_rules(cache: Path, names: list[str]) -> None:
    """Mean nDCG@10 (and known-item MRR) of convex fusion when each query's
    vector weight comes from a rule (snapped to the measured weights)."""
    sets = {n: json.loads((cache / f"{n}-per-query.json").read_text()) for n in names}
    known = {n: json.loads((cache / f"{n}-known-item.json").read_text()) for n in names}
    midpoint = fusion_module.SIMILARITY_MIDPOINTS["all-MiniLM-L6-v2-int8"]

    def clip(x: float, low: float = 0.2, high: float = 0.9) -> float:
        return min(high, max(low, x))

    def top_cosine(r) -> float:
        return clip(0.5 + r["top_cos"] - midpoint, 0.2, 0.8)

    def length(r) -> float:
        extra = 0.02 * (15 - r["content_words"]) if r["content_words"] >= 2 else 0.0
        return clip(0.5 + r["top_cos"] - midpoint + extra)

    rules = {
        "fixed 0.5": lambda r: 0.5,
        "fixed 0.7": lambda r: 0.7,
        "0.7 for questions, else top cosine": lambda r: 0.7 if r.get("question") else top_cosine(r),
        "top cosine only": top_cosine,
        "top cosine and length (default)": length,
    }
    for rule_name, rule in rules.items():
        cells = []
        for group in (sets, known):
            for rows in group.values():
                cells.append(np.mean([r[f"a{min(WEIGHTS, key=lambda w: abs(w - rule(r)))}"] for r in rows]))
        print(f"{rule_name:<36} " + " ".join(f"{c:.3f}" for c in cells))
    print("columns: nDCG@10 of " + ", ".join(names) + "; known-item MRR of " + ", ".join(names))


def length_rule_weight(row: dict, midpoint: float, slope: float) -> float:
    """The shipped rule's family (kbtui.retrieval.fusion.vector_weight) with
    its two constants free, snapped to the weights measured per query."""
    length = slope * (fusion_module.LENGTH_PIVOT - row["content_words"]) if row["content_words"] >= 2 else 0.0
    low, high = fusion_module.ALPHA_RANGE
    alpha = min(high, max(low, 0.5 + row["top_cos"] - midpoint + length))
    return min(WEIGHTS, key=lambda w: abs(w - alpha))


def leave_one_set_out(cache: Path, development: list[str], held_out: list[str]) -> None:
    """Fit the rule's midpoint and length slope on every development set but
    one (the mean of the sets' nDCG@10), score it on the one left out; the
    held-out sets are scored with the constants fitted on all development
    sets. Beside it: the shipped constants and both arms on the same pools."""
    names = development + held_out
    per_query = {n: [r for r in json.loads((cache / f"{n}-per-query.json").read_text()) if r["top_cos"] is not None]
                 for n in names}
    arms = {n: json.loads((cache / f"{n}-results.json").read_text()) for n in names}
    grid = [(m, c) for m in (0.45, 0.50, 0.55, 0.60, 0.65) for c in (0.0, 0.01, 0.02, 0.03, 0.04)]

    def score(name: str, midpoint: float, slope: float) -> float:
        rows = per_query[name]
        return float(np.mean([r[f"a{length_rule_weight(r, midpoint, slope)}"] for r in rows]))

    def fit(on: list[str]) -> tuple[float, float]:
        return max(grid, key=lambda mc: np.mean([score(n, *mc) for n in on]))

    shipped = (fusion_module.SIMILARITY_MIDPOINTS["all-MiniLM-L6-v2-int8"], fusion_module.LENGTH_SLOPE)
    print(f"{'left out':<12} {'fitted on the others':<22} {'nDCG@10':>8} {'shipped':>8} {'lexical':>8} {'vector':>8}")
    for name in names:
        midpoint, slope = fit([n for n in development if n != name])
        kind = " (held out)" if name in held_out else ""
        print(f"{name + kind:<12} {f'midpoint {midpoint:.2f}, slope {slope:.2f}':<22} {score(name, midpoint, slope):>8.3f} "
              f"{score(name, *shipped):>8.3f} {arms[name]['lexical arm']:>8.3f} {arms[name]['vector arm (pool)']:>8.3f}")
    print(f"shipped: midpoint {shipped[0]:.2f}, slope {shipped[1]:.2f}; weights snapped to "
          f"{', '.join(map(str, WEIGHTS))}; grid: midpoint .45-.65, slope 0-.04")


# Queries that mean nothing in an English software or engineering corpus.
NONSENSE = [
    "xqzvbl", "qwrtzpl mnbvcx", "zzyzx fnord", "blorptastic wibble", "asdfghjkl", "🎉", "🦄🌈", "🙂 👍",
    "Wo kann ich heute Abend gut essen gehen?", "Der Hund spielt im Garten mit dem Ball.",
    "Ich möchte eine Wohnung in Berlin mieten.", "lorem ipsum dolor sit amet", "1234567 8901",
    "kjhsdf lkjsdf", "Quelle heure est-il à Paris ?", "¿Dónde está la biblioteca?", "ooooooo", "??? !!!",
    "grzmpf", "my cat likes tuna sandwiches", "recipe for chocolate cake", "football world cup final score",
]

QUESTION_OPENERS = frozenset(
    "what how why when where which who whom whose is are can could does do did should would will shall may "
    "was were has have".split()
)


def is_question(text: str) -> bool:
    words = text.strip().lower().split()
    return bool(words) and (text.strip().endswith("?") or words[0] in QUESTION_OPENERS)


if __name__ == "__main__":
    main()
