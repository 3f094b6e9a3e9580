"""The routes: each calls a use case of the node and answers JSON.

A small Starlette application (routing, path parameters, 404/405) served by
uvicorn (:mod:`kbtui.api.server`). Use cases are blocking SQLite and model
work: they run in Starlette's thread pool, each on its thread's own database
connection, so the event loop only moves bytes. Every failure becomes a
stable JSON error (:mod:`kbtui.api.errors`); nothing a route raises reaches
the server, whose own logging could carry a message.

Routes are listed in README.md ("The node's local API").
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import json
import logging
import math
import os
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from actors.events import Busy, NotAdmitting
from kbtui.api import API_PREFIX, shapes
from kbtui.api.errors import ApiError, api_error_for
from kbtui.api.events import KEEP_ALIVE, frame
from kbtui.api.hub import END, EventHub, Subscription
from kbtui.api.identity import BASE_HEADER, CHALLENGE_HEADER, PROOF_HEADER, BaseIdentity
from kbtui.collections import canonical_collection_id
from kbtui.nesting import nesting_depth
from kbtui.node import Node
from kbtui.reads import Status
from kbtui.retrieval.results import ALL_COLLECTIONS

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 4 << 20
MAX_JSON_DEPTH = 16  # the bodies nest three deep; a deeper one is refused, never recursed into
MAX_HEADER_BYTES = 16 * 1024
BODY_TIMEOUT_S = 10.0  # for the whole request body, read before a use-case slot is taken
MAX_CONCURRENT_REQUESTS = 32  # use cases running at once; more answer 503 at once
KEEP_ALIVE_S = 15.0  # an idle event stream writes a comment this often (finds vanished clients)
STREAM_WRITE_TIMEOUT_S = 10.0  # a client that reads nothing for this long is cut off
MAX_SEARCH_LIMIT = 200
MAX_READ_CHARS = 1_000_000
MAX_NEIGHBOUR_WINDOW = 20
STATUSES = tuple(s.value for s in Status)


class Pipeline(Protocol):
    """What the API needs from the running pipeline (:class:`kbtui.api.server.RuntimePipeline`)."""

    def admit(self, document_id: str) -> object: ...

    def state(self) -> Any: ...

    def sweep(self) -> None: ...


@dataclass
class Services:
    node: Node
    pipeline: Pipeline
    hub: EventHub
    token: str | None = None  # required on TCP connections
    identity: BaseIdentity | None = None  # the knowledge base this node proves it serves


# ---------------------------------------------------------------- request bodies

_STRICT = ConfigDict(extra="forbid", strict=True)


class AddBody(BaseModel):
    model_config = _STRICT
    paths: list[str] = Field(min_length=1, max_length=1_000)
    collection: str | None = None
    name: str | None = None  # one path only
    include_sensitive: bool = False


class LookupBody(BaseModel):
    model_config = _STRICT
    document_ids: list[str] = Field(max_length=100_000)


class ReindexBody(BaseModel):
    model_config = _STRICT
    document_ids: list[str] | None = Field(default=None, max_length=100_000)
    collection: str | None = None


class SearchBody(BaseModel):
    model_config = _STRICT
    query: str = Field(max_length=100_000)
    collection: str | None = None
    limit: int | None = Field(default=None, ge=1, le=MAX_SEARCH_LIMIT)
    document_id: str | None = None
    expand_neighbors: bool = False
    per_document: bool = False
    min_relevance: float | None = Field(default=None, ge=0.0, le=1.0)
    explain: bool = False


class RegisterBody(BaseModel):
    model_config = _STRICT
    path: str
    name: str | None = None


class ImportBody(BaseModel):
    model_config = _STRICT
    collection: str | None = None


class SyncBody(BaseModel):
    model_config = _STRICT
    dry_run: bool = False
    prune: bool = False


# ---------------------------------------------------------------- plumbing

Handler = Callable[[Request, Services], Awaitable[Any]]
JSON = dict[str, Any]


def json_response(payload: object, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode(), status_code=status,
        headers=headers, media_type="application/json",
    )


def error_response(error: ApiError, headers: dict[str, str] | None = None) -> Response:
    headers = dict(headers or {})
    retry = (error.extra or {}).get("retry_after_s")
    if retry is not None:
        headers["Retry-After"] = str(max(1, round(float(retry))))
    return json_response(error.body(), error.status, headers)


class _Admission:
    """At most MAX_CONCURRENT_REQUESTS use cases at once (event streams not counted)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.running = 0
        self.lock = threading.Lock()

    def enter(self) -> bool:
        with self.lock:
            if self.running >= self.limit:
                return False
            self.running += 1
            return True

    def leave(self) -> None:
        with self.lock:
            self.running -= 1


