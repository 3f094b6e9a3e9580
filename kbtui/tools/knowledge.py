"""The three knowledge tools: argument checks, scoped reads, fenced JSON results.

One :class:`KnowledgeTools` serves the Ask loop and the MCP server alike, so
both hand a model exactly the same fenced shape. Results never carry the
stored file name: title, section and source come from the heading trail and
the (relative) source path only.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kbtui.collections import canonical_collection_id
from kbtui.errors import InvalidCollection
from kbtui.reads import DocumentText, title_for
from kbtui.retrieval.search import Hit, SearchResponse
from kbtui.tools import schemas
from kbtui.tools.fencing import CONTENT_TRUST, Fence
from store.records import ChunkRecord

log = logging.getLogger(__name__)

# Fixed, content-free error codes (and what the model is told about each).
ERROR_MESSAGES = {
    "unknown_tool": "No such tool.",
    "invalid_arguments": "The arguments do not match the tool's input schema.",
    "invalid_collection": "The collection id is not valid.",
    "collection_out_of_scope": "This conversation may only use its own collection.",
    "not_found": "Nothing with that id exists in that collection.",
}

_SAFE_LANGUAGE = re.compile(r"[A-Za-z0-9+#._-]{1,32}\Z")


class Searcher(Protocol):
    """What Ask needs from the knowledge base (``kbtui.node.Node`` provides it)."""

    def search(self, query: str, collection_id: str, *, limit: int | None = ...) -> SearchResponse: ...


class KnowledgeBase(Searcher, Protocol):
    """What the tools need from the knowledge base (``kbtui.node.Node`` provides it)."""

    def document_text(self, document_id: str, collection_id: str, max_chars: int) -> DocumentText | None: ...

    def neighbours(self, chunk_id: str, collection_id: str, window: int) -> list[ChunkRecord]: ...


@dataclass(frozen=True)
class Source:
    """One thing a result handed to the model, with readable provenance for people.

    These raw values are for the operator's screen; models only ever see them
    fenced inside a result payload.
    """

    collection_id: str
    document_id: str
    chunk_id: str | None
    title: str
    section: str
    source: str
    page: int | None
    ref: str | None = None


# Given (document_id, chunk_id), the short label a model should cite, e.g. "S1".
Citer = Callable[[str, str | None], str]


@dataclass(frozen=True)
class ToolResult:
    name: str
    payload: dict[str, Any]
    sources: tuple[Source, ...] = ()
    error: str | None = None

    def to_json(self) -> str:
        """The payload as the text a model receives."""
        return json.dumps(self.payload, ensure_ascii=False)


class ToolCallRefused(Exception):
    """A call the tools will not answer; ``code`` is one of ``ERROR_MESSAGES``."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


