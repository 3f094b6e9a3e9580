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
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kbtui.errors import KbtuiError
from kbtui.retrieval.matching import NONE, match_signal, word_coverage
from kbtui.retrieval.results import Hit
from kbtui.retrieval.search import SearchRequest, SearchResponse, SearchService
from kbtui.retrieval.snippets import QueryHighlighter

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
    return [name for _, name in _labelled_documents(response, label)]


def _labelled_documents(response: SearchResponse, label: Callable[[str], str | None]) -> list[tuple[Hit, str]]:
    """Each document's best hit, with its label, in rank order."""
    seen: dict[str, Hit] = {}
    for hit in response.hits:
        name = label(hit.document_id)
        if name is not None and name not in seen:
            seen[name] = hit
    return [(hit, name) for name, hit in seen.items()]


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


class InvalidEvalSet(KbtuiError):
    """A BEIR directory that cannot be evaluated faithfully (exit 2): one line saying where."""


def load_beir(directory: Path, split: str = "test") -> BeirCollection:
    """Read a BEIR-layout directory: corpus.jsonl, queries.jsonl, qrels/<split>.tsv.

    Strict, because a silently skipped line is a silently wrong score: a file
    that is missing, not UTF-8, a line that is not a JSON object or lacks an
    ``_id``, an id or query given twice, a grade that is not an integer, or a
    set left empty is an :class:`InvalidEvalSet` naming the file and line.
    Only queries with at least one relevant document are kept.
    """
    documents: list[BeirDocument] = []
    seen_documents: dict[str, int] = {}
    for number, record in _json_lines(directory / "corpus.jsonl"):
        doc_id = _record_id(record, "corpus.jsonl", number, seen_documents)
        documents.append(BeirDocument(
            doc_id,
            _text_field(record, "title", "corpus.jsonl", number),
            _text_field(record, "text", "corpus.jsonl", number),
        ))
    queries: dict[str, str] = {}
    seen_queries: dict[str, int] = {}
    for number, record in _json_lines(directory / "queries.jsonl"):
        query_id = _record_id(record, "queries.jsonl", number, seen_queries)
        queries[query_id] = _text_field(record, "text", "queries.jsonl", number)
    qrels = _read_qrels(directory / "qrels" / f"{split}.tsv", f"qrels/{split}.tsv")
    if not documents:
        raise InvalidEvalSet("BEIR corpus.jsonl holds no documents")
    if not queries:
        raise InvalidEvalSet("BEIR queries.jsonl holds no queries")
    judged = {q: text for q, text in queries.items() if q in qrels}
    if not judged:
        raise InvalidEvalSet(f"BEIR qrels/{split}.tsv judges no query of queries.jsonl relevant to any document")
    return BeirCollection(directory.name, documents, judged, {q: qrels[q] for q in judged})


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """Numbered lines of a UTF-8 file; a missing file or bad bytes is an InvalidEvalSet."""
    name = path.name if path.parent.name != "qrels" else f"qrels/{path.name}"
    try:
        handle = open(path, "rb")  # noqa: SIM115 - only the open is guarded; the with below closes it
    except FileNotFoundError:
        raise InvalidEvalSet(f"the BEIR directory has no {name}") from None
    except OSError:
        raise InvalidEvalSet(f"BEIR {name} cannot be read") from None
    with handle:
        for number, raw in enumerate(handle, start=1):
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidEvalSet(f"BEIR {name} line {number}: not valid UTF-8") from None


def _json_lines(path: Path) -> Iterator[tuple[int, dict]]:
    for number, line in _lines(path):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            raise InvalidEvalSet(f"BEIR {path.name} line {number}: not valid JSON") from None
        if not isinstance(record, dict):
            raise InvalidEvalSet(f"BEIR {path.name} line {number}: not a JSON object")
        yield number, record


def _record_id(record: dict, name: str, number: int, seen: dict[str, int]) -> str:
    raw = record.get("_id")
    if isinstance(raw, bool) or not isinstance(raw, (str, int)) or not str(raw).strip():
        raise InvalidEvalSet(f"BEIR {name} line {number}: no _id (a string or an integer)")
    identifier = str(raw)
    if identifier in seen:
        raise InvalidEvalSet(f"BEIR {name} line {number}: the _id of line {seen[identifier]} again")
    seen[identifier] = number
    return identifier


def _text_field(record: dict, key: str, name: str, number: int) -> str:
    value = record.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidEvalSet(f"BEIR {name} line {number}: {key} is not a string")
    return value