OVERLOADED = ApiError("overloaded", "the node is answering too many requests; retry", {"retry_after_s": 1})


def endpoint(services: Services, gate: _Admission, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A route: the whole body read (bounded in size and time), then the
    concurrency gate, the handler, and its failures as JSON errors. A slow
    body never holds a use-case slot."""

    @functools.wraps(handler)
    async def run(request: Request) -> Response:
        started = time.perf_counter()
        try:
            request.state.body = await read_body(request)
        except ApiError as error:
            response = error_response(error)
        else:
            response = await call(request)
        # The handler's name, never the path: paths carry ids and references.
        log.debug("api: %s %s -> %d in %.1f ms", request.method, handler.__name__, response.status_code,
                  (time.perf_counter() - started) * 1000)
        return response

    async def call(request: Request) -> Response:
        if not gate.enter():
            response = error_response(OVERLOADED)
        else:
            try:
                result = await handler(request, services)
                response = result if isinstance(result, Response) else json_response(result)
            except ApiError as error:
                response = error_response(error)
            except Exception as exc:  # noqa: BLE001 - every failure is an answer, never a traceback
                problem = api_error_for(exc)
                if problem.code == "internal":
                    log.error("api: %s failed: %s", handler.__name__, type(exc).__name__)
                response = error_response(problem)
            finally:
                gate.leave()
        return response

    return run


async def read_body(request: Request) -> bytes:
    """The whole request body, at most MAX_BODY_BYTES, all of it within BODY_TIMEOUT_S."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
        raise ApiError("body_too_large", f"a request body holds at most {MAX_BODY_BYTES} bytes")
    body = bytearray()
    try:
        async with asyncio.timeout(BODY_TIMEOUT_S):
            async for piece in request.stream():
                body += piece
                if len(body) > MAX_BODY_BYTES:
                    raise ApiError("body_too_large", f"a request body holds at most {MAX_BODY_BYTES} bytes")
    except TimeoutError:
        raise ApiError("bad_request", f"the request body did not arrive within {BODY_TIMEOUT_S:g} s") from None
    return bytes(body)


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):  # 1e999
        raise ValueError("not a finite number")
    return number


def _no_constants(name: str) -> object:
    raise ValueError(f"{name} is not a number")


