"""Retrieval evaluation: metrics, a BEIR loader, and the harness behind ``kbtui eval``.

Documents are ranked by their best chunk: the searches ask for one hit per
document (``SearchRequest.per_document``), so nDCG@10 always sees ten
documents even when a document has several chunks near the top. Metrics follow the usual definitions with binary
relevance: Recall@K, document Precision@K, MRR, nDCG@K, and latency
percentiles. ``citation coverage`` serves the deterministic corpus in the
test suite (answers that need several sources).

No-answer accuracy: each judged query is also asked of the corpus without
its relevant documents (a question the knowledge base cannot answer). Its
search is the real one with those documents' hits taken out: the other
candidates' scores do not depend on them (BM25 statistics move by a few
documents in thousands), so what is left is what the smaller corpus would
return. It counts as answered correctly when the no-match signal
(:mod:`kbtui.retrieval.matching`) says nothing matched; ``answerable kept``
is the share of the real queries the signal does not call unanswered.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kbtui.retrieval.matching import NONE, match_signal
from kbtui.retrieval.search import SearchRequest, SearchResponse, SearchService

EVAL_MODES = ("lexical", "vector", "hybrid")
NDCG_K = 10
RECALL_K = 100


# ---------------------------------------------------------------- metrics


def ndcg_at_k(ranked: Sequence[str], relevant: Mapping[str, int] | set[str], k: int = NDCG_K) -> float:
    """Binary nDCG@k (a graded mapping counts any positive grade as relevant)."""
    relevant_ids = {r for r in relevant if (relevant[r] > 0 if isinstance(relevant, Mapping) else True)}
    dcg = sum(1.0 / math.log2(i + 2) for i, doc in enumerate(ranked[:k]) if doc in relevant_ids)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(relevant_ids))))
    return dcg / ideal if ideal else 0.0


def recall_at_k(ranked: Sequence[str], relevant: Iterable[str], k: int) -> float:
    relevant_ids = set(relevant)
    if not relevant_ids:
        return 0.0
    return len(relevant_ids & set(ranked[:k])) / len(relevant_ids)


def precision_at_k(ranked: Sequence[str], relevant: Iterable[str], k: int) -> float:
    relevant_ids = set(relevant)
    return sum(1 for doc in ranked[:k] if doc in relevant_ids) / k if k else 0.0


def reciprocal_rank(ranked: Sequence[str], relevant: Iterable[str]) -> float:
    relevant_ids = set(relevant)
    for i, doc in enumerate(ranked, start=1):
        if doc in relevant_ids:
            return 1.0 / i
    return 0.0


def percentile_ms(samples_ms: Sequence[float], q: float) -> float:
    return float(np.percentile(samples_ms, q)) if samples_ms else 0.0


def documents_by_best_chunk(response: SearchResponse, label: Callable[[str], str | None]) -> list[str]:
    """Document labels in the order of each document's best chunk."""
    seen: dict[str, None] = {}
    for hit in response.hits:
        name = label(hit.document_id)
        if name is not None and name not in seen:
            seen[name] = None
    return list(seen)


# ---------------------------------------------------------------- BEIR


@dataclass(frozen=True)
class BeirDocument:
    doc_id: str
    title: str
    text: str


@dataclass(frozen=True)
class BeirCollection:
    name: str
    documents: list[BeirDocument]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]  # query id -> {doc id: grade > 0}