def _read_qrels(path: Path, name: str) -> dict[str, dict[str, int]]:
    """query id -> {doc id: grade > 0}; the first line may be a header."""
    qrels: dict[str, dict[str, int]] = {}
    seen: dict[tuple[str, str], int] = {}
    for number, line in _lines(path):
        if not line.strip():
            continue
        parts = line.rstrip("\r\n").split("\t")
        if len(parts) < 3:
            raise InvalidEvalSet(f"BEIR {name} line {number}: expected query-id, corpus-id and score separated by tabs")
        query_id, doc_id, raw_grade = parts[0], parts[1], parts[2].strip()
        if not _INTEGER.fullmatch(raw_grade):
            if number == 1:
                continue  # the header
            raise InvalidEvalSet(f"BEIR {name} line {number}: the score is not an integer")
        if (query_id, doc_id) in seen:
            raise InvalidEvalSet(f"BEIR {name} line {number}: the pair of line {seen[query_id, doc_id]} again")
        seen[query_id, doc_id] = number
        grade = int(raw_grade)
        if grade > 0:
            qrels.setdefault(query_id, {})[doc_id] = grade
    if not seen:
        raise InvalidEvalSet(f"BEIR {name} holds no judgements")
    return qrels


_INTEGER = re.compile(r"[+-]?[0-9]+")


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
    off_topic_none: float | None = None  # questions with no answer in the set (--no-answer) called unanswered
    off_topic_queries: int = 0
    per_query_ndcg: Mapping[str, float] = field(default_factory=dict)  # query id -> nDCG@10 (kbtui eval --per-query)
    # Of the top ten's relevant documents, the share a user is shown (not below the
    # similarity floor, and not a "nothing matched"); of the others, the share hidden.
    relevant_shown: float = 1.0
    unrelated_hidden: float = 0.0

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
            "off_topic_none": None if self.off_topic_none is None else round(self.off_topic_none, 4),
            "off_topic_queries": self.off_topic_queries,
            "relevant_shown": round(self.relevant_shown, 4),
            "unrelated_hidden": round(self.unrelated_hidden, 4),
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
    off_topic: Sequence[str] = (),
) -> ModeReport:
    """Run every query in one mode; nDCG@10, MRR and P@10 come from the search a
    user would run (10 hits), Recall@100 from a second search for 100 hits.
    ``off_topic`` questions have no answer in the set: the share called
    unanswered (verdict ``none``) is reported beside."""
    ndcgs, recalls, rrs, precisions, latencies = [], [], [], [], []
    no_answer, no_answer_semantic, kept = [], [], []
    per_query: dict[str, float] = {}
    shown = Counter[bool]()  # relevant top-ten documents: shown or not
    hidden = Counter[bool]()  # the other top-ten documents: hidden or not
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
        per_query[query_id] = ndcgs[-1]
        rrs.append(reciprocal_rank(ranked, relevant))
        precisions.append(precision_at_k(ranked, relevant, NDCG_K))
        recalls.append(recall_at_k(documents_by_best_chunk(deep, label), relevant, RECALL_K))
        kept.append(top.match is not None and top.match.verdict != NONE)  # as the user sees it: 10 hits
        for hit, name in _labelled_documents(top, label):
            seen = kept[-1] and not hit.below_floor
            if relevant.get(name, 0) > 0:
                shown[seen] += 1
            else:
                hidden[not seen] += 1
        without = without_documents(deep, {d for d, grade in relevant.items() if grade > 0}, label, model, text)
        no_answer.append(without.verdict == NONE)
        no_answer_semantic.append(without.semantic is not True)
    count = max(1, len(ndcgs))
    off_topic_none = [
        (found.match is not None and found.match.verdict == NONE)
        for found in (
            service.search(SearchRequest(text, collection_id, limit=NDCG_K, mode=mode, fusion=fusion, per_document=True))
            for text in off_topic
        )
    ]
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
        off_topic_none=sum(off_topic_none) / len(off_topic_none) if off_topic_none else None,
        off_topic_queries=len(off_topic_none),
        per_query_ndcg=per_query,
        relevant_shown=shown[True] / shown.total() if shown.total() else 1.0,
        unrelated_hidden=hidden[True] / hidden.total() if hidden.total() else 0.0,
    )


def without_documents(
    response: SearchResponse, removed: set[str], label: Callable[[str], str | None], model, query: str
):
    """The no-match signal ``response`` would carry had the documents labelled
    ``removed`` not been in the corpus (see the module docstring); the words are
    judged on the passages a user would then see (the first 10 left)."""
    left = [hit for hit in response.hits if label(hit.document_id) not in removed]
    similarities = [hit.similarity for hit in left if hit.similarity is not None]
    highlighter = QueryHighlighter.for_query(query)
    return match_signal(
        lexical_found=any(hit.lexical_rank is not None for hit in left),
        best_similarity=max(similarities) if similarities else None,
        model=model,
        words_together=any(word_coverage(hit.text, highlighter) >= 1.0 for hit in left[:NDCG_K]),
    )


# A --no-answer file's bounds: it is the operator's own, but read like any input.
MAX_QUESTIONS = 10_000
MAX_QUESTIONS_BYTES = 4 * 1024 * 1024