def parse_json(body: bytes) -> object:
    """A JSON body: NaN, Infinity and numbers too large for a float are refused,
    and so is nesting deeper than MAX_JSON_DEPTH (400, never a 500)."""
    try:
        data = json.loads(body, parse_float=_finite, parse_constant=_no_constants)
    except (ValueError, UnicodeDecodeError):
        raise ApiError("invalid_json", "the body is not JSON (NaN and Infinity are not numbers)") from None
    except RecursionError:
        data = None
    if data is None or nesting_depth(data, limit=MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise ApiError("invalid_json", f"the body nests objects or arrays more than {MAX_JSON_DEPTH} deep")
    return data


def read_json(request: Request, model: type[BaseModel]) -> Any:
    """The request body (already read by the endpoint) as ``model``: JSON, checked."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise ApiError("unsupported_media_type", "send the body as application/json")
    data = parse_json(request.state.body)
    if not isinstance(data, dict):
        raise ApiError("invalid_json", "the body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as invalid:
        raise ApiError("invalid_arguments", _first_problem(invalid)) from None


def _first_problem(invalid: ValidationError) -> str:
    # Locations and pydantic's fixed phrases only: never the input value.
    problem = invalid.errors(include_input=False, include_url=False, include_context=False)[0]
    where = ".".join(str(part) for part in problem["loc"]) or "body"
    return f"{where}: {problem['msg']}"


def query_int(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise ApiError("invalid_arguments", f"{name}: an integer from {low} to {high}")
    return int(raw)


def query_collection(request: Request) -> str | None:
    raw = request.query_params.get("collection")
    return None if raw is None else canonical_collection_id(raw)


def required_collection(request: Request) -> str:
    collection_id = query_collection(request)
    if collection_id is None:
        raise ApiError("invalid_arguments", "collection: required")
    return collection_id


def _admit_all(pipeline: Pipeline, document_ids: list[str]) -> ApiError | None:
    """Offer stored Pending documents to admission: the reference's busy contract
    (503 + Retry-After) when the queue is full; the rows stay Pending either way."""
    for document_id in document_ids:
        result = pipeline.admit(document_id)
        if isinstance(result, Busy):
            return ApiError(
                "busy", "the admission queue is full: the documents are stored as Pending and the node indexes "
                "them as the queue frees up (nothing to send again)",
                {"retry_after_s": result.retry_after_s},
            )
        if isinstance(result, NotAdmitting):
            return ApiError("stopping", "the node is stopping: the documents are stored and wait as Pending",
                            {"retry_after_s": 5})
        # Accepted, or AlreadyQueued (the same document, queued once): nothing to say.
    return None


# ---------------------------------------------------------------- routes: status and collections


async def get_status(request: Request, services: Services) -> object:
    def status() -> object:
        state = services.pipeline.state()
        published = {
            "pid": os.getpid(), "written_at": time.time(), "queue_depth": state.queue_depth,
            "queue_capacity": state.queue_capacity, "in_flight": state.in_flight, "accepted": state.accepted,
            "rejected": state.rejected, "paused_for_s": round(state.paused_for_s, 1),
        }
        return {"node_running": True, "queue": published, "documents": services.node.status().counts}

    return await run_in_threadpool(status)


async def list_nodes(request: Request, services: Services) -> object:
    """Every node of the knowledge base (on SQLite: this one)."""
    return {"nodes": [shapes.node_json(r) for r in await run_in_threadpool(services.node.nodes)]}


async def list_collections(request: Request, services: Services) -> object:
    return {"collections": await run_in_threadpool(services.node.collections)}


# ---------------------------------------------------------------- routes: documents


async def list_documents(request: Request, services: Services) -> object:
    collection_id = query_collection(request)
    status = request.query_params.get("status")
    if status is not None and status not in STATUSES:
        raise ApiError("invalid_arguments", f"status: one of {', '.join(STATUSES)}")
    since_raw = request.query_params.get("updated_since")
    try:
        since = None if since_raw is None else _finite(since_raw)
    except ValueError:
        raise ApiError("invalid_arguments", "updated_since: a Unix time") from None
    rows = await run_in_threadpool(
        functools.partial(services.node.documents, collection_id, status, updated_since=since)
    )
    return {"documents": [shapes.document_json(r) for r in rows]}


async def add_documents(request: Request, services: Services) -> object:
    """Each path becomes a source of the collection (or is found registered
    there) and is scanned, as ``kbtui add`` does; the documents it left
    Pending are offered to admission."""
    body: AddBody = read_json(request, AddBody)
    collection_id = canonical_collection_id(body.collection)
    for position, path in enumerate(body.paths, start=1):
        if not os.path.isabs(path):
            raise ApiError("invalid_arguments", f"argument {position}: give an absolute path")
        if not os.path.lexists(path):
            raise ApiError("not_found", f"argument {position}: no such file or directory")
    if body.name is not None and len(body.paths) > 1:
        raise ApiError("invalid_arguments", "name: names one source, give one path with it")

    def add() -> tuple[JSON, ApiError | None]:
        synced = [
            services.node.add_source(Path(path), collection_id, name=body.name, include_sensitive=body.include_sensitive)
            for path in body.paths
        ]
        touched = {
            f.document_id: (index, f.outcome) for index, s in enumerate(synced) for f in s.report.files
            if f.document_id and f.outcome in ("added", "updated", "renamed", "unchanged")
        }
        rows = {r.document_id: r for r in services.node.documents(document_ids=list(touched))}
        documents = [
            {"index": index, **shapes.document_json(rows[document_id]), "created": outcome == "added",
             "outcome": outcome}
            for document_id, (index, outcome) in touched.items() if document_id in rows
        ]
        payload = {"documents": documents, "sources": [shapes.source_sync_json(s) for s in synced]}
        pending = [d for s in synced for d in s.report.pending_document_ids]
        return payload, _admit_all(services.pipeline, list(dict.fromkeys(pending)))

    payload, busy = await run_in_threadpool(add)
    if busy is not None:
        busy.extra = {**(busy.extra or {}), **payload}  # stored all the same: the report comes with the 503
        return error_response(busy)
    created = any(entry["created"] for entry in payload["documents"])
    return json_response(payload, 201 if created else 200)


async def lookup_documents(request: Request, services: Services) -> object:
    body: LookupBody = read_json(request, LookupBody)
    rows = await run_in_threadpool(functools.partial(services.node.documents, document_ids=body.document_ids))
    return {"documents": [shapes.document_json(r) for r in rows]}


async def get_document(request: Request, services: Services) -> object:
    detail = await run_in_threadpool(services.node.detail, request.path_params["document_id"])
    if detail is None:
        raise ApiError("not_found", "no such document")
    return shapes.detail_json(detail)


async def delete_document(request: Request, services: Services) -> object:
    document_id = request.path_params["document_id"]
    if not await run_in_threadpool(services.node.purge, document_id):
        raise ApiError("not_found", "no such document")
    return {"document_id": document_id, "removed": True}


async def get_document_text(request: Request, services: Services) -> object:
    collection_id = required_collection(request)
    max_chars = query_int(request, "max_chars", 20_000, 1, MAX_READ_CHARS)
    text = await run_in_threadpool(
        services.node.document_text, request.path_params["document_id"], collection_id, max_chars
    )
    if text is None:
        raise ApiError("not_found", "no such document in that collection")
    return shapes.text_json(text)


async def get_neighbours(request: Request, services: Services) -> object:
    collection_id = required_collection(request)
    window = query_int(request, "window", 1, 0, MAX_NEIGHBOUR_WINDOW)
    records = await run_in_threadpool(
        services.node.neighbours, request.path_params["chunk_id"], collection_id, window
    )
    return {"chunks": [shapes.chunk_json(r) for r in records]}


async def resolve_document(request: Request, services: Services) -> object:
    """The one document a name, an id or an id prefix (4+ characters) names, and how it matched."""
    reference = request.query_params.get("document")
    if not reference:
        raise ApiError("invalid_arguments", "document: required")
    collection_id = query_collection(request)
    return shapes.match_json(await run_in_threadpool(services.node.find_document, reference, collection_id))


async def reindex(request: Request, services: Services) -> object:
    body: ReindexBody = read_json(request, ReindexBody)
    collection_id = None if body.collection is None else canonical_collection_id(body.collection)

    def queue() -> tuple[JSON, ApiError | None]:
        report = services.node.reindex(body.document_ids, collection_id=collection_id)
        return shapes.reindex_json(report), _admit_all(services.pipeline, list(report.queued))

    payload, busy = await run_in_threadpool(queue)
    if busy is not None:
        busy.extra = {**(busy.extra or {}), **payload}
        return error_response(busy)
    return payload


# ---------------------------------------------------------------- routes: search


async def search(request: Request, services: Services) -> object:
    body: SearchBody = read_json(request, SearchBody)
    collection_id = ALL_COLLECTIONS if body.collection == ALL_COLLECTIONS else canonical_collection_id(body.collection)
    response = await run_in_threadpool(
        functools.partial(
            services.node.search, body.query, collection_id, limit=body.limit, document_id=body.document_id,
            expand_neighbors=body.expand_neighbors, per_document=body.per_document, min_relevance=body.min_relevance,
        )
    )
    return shapes.search_json(response, explain=body.explain)


# ---------------------------------------------------------------- routes: sources


def query_purge(request: Request, default: str) -> bool:
    purge = request.query_params.get("purge", default)
    if purge not in ("true", "false"):
        raise ApiError("invalid_arguments", "purge: true or false")
    return purge == "true"


async def list_sources(request: Request, services: Services) -> object:
    rows = await run_in_threadpool(services.node.sources, query_collection(request))
    return {"sources": [shapes.source_json(r) for r in rows]}


async def get_source(request: Request, services: Services) -> object:
    row = await run_in_threadpool(services.node.resolve_source, request.path_params["reference"],
                                  query_collection(request))
    return shapes.source_json(row)


async def sync_source(request: Request, services: Services) -> object:
    body: SyncBody = read_json(request, SyncBody)

    def run() -> object:
        row = services.node.resolve_source(request.path_params["reference"])
        report = services.node.sync_source(row.source.id, dry_run=body.dry_run, prune=body.prune)
        services.pipeline.sweep()  # the drain sweep admits what the scan left Pending
        return shapes.sync_json(report)

    return await run_in_threadpool(run)


async def delete_source(request: Request, services: Services) -> object:
    purge = query_purge(request, "true")

    def run() -> object:
        row = services.node.resolve_source(request.path_params["reference"])
        return {"source_id": row.source.id, "purged": services.node.remove_source(row.source.id, purge=purge)}

    return await run_in_threadpool(run)


# ---------------------------------------------------------------- routes: repositories (Git sources, the older words)


async def list_repositories(request: Request, services: Services) -> object:
    rows = await run_in_threadpool(services.node.repositories)
    return {"repositories": [shapes.repository_json(r) for r in rows]}


async def register_repository(request: Request, services: Services) -> object:
    body: RegisterBody = read_json(request, RegisterBody)
    if not os.path.isabs(body.path):
        raise ApiError("invalid_arguments", "path: give an absolute path")

    def run() -> object:
        registered = services.node.register_repository(Path(body.path), body.name)
        return shapes.repository_json(services.node.resolve_repository(registered.id))

    return json_response(await run_in_threadpool(run), 201)


async def get_repository(request: Request, services: Services) -> object:
    row = await run_in_threadpool(services.node.resolve_repository, request.path_params["reference"])
    return shapes.repository_json(row)


async def delete_repository(request: Request, services: Services) -> object:
    purge = query_purge(request, "false")

    def run() -> object:
        row = services.node.resolve_repository(request.path_params["reference"])
        return {"repository_id": row.source.id,
                "purged": services.node.unregister_repository(row.source.id, purge=purge)}

    return await run_in_threadpool(run)


async def import_repository(request: Request, services: Services) -> object:
    body: ImportBody = read_json(request, ImportBody)
    collection_id = canonical_collection_id(body.collection)

    def run() -> object:
        row = services.node.resolve_repository(request.path_params["reference"])
        report = services.node.import_repository(row.source.id, collection_id)
        services.pipeline.sweep()  # the drain sweep admits what the import left Pending
        return shapes.import_json(report)

    return await run_in_threadpool(run)


# ---------------------------------------------------------------- the event stream


async def events(request: Request, services: Services) -> object:
    subscription = services.hub.subscribe(asyncio.get_running_loop())
    if subscription is None:
        raise ApiError("overloaded", "too many event streams are open", {"retry_after_s": 5})
    try:
        state = await run_in_threadpool(services.pipeline.state)
    except BaseException:
        services.hub.unsubscribe(subscription)
        raise
    first = frame("admission_changed", {
        "queue_depth": state.queue_depth, "queue_capacity": state.queue_capacity, "in_flight": state.in_flight,
        "accepted": state.accepted, "rejected": state.rejected, "paused_for_s": state.paused_for_s,
    })
    return EventStreamResponse(services.hub, subscription, first)


class EventStreamResponse(Response):
    """``text/event-stream`` fed from one subscription until the client leaves,
    falls behind (overflow), stops reading (write timeout) or the node stops."""

    def __init__(self, hub: EventHub, subscription: Subscription, first: bytes) -> None:
        # Not Response.__init__: it would declare an empty body (content-length: 0).
        self.status_code = 200
        self.background = None
        self.raw_headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-store")]
        self.hub, self.subscription, self.first = hub, subscription, first

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = asyncio.create_task(_client_gone(receive))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            data: bytes | None = self.first
            while data is not END:
                await asyncio.wait_for(send({"type": "http.response.body", "body": data, "more_body": True}),
                                       STREAM_WRITE_TIMEOUT_S)
                data = await self._next(gone)
                if data is None:
                    return  # the client left
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except TimeoutError:
            # A client that reads nothing: returning unfinished makes the server drop the connection.
            log.info("api: an event-stream client stopped reading and was cut off")
        finally:
            gone.cancel()
            self.hub.unsubscribe(self.subscription)

    async def _next(self, gone: asyncio.Task) -> bytes | None:
        getting = asyncio.ensure_future(self.subscription.queue.get())
        done, _ = await asyncio.wait({getting, gone}, timeout=KEEP_ALIVE_S, return_when=asyncio.FIRST_COMPLETED)
        if getting in done:
            return getting.result()
        getting.cancel()
        return None if gone in done else KEEP_ALIVE


async def _client_gone(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


# ---------------------------------------------------------------- the application

ROUTES: list[tuple[str, str, Handler]] = [
    ("GET", "/status", get_status),
    ("GET", "/events", events),
    ("GET", "/nodes", list_nodes),
    ("GET", "/collections", list_collections),
    ("GET", "/documents", list_documents),
    ("POST", "/documents", add_documents),
    ("POST", "/documents/lookup", lookup_documents),
    ("GET", "/documents/{document_id}", get_document),
    ("DELETE", "/documents/{document_id}", delete_document),
    ("GET", "/documents/{document_id}/text", get_document_text),
    ("GET", "/chunks/{chunk_id}/neighbours", get_neighbours),
    ("GET", "/resolve", resolve_document),
    ("POST", "/reindex", reindex),
    ("POST", "/search", search),
    ("GET", "/sources", list_sources),
    ("GET", "/sources/{reference}", get_source),
    ("POST", "/sources/{reference}/sync", sync_source),
    ("DELETE", "/sources/{reference}", delete_source),
    ("GET", "/repositories", list_repositories),
    ("POST", "/repositories", register_repository),
    ("GET", "/repositories/{reference}", get_repository),
    ("DELETE", "/repositories/{reference}", delete_repository),
    ("POST", "/repositories/{reference}/import", import_repository),
]


def build_app(services: Services) -> ASGIApp:
    """The ASGI application serving ``services``."""
    gate = _Admission(MAX_CONCURRENT_REQUESTS)
    routes = [
        Route(API_PREFIX + path, endpoint(services, gate, handler), methods=[method])
        for method, path, handler in ROUTES
    ]

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 405:
            return error_response(ApiError("method_not_allowed", "this route does not take that method"))
        return error_response(ApiError("no_route", "no such route; see README.md for the API's routes"))

    async def internal_error(request: Request, exc: Exception) -> Response:
        log.error("api: a request failed outside its route: %s", type(exc).__name__)
        return error_response(ApiError("internal", "the node failed; see its log"))

    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error, Exception: internal_error})
    return TokenGuard(app, services.token, services.identity)


class TokenGuard:
    """Before any route: headers within bounds, and on a TCP listener (asked for
    with ``--listen``) the token from the node's token file on every request.
    Unix socket connections are checked by peer credentials when they connect
    (:mod:`kbtui.api.server`).

    A request that names the knowledge base it wants (``X-Kbtui-Base``, as
    kbtui's own client always does) is refused before anything is done unless
    it is this node's (``421 wrong_node``); an answer to a request with a
    challenge carries this node's proof (:mod:`kbtui.api.identity`).
    """

    def __init__(self, app: Starlette, token: str | None, identity: BaseIdentity | None = None) -> None:
        self.app, self.token, self.identity = app, token, identity

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # h11 bounds headers that arrive in pieces; this bounds those that came at once.
        if scope["type"] == "http" and sum(len(k) + len(v) + 4 for k, v in scope["headers"]) > MAX_HEADER_BYTES:
            await error_response(ApiError("headers_too_large", "request headers hold at most 16 KiB"))(
                scope, receive, send)
            return
        server = scope.get("server")
        on_tcp = server is not None and server[1] is not None  # a Unix socket's has no port
        if scope["type"] == "http" and self.identity is not None:
            send = self._proving(scope, send)
        if scope["type"] == "http" and on_tcp and not self._authorized(scope):
            response = error_response(ApiError("unauthorized", "send the token from the node's api.token file"))
            await response(scope, receive, send)
            return
        if scope["type"] == "http" and not self._our_base(scope):
            response = error_response(ApiError(
                "wrong_node", "this node serves another knowledge base; nothing was done"))
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _our_base(self, scope: Scope) -> bool:
        claimed = dict(scope.get("headers") or []).get(BASE_HEADER.encode())
        if claimed is None or self.identity is None:
            return True  # e.g. curl on the socket its operator chose
        return hmac.compare_digest(claimed, self.identity.base_id.encode())

    def _proving(self, scope: Scope, send: Send) -> Send:
        challenge = dict(scope.get("headers") or []).get(CHALLENGE_HEADER.encode())
        if challenge is None or self.identity is None:
            return send
        proof = self.identity.proof(challenge.decode("latin-1")).encode()

        async def send_with_proof(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (PROOF_HEADER.encode(), proof)]}
            await send(message)

        return send_with_proof

    def _authorized(self, scope: Scope) -> bool:
        if not self.token:
            return False
        headers = dict(scope.get("headers") or [])
        given = headers.get(b"authorization", b"")
        return hmac.compare_digest(given, b"Bearer " + self.token.encode())