def load_beir(directory: Path, split: str = "test") -> BeirCollection:
    """Read a BEIR-layout directory: corpus.jsonl, queries.jsonl, qrels/<split>.tsv.

    Only queries with at least one relevant document are kept.
    """
    documents = []
    with open(directory / "corpus.jsonl", encoding="utf-8") as corpus:
        for line in corpus:
            if line.strip():
                record = json.loads(line)
                documents.append(BeirDocument(str(record["_id"]), record.get("title") or "", record.get("text") or ""))
    queries = {}
    with open(directory / "queries.jsonl", encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                record = json.loads(line)
                queries[str(record["_id"])] = record.get("text") or ""
    qrels: dict[str, dict[str, int]] = {}
    with open(directory / "qrels" / f"{split}.tsv", encoding="utf-8") as lines:
        for number, line in enumerate(lines):
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3 or (number == 0 and not parts[2].lstrip("-").isdigit()):
                continue  # the header
            query_id, doc_id, grade = parts[0], parts[1], int(parts[2])
            if grade > 0:
                qrels.setdefault(query_id, {})[doc_id] = grade
    judged = {q: text for q, text in queries.items() if q in qrels}
    return BeirCollection(directory.name, documents, judged, {q: qrels[q] for q in judged})


def beir_markdown(document: BeirDocument) -> str:
    """A BEIR document as the file we ingest: the title as its heading."""
    title = " ".join(document.title.split())
    return f"# {title}\n\n{document.text}\n" if title else f"{document.text}\n"


# ---------------------------------------------------------------- the harness


@dataclass(frozen=True)
class ModeReport:
    mode: str  # lexical | vector | hybrid
    fusion: str | None  # hybrid only
    queries: int
    ndcg_at_10: float
    recall_at_100: float
    mrr: float
    precision_at_10: float
    p50_ms: float
    p95_ms: float
    max_ms: float
    degraded_queries: int
    no_answer_accuracy: float = 0.0  # relevant documents removed: the signal says nothing matched
    no_answer_semantic: float = 0.0  # ... and the best similarity alone is below the floor
    answerable_kept: float = 0.0  # real queries the signal does not call unanswered

    def to_json(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "fusion": self.fusion,
            "queries": self.queries,
            "ndcg_at_10": round(self.ndcg_at_10, 4),
            "recall_at_100": round(self.recall_at_100, 4),
            "mrr": round(self.mrr, 4),
            "precision_at_10": round(self.precision_at_10, 4),
            "p50_ms": round(self.p50_ms, 2),
            "p95_ms": round(self.p95_ms, 2),
            "max_ms": round(self.max_ms, 2),
            "degraded_queries": self.degraded_queries,
            "no_answer_accuracy": round(self.no_answer_accuracy, 4),
            "no_answer_semantic": round(self.no_answer_semantic, 4),
            "answerable_kept": round(self.answerable_kept, 4),
        }


def evaluate_mode(
    service: SearchService,
    collection_id: str,
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    label: Callable[[str], str | None],
    *,
    mode: str,
    fusion: str | None = None,
) -> ModeReport:
    """Run every query in one mode; nDCG@10, MRR and P@10 come from the search a
    user would run (10 hits), Recall@100 from a second search for 100 hits."""
    ndcgs, recalls, rrs, precisions, latencies = [], [], [], [], []
    no_answer, no_answer_semantic, kept = [], [], []
    model = service.embedder.identity.model if service.embedder is not None else None
    degraded = 0
    for query_id, text in queries.items():
        relevant = qrels[query_id]
        started = time.perf_counter()
        top = service.search(
            SearchRequest(
                text, collection_id, limit=NDCG_K, mode=mode, fusion=fusion, per_document=True, keep_unmatched=True
            )
        )
        latencies.append((time.perf_counter() - started) * 1000)
        deep = service.search(
            SearchRequest(
                text, collection_id, limit=RECALL_K, mode=mode, fusion=fusion, per_document=True, keep_unmatched=True
            )
        )
        degraded += bool([r for r in top.degraded if not r.startswith("reranker_skipped")])
        ranked = documents_by_best_chunk(top, label)
        ndcgs.append(ndcg_at_k(ranked, relevant, NDCG_K))
        rrs.append(reciprocal_rank(ranked, relevant))
        precisions.append(precision_at_k(ranked, relevant, NDCG_K))
        recalls.append(recall_at_k(documents_by_best_chunk(deep, label), relevant, RECALL_K))
        kept.append(deep.match is not None and deep.match.verdict != NONE)
        without = without_documents(deep, {d for d, grade in relevant.items() if grade > 0}, label, model)
        no_answer.append(without.verdict == NONE)
        no_answer_semantic.append(without.semantic is not True)
    count = max(1, len(ndcgs))
    return ModeReport(
        mode=mode,
        fusion=fusion if mode == "hybrid" else None,
        queries=len(ndcgs),
        ndcg_at_10=sum(ndcgs) / count,
        recall_at_100=sum(recalls) / count,
        mrr=sum(rrs) / count,
        precision_at_10=sum(precisions) / count,
        p50_ms=percentile_ms(latencies, 50),
        p95_ms=percentile_ms(latencies, 95),
        max_ms=max(latencies, default=0.0),
        degraded_queries=degraded,
        no_answer_accuracy=sum(no_answer) / count,
        no_answer_semantic=sum(no_answer_semantic) / count,
        answerable_kept=sum(kept) / count,
    )


def without_documents(response: SearchResponse, removed: set[str], label: Callable[[str], str | None], model):
    """The no-match signal ``response`` would carry had the documents labelled
    ``removed`` not been in the corpus (see the module docstring)."""
    left = [hit for hit in response.hits if label(hit.document_id) not in removed]
    similarities = [hit.similarity for hit in left if hit.similarity is not None]
    return match_signal(
        lexical_found=any(hit.lexical_rank is not None for hit in left),
        best_similarity=max(similarities) if similarities else None,
        model=model,
    )


@dataclass
class BeirRun:
    collection: BeirCollection
    reports: list[ModeReport] = field(default_factory=list)
    ingest_s: float = 0.0
    indexed: int = 0
    failed: int = 0


def ingest_beir(node, collection: BeirCollection, collection_id: str, *, show_progress: bool) -> tuple[dict[str, str], dict[str, str]]:
    """Write each BEIR document as a Markdown file, add it, and index everything
    through the node's actor pipeline, like ``kbtui add``. Returns document id
    -> BEIR id, and document id -> final status."""
    labels: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="kbtui-eval-") as scratch:
        folder = Path(scratch)
        for number, document in enumerate(collection.documents):
            if not (document.title.strip() or document.text.strip()):
                continue  # nothing to index (Cranfield has one): it could only fail as no_text
            path = folder / f"{number:06d}.md"
            path.write_text(beir_markdown(document), encoding="utf-8")
            labels[node.add_file(path, collection_id, fmt="markdown").document_id] = document.doc_id
        statuses = node.index(list(labels), show_progress=show_progress)
    return labels, statuses