def load_questions(path: Path) -> list[str]:
    """Questions one per line (blank lines and ``#`` comments skipped)."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_QUESTIONS_BYTES + 1)
    except OSError as exc:
        raise InvalidEvalSet(f"cannot read the --no-answer file ({exc.strerror})") from exc
    if len(data) > MAX_QUESTIONS_BYTES:
        raise InvalidEvalSet(f"the --no-answer file is larger than {MAX_QUESTIONS_BYTES // (1024 * 1024)} MiB")
    lines = [line.strip() for line in data.decode("utf-8", errors="replace").splitlines()]
    questions = [line for line in lines if line and not line.startswith("#")]
    if not questions or len(questions) > MAX_QUESTIONS:
        raise InvalidEvalSet(f"the --no-answer file must hold 1 to {MAX_QUESTIONS:,} questions, one per line")
    return questions


@dataclass(frozen=True)
class HybridLoss:
    """A query where a hybrid row ranks worse than one of its own arms."""

    query_id: str
    query: str
    fusion: str
    hybrid: float
    lexical: float
    vector: float


def hybrid_losses(run: BeirRun) -> list[HybridLoss]:
    """Every (query, fusion) whose hybrid nDCG@10 is below the better arm's, worst loss first."""
    arms = {r.mode: r.per_query_ndcg for r in run.reports if r.mode in ("lexical", "vector")}
    if set(arms) != {"lexical", "vector"}:
        return []
    losses = []
    for report in run.reports:
        if report.mode != "hybrid" or report.fusion is None:
            continue
        for query_id, hybrid in report.per_query_ndcg.items():
            lexical, vector = arms["lexical"].get(query_id, 0.0), arms["vector"].get(query_id, 0.0)
            if hybrid < max(lexical, vector) - 1e-9:
                losses.append(HybridLoss(query_id, run.collection.queries.get(query_id, ""), report.fusion,
                                         hybrid, lexical, vector))
    return sorted(losses, key=lambda loss: (loss.hybrid - max(loss.lexical, loss.vector), loss.query_id))


@dataclass
class BeirRun:
    collection: BeirCollection
    reports: list[ModeReport] = field(default_factory=list)
    ingest_s: float = 0.0
    indexed: int = 0
    failed: int = 0


def ingest_beir(
    node, collection: BeirCollection, collection_id: str, *, show_progress: bool
) -> tuple[dict[str, str], dict[str, str]]:
    """Add each BEIR document as its own document and index everything through the
    node's actor pipeline. Returns document id -> BEIR id, and document id -> final status.

    Each document is identified by its position in the corpus (a zero-padded
    number as its path: never matched by a query word, unlike the BEIR id, which
    the full-text index would weigh like a file path), never de-duplicated by
    content: two ids with the same text stay two documents, as the qrels count
    them. Sealed straight from memory, so no plaintext copy of the corpus is
    written anywhere. A document already at its path (``kbtui eval --home``)
    with the same bytes is reused; with other bytes the set changed and the run stops.
    """
    labels: dict[str, str] = {}
    for number, document in enumerate(collection.documents):
        if not (document.title.strip() or document.text.strip()):
            continue  # nothing to index (Cranfield has one): it could only fail as no_text
        added = node.add_at_path(
            beir_markdown(document).encode("utf-8"), collection_id,
            source_path=f"{number:06d}", display_name=f"{number:06d}.md", fmt="markdown",
        )
        if added is None:
            raise InvalidEvalSet("the --home knowledge base holds another version of this BEIR set; use a new directory")
        labels[added.document_id] = document.doc_id
    # The real ingestion path: the node's actor pipeline, like `kbtui add`.
    return labels, node.index(list(labels), show_progress=show_progress)


def run_beir(
    node,
    collection: BeirCollection,
    *,
    fusions: Sequence[str],
    show_progress: bool = False,
    collection_id: str = "EVAL",
    off_topic: Sequence[str] = (),
) -> BeirRun:
    """Ingest ``collection`` into ``node`` and evaluate each mode (hybrid once per fusion)."""
    started = time.perf_counter()
    labels, statuses = ingest_beir(node, collection, collection_id, show_progress=show_progress)
    run = BeirRun(collection, ingest_s=time.perf_counter() - started)
    run.indexed = sum(status == "Indexed" for status in statuses.values())
    run.failed = sum(status == "Failed" for status in statuses.values())
    service = node.searcher
    for mode in ("lexical", "vector"):
        run.reports.append(
            evaluate_mode(
                service, collection_id, collection.queries, collection.qrels, labels.get, mode=mode, off_topic=off_topic
            )
        )
    for fusion in fusions:
        run.reports.append(
            evaluate_mode(
                service, collection_id, collection.queries, collection.qrels, labels.get, mode="hybrid", fusion=fusion,
                off_topic=off_topic,
            )
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
