"""Offline study of the retrieval arms on a BEIR set already ingested by
``kbtui eval --home DIR``: the vector arm against whole-passage embedding,
and fusion rules over the arms' real candidate lists.

Reads the eval knowledge base (chunks, vectors, the FTS index) directly, so
a variant costs seconds, not a re-ingestion. Prints nDCG@10 per variant.

    .venv/bin/python benchmarks/retrieval_study.py --beir DIR --home EVAL_HOME [--cache DIR] [--fp32]

* ``whole passage (int8)`` / ``(fp32)``: one vector per BEIR document, its
  title and text as sentence-transformers' BEIR recipe embeds it
  (``title + " " + text``, truncated at 256 word pieces), the baseline the
  vector arm is compared with. fp32 runs the reference numpy forward pass of
  the unquantised weights (slow: minutes).
* ``vector arm``: kbtui's chunk vectors, documents ranked by their best chunk
  (what ``kbtui eval`` measures), and variants of the document score.
* fusion rows: the lexical arm (``kbtui.retrieval.lexical``) and the exact
  vector arm over the same pool the service uses, fused per rule, documents
  by their best fused chunk.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kbtui.embedding.local import LocalEmbedder, locate_model_files  # noqa: E402
from kbtui.retrieval import fusion as fusion_module  # noqa: E402
from kbtui.retrieval.eval import beir_markdown, load_beir, ndcg_at_k  # noqa: E402
from kbtui.retrieval.fts_query import parse_query  # noqa: E402
from kbtui.retrieval.lexical import lexical_candidates  # noqa: E402
from store import fts  # noqa: E402
from store.db import database, open_database  # noqa: E402

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
    parser.add_argument("--beir", type=Path, required=True)
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/kbtui-study"))
    parser.add_argument("--fp32", action="store_true")
    parser.add_argument("--opening-weight", type=float, default=0.0,
                        help="fusion rows: continuation chunks blended with their section's opening")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
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
            ndcg_at_k(ranked, collection.qrels[qid]) for (qid, _), ranked in zip(queries, ranked_lists)
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
        result = lexical_candidates(parse_query(text), COLLECTION, document_id=None, limit=POOL)
        lexical_lists.append((result.ranked, result.plan))
    vector_lists = []
    for row in sims:
        if args.opening_weight:
            w = args.opening_weight
            row = np.where(opener == np.arange(len(row)), row, (1 - w) * row + w * row[opener])
        top = np.argsort(-row)[:POOL]
        vector_lists.append([(int(chunk_ids[i]), float(row[i])) for i in top])
    doc_of_chunk = {int(c): d for c, d in zip(chunk_ids, chunk_doc)}

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
        for (lex, plan), vec, (_, text) in zip(lexical_lists, vector_lists, queries):
            ranked.append(per_document(rule(lex, vec, plan, POOL, text)))
        score_docs(rule_name, ranked)
    width = max(len(k) for k in results)
    print(f"{name}: {len(queries)} queries, {len(set(chunk_doc))} documents, {len(chunk_ids)} chunks")
    for key, value in results.items():
        print(f"  {key:<{width}}  {value:.3f}")
    (args.cache / f"{name}-results.json").write_text(json.dumps(results, indent=2))


def study_rules():
    """Fusion rules to compare: the shipped ones and candidates."""
    f = fusion_module

    def shipped(strategy):
        def rule(lex, vec, plan, pool, text):
            unlisted = pool - len(lex) if plan.ranked else 0
            if not lex or not vec:
                return lex or vec
            alpha = f.vector_weight(vec[0][1], "all-MiniLM-L6-v2-int8")
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


QUESTION_OPENERS = frozenset(
    "what how why when where which who whom whose is are can could does do did should would will shall may "
    "was were has have".split()
)


def is_question(text: str) -> bool:
    words = text.strip().lower().split()
    return bool(words) and (text.strip().endswith("?") or words[0] in QUESTION_OPENERS)


if __name__ == "__main__":
    main()
    _ = math