def run_beir(
    node,
    collection: BeirCollection,
    *,
    fusions: Sequence[str],
    show_progress: bool = False,
    collection_id: str = "EVAL",
) -> BeirRun:
    """Ingest ``collection`` into ``node`` and evaluate each mode (hybrid once per fusion)."""
    started = time.perf_counter()
    labels, statuses = ingest_beir(node, collection, collection_id, show_progress=show_progress)
    run = BeirRun(collection, ingest_s=time.perf_counter() - started)
    run.indexed = sum(status == "Indexed" for status in statuses.values())
    run.failed = sum(status == "Failed" for status in statuses.values())
    service = node.searcher
    for mode in ("lexical", "vector"):
        run.reports.append(evaluate_mode(service, collection_id, collection.queries, collection.qrels, labels.get, mode=mode))
    for fusion in fusions:
        run.reports.append(
            evaluate_mode(service, collection_id, collection.queries, collection.qrels, labels.get, mode="hybrid", fusion=fusion)
        )
    return run


def answers_nothing(response: SearchResponse, *, min_similarity: float) -> bool:
    """For a query with no answer in the corpus: true when no hit matched lexically
    and none is semantically close (vector score below ``min_similarity``)."""
    return all(
        hit.lexical_rank is None and (hit.vector_score is None or hit.vector_score < min_similarity)
        for hit in response.hits
    )


def citation_coverage(response: SearchResponse, anchors: Iterable[tuple[str, str]], k: int) -> float:
    """Share of the expected (document id, heading trail) anchors among the top ``k`` hits."""
    expected = set(anchors)
    if not expected:
        return 1.0
    found = {(hit.document_id, hit.heading_path) for hit in response.hits[:k]}
    return len(expected & found) / len(expected)