@dataclass
class KnowledgeTools:
    """search_knowledge_base, read_document and read_surrounding_chunks over one node.

    ``scope``, when set, confines every call to that collection (Ask pins the
    collection the operator chose).
    """

    knowledge: KnowledgeBase
    scope: str | None = None
    _handlers: dict[str, Callable[..., ToolResult]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._handlers = {
            schemas.SEARCH_KNOWLEDGE_BASE: self.search_knowledge_base,
            schemas.READ_DOCUMENT: self.read_document,
            schemas.READ_SURROUNDING_CHUNKS: self.read_surrounding_chunks,
        }

    def call(self, name: str, arguments: Mapping[str, Any] | None, *, cite: Citer | None = None) -> ToolResult:
        """Run tool ``name`` with model-supplied ``arguments``; refusals become error results."""
        handler = self._handlers.get(name)
        try:
            if handler is None:
                raise ToolCallRefused("unknown_tool")
            checked = _checked_arguments(schemas.TOOL_SCHEMAS[name]["inputSchema"], arguments)
            result = handler(**checked, cite=cite)
        except ToolCallRefused as refusal:
            log.info("tool call refused: %s", refusal.code)
            return _error_result(name, refusal.code)
        log.info("tool call answered: %s, %d source(s)", name, len(result.sources))
        return result

    # ------------------------------------------------------------ the tools

    def search_knowledge_base(
        self,
        query: str,
        collection: str | None = None,
        limit: int = schemas.DEFAULT_SEARCH_LIMIT,
        expand_neighbors: bool = False,
        *,
        cite: Citer | None = None,
    ) -> ToolResult:
        """Fused, hydrated hits for ``query`` in one collection, fenced."""
        collection_id = self._collection(collection)
        limit = _clamp(limit, 1, schemas.MAX_SEARCH_LIMIT)
        response = self.knowledge.search(query, collection_id, limit=limit)
        fence = Fence.fresh()
        hits, sources = [], []
        for hit in response.hits:
            source = _source_of_hit(hit, cite)
            entry: dict[str, Any] = {
                **_ref(source),
                "collectionId": hit.collection_id,
                "documentId": hit.document_id,
                "chunkId": hit.chunk_id,
                **_fenced_provenance(fence, source),
                "page": hit.page,
                "startOffset": hit.start_offset,
                "endOffset": hit.end_offset,
                "kind": hit.kind,
                "language": _safe_language(hit.language),
                "symbol": fence.wrap("symbol", hit.symbol) if hit.symbol else None,
                "score": hit.score,
                "scoreKind": hit.score_kind,
                "text": fence.wrap("text", hit.text),
            }
            if expand_neighbors:
                entry["neighbors"] = [
                    _neighbour_entry(fence, record)
                    for record in self.knowledge.neighbours(hit.chunk_id, hit.collection_id, 1)
                    if record.chunk_id != hit.chunk_id
                ]
            hits.append(entry)
            sources.append(source)
        payload = {
            **_envelope(fence),
            "collectionId": collection_id,
            "degraded": list(response.degraded),
            "hits": hits,
        }
        return ToolResult(schemas.SEARCH_KNOWLEDGE_BASE, payload, tuple(sources))

    def read_document(
        self,
        document_id: str,
        collection: str,
        max_chars: int = schemas.DEFAULT_READ_CHARS,
        *,
        cite: Citer | None = None,
    ) -> ToolResult:
        """Up to ``max_chars`` of one document, only when its id and collection both match."""
        collection_id = self._collection(collection)
        max_chars = _clamp(max_chars, 1, schemas.MAX_READ_CHARS)
        document = self.knowledge.document_text(document_id, collection_id, max_chars)
        if document is None:
            raise ToolCallRefused("not_found")
        source = Source(
            collection_id=document.collection_id,
            document_id=document.document_id,
            chunk_id=None,
            title=title_for(document.source_path, document.first_heading_path, document.document_id),
            section="",
            source=document.source_path,
            page=None,
        )
        source = _with_ref(source, cite)
        fence = Fence.fresh()
        payload = {
            **_envelope(fence),
            **_ref(source),
            "collectionId": document.collection_id,
            "documentId": document.document_id,
            "title": fence.wrap("title", source.title),
            "source": fence.wrap("source", source.source),
            "text": fence.wrap("text", document.text),
            "truncated": document.truncated,
        }
        return ToolResult(schemas.READ_DOCUMENT, payload, (source,))

    def read_surrounding_chunks(
        self,
        chunk_id: str,
        collection: str,
        window: int = schemas.DEFAULT_NEIGHBOR_WINDOW,
        *,
        cite: Citer | None = None,
    ) -> ToolResult:
        """The hit ``chunk_id`` and its neighbours, only inside the hit's collection."""
        collection_id = self._collection(collection)
        window = _clamp(window, 1, schemas.MAX_NEIGHBOR_WINDOW)
        records = self.knowledge.neighbours(chunk_id, collection_id, window)
        if not records:
            raise ToolCallRefused("not_found")
        fence = Fence.fresh()
        target = next(r for r in records if r.chunk_id == chunk_id)
        source = _with_ref(_source_of_record(target), cite)
        payload = {
            **_envelope(fence),
            **_ref(source),
            "collectionId": target.collection_id,
            "documentId": target.document_id,
            "chunkId": target.chunk_id,
            "title": fence.wrap("title", source.title),
            "source": fence.wrap("source", source.source),
            "chunks": [
                {**_neighbour_entry(fence, record), "isHit": record.chunk_id == chunk_id}
                for record in records
            ],
        }
        return ToolResult(schemas.READ_SURROUNDING_CHUNKS, payload, (source,))

    def _collection(self, raw: str | None) -> str:
        try:
            collection_id = canonical_collection_id(raw if raw is not None else self.scope)
        except InvalidCollection:
            raise ToolCallRefused("invalid_collection") from None
        if self.scope is not None and collection_id != self.scope:
            raise ToolCallRefused("collection_out_of_scope")
        return collection_id


# ---------------------------------------------------------------- payload pieces


def _envelope(fence: Fence) -> dict[str, Any]:
    return {"contentTrust": CONTENT_TRUST, "fence": {"nonce": fence.nonce, "notice": fence.notice()}}


def _error_result(name: str, code: str) -> ToolResult:
    payload = {"contentTrust": CONTENT_TRUST, "error": code, "message": ERROR_MESSAGES[code]}
    return ToolResult(name, payload, (), code)


def _ref(source: Source) -> dict[str, str]:
    return {"ref": source.ref} if source.ref else {}


def _with_ref(source: Source, cite: Citer | None) -> Source:
    if cite is None:
        return source
    return dataclasses.replace(source, ref=cite(source.document_id, source.chunk_id))


def _source_of_hit(hit: Hit, cite: Citer | None) -> Source:
    source = Source(
        collection_id=hit.collection_id,
        document_id=hit.document_id,
        chunk_id=hit.chunk_id,
        title=title_for(hit.source_path, hit.heading_path, hit.document_id),
        section=hit.heading_path,
        source=hit.source_path,
        page=hit.page,
    )
    return _with_ref(source, cite)


def _source_of_record(record: ChunkRecord) -> Source:
    return Source(
        collection_id=record.collection_id,
        document_id=record.document_id,
        chunk_id=record.chunk_id,
        title=title_for(record.source_path, record.heading_path, record.document_id),
        section=record.heading_path,
        source=record.source_path,
        page=record.page,
    )


def _fenced_provenance(fence: Fence, source: Source) -> dict[str, str]:
    return {
        "title": fence.wrap("title", source.title),
        "section": fence.wrap("section", source.section),
        "source": fence.wrap("source", source.source),
    }


def _neighbour_entry(fence: Fence, record: ChunkRecord) -> dict[str, Any]:
    return {
        "chunkId": record.chunk_id,
        "ordinal": record.ordinal,
        "section": fence.wrap("section", record.heading_path),
        "page": record.page,
        "kind": record.kind,
        "language": _safe_language(record.language),
        "text": fence.wrap("text", record.text),
    }


def _safe_language(language: str | None) -> str | None:
    # A code fence's info string is document text; only a plain language name passes unfenced.
    return language if language and _SAFE_LANGUAGE.match(language) else None


# ---------------------------------------------------------------- arguments


def _checked_arguments(schema: Mapping[str, Any], arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """Model-supplied arguments checked against ``schema``; lenient on number encoding only."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise ToolCallRefused("invalid_arguments")
    properties = schema["properties"]
    if set(arguments) - set(properties) or set(schema.get("required", ())) - set(arguments):
        raise ToolCallRefused("invalid_arguments")
    checked: dict[str, Any] = {}
    for name, value in arguments.items():
        spec = properties[name]
        if value is None and name not in schema.get("required", ()):
            continue
        checked[name] = _checked_value(spec, value)
    return checked


def _checked_value(spec: Mapping[str, Any], value: Any) -> Any:
    kind = spec["type"]
    if kind == "string":
        if not isinstance(value, str) or len(value) > spec.get("maxLength", 1 << 20):
            raise ToolCallRefused("invalid_arguments")
        if len(value.strip()) < spec.get("minLength", 0):
            raise ToolCallRefused("invalid_arguments")
        return value
    if kind == "integer":
        # Small models often send numbers as strings ("5"); accept whole numbers only.
        if isinstance(value, bool):
            raise ToolCallRefused("invalid_arguments")
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int):
            raise ToolCallRefused("invalid_arguments")
        return value
    if kind == "boolean":
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if not isinstance(value, bool):
            raise ToolCallRefused("invalid_arguments")
        return value
    raise ToolCallRefused("invalid_arguments")


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))
