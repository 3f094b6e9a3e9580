"""The JSON shapes of the read models, written by the node and read back by a client.

One place for both directions, so a client rebuilds exactly the frozen
values the node's use cases returned (``from_*`` undoes ``*_json``). Where
a shape overlaps the CLI's documented ``--json`` output (README.md: a
document, a search response, a scan report, a source) it is the same
field for field; the API adds what a client needs to rebuild the whole value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kbtui.retrieval.results import Hit, LexicalPlan, MatchSignal, Neighbour, SearchExplain, SearchResponse

if TYPE_CHECKING:
    from kbtui.node import DocumentMatch, NodeStatus, ReindexReport, SourceRow, SourceSync
    from kbtui.reads import ChunkEntry, DocumentDetail, DocumentRow, DocumentText
    from kbtui.sources.sync import SyncReport
    from store.records import ChunkRecord, NodeRecord

JSON = dict[str, Any]

# ---------------------------------------------------------------- documents


def document_json(row: DocumentRow) -> JSON:
    """A document (README.md, "JSON output")."""
    return {
        "document_id": row.document_id,
        "collection": row.collection_id,
        "status": row.status,
        "display_name": row.name,
        "failure_reason": row.reason,
        "format": row.format,
        "source_path": row.source_path,
        "size_bytes": row.size_bytes,
        "chunk_count": row.chunk_count,
        "progress": row.progress,
        "vector_identity": row.vector_identity,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "indexed_at": row.indexed_at,
    }


def document_row(data: JSON) -> DocumentRow:
    from kbtui.reads import DocumentRow

    return DocumentRow(
        document_id=data["document_id"], collection_id=data["collection"], name=data["display_name"],
        status=data["status"], reason=data["failure_reason"], progress=data["progress"], format=data["format"],
        source_path=data["source_path"], size_bytes=data["size_bytes"], chunk_count=data["chunk_count"],
        vector_identity=data["vector_identity"], created_at=data["created_at"], updated_at=data["updated_at"],
        indexed_at=data["indexed_at"],
    )


def match_json(match: DocumentMatch) -> JSON:
    return {"document_id": match.document_id, "matched_by": match.matched_by}


def document_match(data: JSON) -> DocumentMatch:
    from kbtui.node import DocumentMatch

    return DocumentMatch(data["document_id"], data["matched_by"])


def detail_json(detail: DocumentDetail) -> JSON:
    """A document with its versions, history, sections and chunk previews (``kbtui show --json`` and more)."""
    return {
        **document_json(detail.row),
        "vector_dim": detail.vector_dim,
        "parser_version": detail.parser_version,
        "chunker_version": detail.chunker_version,
        "history": [{"status": h.status, "reason": h.reason, "at": h.at} for h in detail.history],
        "sections": [
            {"ordinal": s.ordinal, "heading_path": s.heading_path, "level": s.level, "page": s.page,
             "start_offset": s.start_offset, "end_offset": s.end_offset}
            for s in detail.sections
        ],
        "chunks": [_chunk_entry_json(c) for c in detail.chunks],
        "ocr_pages": [
            {"page": p.page, "confidence": p.confidence, "words": p.words, "reason": p.reason} for p in detail.ocr_pages
        ],
        "source_problem": detail.source_problem,
    }


def _chunk_entry_json(c: ChunkEntry) -> JSON:
    return {
        "ordinal": c.ordinal, "chunk_id": c.chunk_id, "heading_path": c.heading_path, "kind": c.kind,
        "page": c.page, "start_offset": c.start_offset, "end_offset": c.end_offset,
        "token_estimate": c.token_estimate, "preview": c.preview,
    }


def document_detail(data: JSON) -> DocumentDetail:
    from kbtui.reads import ChunkEntry, DocumentDetail, HistoryEntry, OcrPageEntry, SectionEntry

    return DocumentDetail(
        row=document_row(data),
        vector_dim=data["vector_dim"],
        parser_version=data["parser_version"],
        chunker_version=data["chunker_version"],
        history=tuple(HistoryEntry(h["status"], h["reason"], h["at"]) for h in data["history"]),
        sections=tuple(
            SectionEntry(s["ordinal"], s["heading_path"], s["level"], s["page"], s["start_offset"], s["end_offset"])
            for s in data["sections"]
        ),
        chunks=tuple(
            ChunkEntry(c["ordinal"], c["chunk_id"], c["heading_path"], c["kind"], c["page"], c["start_offset"],
                       c["end_offset"], c["token_estimate"], c["preview"])
            for c in data["chunks"]
        ),
        ocr_pages=tuple(
            OcrPageEntry(p["page"], p["confidence"], p["words"], p["reason"]) for p in data.get("ocr_pages", ())
        ),
        source_problem=data.get("source_problem"),
    )


def text_json(text: DocumentText) -> JSON:
    return {
        "collection": text.collection_id, "document_id": text.document_id, "source_path": text.source_path,
        "first_heading_path": text.first_heading_path, "text": text.text, "truncated": text.truncated,
    }


def document_text(data: JSON) -> DocumentText:
    from kbtui.reads import DocumentText

    return DocumentText(
        collection_id=data["collection"], document_id=data["document_id"], source_path=data["source_path"],
        first_heading_path=data["first_heading_path"], text=data["text"], truncated=data["truncated"],
    )


def chunk_json(record: ChunkRecord) -> JSON:
    return {
        "collection": record.collection_id, "document_id": record.document_id, "chunk_id": record.chunk_id,
        "ordinal": record.ordinal, "section_key": record.section_key, "heading_path": record.heading_path,
        "source_path": record.source_path, "page": record.page, "start_offset": record.start_offset,
        "end_offset": record.end_offset, "kind": record.kind, "language": record.language,
        "symbol": record.symbol, "text": record.text,
    }


def chunk_record(data: JSON) -> ChunkRecord:
    from store.records import ChunkRecord

    return ChunkRecord(
        collection_id=data["collection"], document_id=data["document_id"], chunk_id=data["chunk_id"],
        ordinal=data["ordinal"], section_key=data["section_key"], heading_path=data["heading_path"],
        source_path=data["source_path"], page=data["page"], start_offset=data["start_offset"],
        end_offset=data["end_offset"], kind=data["kind"], language=data["language"], symbol=data["symbol"],
        text=data["text"],
    )


def reindex_json(report: ReindexReport) -> JSON:
    return {
        "queued": list(report.queued),
        "damaged": [{"document_id": d, "reason": reason} for d, reason in report.damaged],
        "not_found": list(report.not_found),
    }


def reindex_report(data: JSON) -> ReindexReport:
    from kbtui.node import ReindexReport

    return ReindexReport(
        tuple(data["queued"]), tuple((d["document_id"], d["reason"]) for d in data["damaged"]),
        tuple(data.get("not_found", ())),
    )


def status_json(status: NodeStatus) -> JSON:
    """``kbtui status --json``."""
    return {"node_running": status.running, "queue": status.published, "documents": status.counts}


def node_status(data: JSON) -> NodeStatus:
    from kbtui.node import NodeStatus

    return NodeStatus(running=data["node_running"], published=data["queue"], counts=data["documents"])


# ---------------------------------------------------------------- nodes


def node_json(record: NodeRecord) -> JSON:
    """A node of the knowledge base (``kbtui nodes --json``, ``GET /v1/nodes``)."""
    from kbtui.api.nodes import node_state

    return {
        "id": record.id, "state": node_state(record), "host": record.host, "pid": record.pid, "role": record.role,
        "model_identity": record.model_identity, "started_at": record.started_at,
        "heartbeat_at": record.heartbeat_at, "stopped_at": record.stopped_at, "in_flight": record.in_flight,
        "alive": record.alive, "chunks_per_s": record.chunks_per_s,
    }


def node_record(data: JSON) -> NodeRecord:
    from store.records import NodeRecord

    return NodeRecord(
        id=data["id"], host=data["host"], pid=data["pid"], role=data["role"], model_identity=data["model_identity"],
        started_at=data["started_at"], heartbeat_at=data["heartbeat_at"], stopped_at=data["stopped_at"],
        in_flight=data["in_flight"], alive=data["alive"], chunks_per_s=data["chunks_per_s"],
    )


# ---------------------------------------------------------------- search


def hit_json(hit: Hit) -> JSON:
    """A search hit (README.md: the same fields as ``kbtui search --json``)."""
    return {
        "document_id": hit.document_id,
        "chunk_id": hit.chunk_id,
        "collection": hit.collection_id,
        "heading_path": hit.heading_path,
        "source_path": hit.source_path,
        "page": hit.page,
        "start_offset": hit.start_offset,
        "end_offset": hit.end_offset,
        "kind": hit.kind,
        "language": hit.language,
        "symbol": hit.symbol,
        "score": hit.score,
        "score_kind": hit.score_kind,
        "lexical_rank": hit.lexical_rank,
        "vector_rank": hit.vector_rank,
        "lexical_score": hit.lexical_score,
        "vector_score": hit.vector_score,
        "fusion_rank": hit.fusion_rank,
        "relevance": hit.relevance,
        "similarity": hit.similarity,
        "more_in_document": hit.more_in_document,
        "text": hit.text,
        "neighbors": [
            {"chunk_id": n.chunk_id, "ordinal": n.ordinal, "heading_path": n.heading_path, "page": n.page,
             "start_offset": n.start_offset, "end_offset": n.end_offset, "text": n.text}
            for n in hit.neighbors
        ],
    }


def hit(data: JSON) -> Hit:
    return Hit(
        collection_id=data["collection"], document_id=data["document_id"], chunk_id=data["chunk_id"],
        source_path=data["source_path"], heading_path=data["heading_path"], page=data["page"],
        start_offset=data["start_offset"], end_offset=data["end_offset"], kind=data["kind"],
        language=data["language"], symbol=data["symbol"], score=data["score"], score_kind=data["score_kind"],
        text=data["text"], lexical_rank=data["lexical_rank"], vector_rank=data["vector_rank"],
        lexical_score=data["lexical_score"], vector_score=data["vector_score"], fusion_rank=data["fusion_rank"],
        more_in_document=data["more_in_document"], relevance=data["relevance"], similarity=data["similarity"],
        neighbors=tuple(
            Neighbour(n["chunk_id"], n["ordinal"], n["heading_path"], n["page"], n["start_offset"], n["end_offset"],
                      n["text"])
            for n in data["neighbors"]
        ),
    )


def explain_json(explain: SearchExplain | None) -> JSON | None:
    """How a search ran (``kbtui search --explain --json``)."""
    if explain is None:
        return None
    plan = explain.lexical_plan
    return {
        "mode": explain.mode,
        "fusion": explain.fusion,
        "pool": explain.pool,
        "lexical_candidates": explain.lexical_candidates,
        "vector_candidates": explain.vector_candidates,
        "reranked": explain.reranked,
        "vector_weight": explain.vector_weight,
        "lexical_plan": None if plan is None else {
            "ranked": list(plan.ranked), "repeats": list(plan.repeats), "pruned": list(plan.pruned),
            "recency": list(plan.recency), "missing": list(plan.missing), "completed": list(plan.completed),
            "exact": plan.exact,
        },
        "timings_ms": explain.timings_ms,
    }


def search_explain(data: JSON | None) -> SearchExplain | None:
    if data is None:
        return None
    plan = data["lexical_plan"]
    return SearchExplain(
        mode=data["mode"], fusion=data["fusion"], pool=data["pool"], lexical_candidates=data["lexical_candidates"],
        vector_candidates=data["vector_candidates"],
        lexical_plan=None if plan is None else LexicalPlan(
            tuple(plan["ranked"]), tuple(plan["repeats"]), tuple(plan["pruned"]), tuple(plan["recency"]),
            tuple(plan["missing"]), tuple(plan["completed"]), plan["exact"],
        ),
        reranked=data["reranked"], timings_ms=data["timings_ms"], vector_weight=data["vector_weight"],
    )


def search_json(response: SearchResponse, *, explain: bool) -> JSON:
    """A search response (README.md); ``explain`` adds how it ran."""
    payload: JSON = {
        "hits": [hit_json(h) for h in response.hits],
        "degraded": list(response.degraded),
        "elapsed_ms": response.elapsed_ms,
        "match": match_signal_json(response.match),
        "hidden_below_floor": response.hidden,
    }
    if explain:
        payload["explain"] = explain_json(response.explain)
    return payload


def search_response(data: JSON) -> SearchResponse:
    return SearchResponse(
        hits=[hit(h) for h in data["hits"]], degraded=list(data["degraded"]), elapsed_ms=data["elapsed_ms"],
        explain=search_explain(data.get("explain")), match=match_signal(data["match"]),
        hidden=data.get("hidden_below_floor", 0),
    )


def match_signal_json(match: MatchSignal | None) -> JSON | None:
    """Whether anything matched (README.md, "A search response")."""
    if match is None:
        return None
    return {
        "verdict": match.verdict, "lexical": match.lexical, "semantic": match.semantic,
        "best_similarity": match.best_similarity, "similarity_floor": match.similarity_floor,
        "words_together": match.words_together,
    }


def match_signal(data: JSON | None) -> MatchSignal | None:
    if data is None:
        return None
    return MatchSignal(
        data["lexical"], data["semantic"], data["best_similarity"], data["similarity_floor"], data.get("words_together")
    )


# ---------------------------------------------------------------- sources and repositories


def source_json(row: SourceRow) -> JSON:
    """A source (README.md, ``kbtui sources --json``)."""
    source = row.source
    return {
        "source_id": source.id, "kind": source.kind, "collection": source.collection_id, "name": source.name,
        "root": source.root, "include_sensitive": source.include_sensitive, "watching": source.watching,
        "watch_state": source.watch_state, "watch": row.watch, "created_at": source.created_at,
        "last_scan_at": source.last_scan_at, "last_scan_status": source.last_scan_status,
        "last_commit": source.last_commit, "documents": dict(sorted(row.counts.items())),
        "document_count": row.document_count, "node_running": row.node_running,
        "unreachable": _unreachable_json(row),
        "root_identity": list(source.root_identity) if source.root_identity is not None else None,
        "owner_node": source.owner_node,
    }


def _unreachable_json(row: SourceRow) -> JSON | None:
    """What the last scan could not see, or null: the source's reason (null
    when only some of its files) and its kept documents by reason."""
    source = row.source
    if source.unreachable_reason is None and not row.unreachable:
        return None
    return {"reason": source.unreachable_reason, "since": source.unreachable_since,
            "documents": dict(sorted(row.unreachable.items()))}


def source_row(data: JSON) -> SourceRow:
    from kbtui.node import SourceRow
    from store.records import RegisteredSource

    source = RegisteredSource(
        id=data["source_id"], kind=data["kind"], collection_id=data["collection"], name=data["name"],
        root=data["root"], include_sensitive=data["include_sensitive"], watching=data["watching"],
        watch_state=data["watch_state"], created_at=data["created_at"], last_scan_at=data["last_scan_at"],
        last_scan_status=data["last_scan_status"], last_commit=data["last_commit"],
        root_identity=tuple(data["root_identity"]) if data["root_identity"] is not None else None,
        unreachable_reason=(data["unreachable"] or {}).get("reason"),
        unreachable_since=(data["unreachable"] or {}).get("since"),
        owner_node=data.get("owner_node"),
    )
    return SourceRow(source, dict(data["documents"]), data["node_running"],
                     dict((data["unreachable"] or {}).get("documents", {})))


def repository_json(row: SourceRow) -> JSON:
    """A Git source under the older words (README.md, ``kbtui repo ls --json``)."""
    return {
        **source_json(row), "repository_id": row.source.id, "last_import_at": row.source.last_scan_at,
        "last_import_status": row.source.last_scan_status,
    }


def sync_json(report: SyncReport) -> JSON:
    """A scan report (README.md), ``files`` included, its time unrounded (a
    client prints it as the in-process command would)."""
    return {**report.to_json(), "elapsed_s": report.elapsed_s}


def import_json(report: SyncReport) -> JSON:
    """``kbtui import --json``: a scan report naming its repository."""
    return {"repository_id": report.source_id, **sync_json(report)}


def sync_report(data: JSON) -> SyncReport:
    from kbtui.sources.sync import OUTCOMES, FileOutcome, SyncReport, Tally

    def tally(t: JSON) -> Tally:
        return Tally(t["count"], t["bytes"])

    return SyncReport(
        source_id=data["source_id"], kind=data["kind"], collection_id=data["collection"], status=data["status"],
        dry_run=data["dry_run"], listed=data["listed"], **{name: tally(data[name]) for name in OUTCOMES},
        skipped={reason: tally(t) for reason, t in data["skipped"].items()},
        files=tuple(
            FileOutcome(f["path"], f["outcome"], f["reason"], f["bytes"], f["document_id"], f["previous_path"])
            for f in data["files"]
        ),
        pending_document_ids=tuple(data["pending_document_ids"]), elapsed_s=data["elapsed_s"],
    )


def source_sync_json(synced: SourceSync) -> JSON:
    return {"source": source_json(synced.row), "report": sync_json(synced.report)}


def source_sync(data: JSON) -> SourceSync:
    from kbtui.node import SourceSync

    return SourceSync(source_row(data["source"]), sync_report(data["report"]))
