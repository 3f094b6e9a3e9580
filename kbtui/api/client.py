"""A running node's use cases, over its API: the same methods as
:class:`kbtui.node.Node`, returning the same frozen values.

Each method makes one request (two for a follow: the event stream and a
look-up). :class:`NodeUnavailable` means no node answered, or it went away
before answering: :class:`kbtui.api.proxy.NodeProxy` then does the same
work in-process. Errors the node answers with come back as the operator
errors they were (:func:`kbtui.api.errors.raise_for`), so a command prints
the same line whichever way it ran.

Only what a method needs is imported, inside it: ``kbtui search`` through a
node loads neither the catalog nor the search machinery.
"""

from __future__ import annotations

import os
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbtui.api import TOKEN_NAME, shapes
from kbtui.api.errors import raise_for
from kbtui.api.events import event_from
from kbtui.api.identity import read_identity, read_private_file
from kbtui.api.transport import Endpoint, EventStream, NodeUnavailable, Reply, request, socket_path

if TYPE_CHECKING:
    from actors.events import Event
    from kbtui.config import Config
    from kbtui.follow import FollowResult
    from kbtui.logs import LogLine
    from kbtui.node import DocumentMatch, NodeStatus, ReindexReport, SourceRow, SourceSync
    from kbtui.reads import DocumentDetail, DocumentRow, DocumentText
    from kbtui.retrieval.results import SearchResponse
    from kbtui.sources.sync import SyncReport
    from store.records import ChunkRecord, NodeRecord, RegisteredSource

DEFAULT_TIMEOUT_S = 120.0
ADD_TIMEOUT_S = 3600.0  # the node reads every file of the add before it answers
RESYNC_S = 5.0  # a follow re-reads its documents' statuses this often (events may be missed)


def unix_endpoint(home: Path) -> Endpoint:
    """The node of the data directory ``home``, on its socket: it must prove it
    serves the knowledge base whose key and catalog id ``home`` holds."""
    return Endpoint(read_identity(home), unix_path=socket_path(home))


def tcp_endpoint(home: Path, host: str, port: int) -> Endpoint:
    """The node of ``home`` on the loopback port it listens on (``serve --listen``),
    with the token it wrote to ``api.token``: read only from this user's own
    regular file (never through a link); the node must still prove its base."""
    raw = read_private_file(home / TOKEN_NAME, max_bytes=1024)
    token = raw.decode("ascii", "replace").strip() if raw is not None else None
    return Endpoint(read_identity(home), host=host, port=port, token=token or None)


def _quote(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def _query(**params: object) -> str:
    present = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in params.items() if v is not None}
    return "?" + urllib.parse.urlencode(present) if present else ""


class NodeClient:
    """The use cases of the node listening at ``endpoint``."""

    def __init__(self, endpoint: Endpoint, config: Config) -> None:
        self.endpoint = endpoint
        self.config = config

    # ------------------------------------------------------------ plumbing

    def _call(self, method: str, target: str, payload: object = None, *, timeout: float | None = DEFAULT_TIMEOUT_S,
              accept: tuple[int, ...] = ()) -> Reply:
        reply = request(self.endpoint, method, target, payload, timeout=timeout)
        if 200 <= reply.status < 300 or reply.status in accept:
            return reply
        _raise(reply)
        raise AssertionError("unreachable")

    def _json(self, method: str, target: str, payload: object = None, **kwargs: Any) -> Any:
        return _json_object(self._call(method, target, payload, **kwargs))

    def pipeline_running(self) -> bool:
        return True

    def close(self) -> None:
        """Nothing to release: every request has its own connection."""

    # ------------------------------------------------------------ adding, removing, re-indexing

    def add_source(
        self, path: Path, collection_id: str, *, name: str | None = None, include_sensitive: bool = False,
        on_progress: Callable[[int, int], object] | None = None,
    ) -> SourceSync:
        # The node scans in one request (no progress on the way) and admits what the scan left Pending.
        # Absolute, as typed (not resolved): the node follows a named symlink once, as kbtui add does.
        payload = {"paths": [os.path.abspath(path)], "collection": collection_id, "name": name,
                   "include_sensitive": include_sensitive}
        reply = self._call("POST", "/documents", payload, timeout=ADD_TIMEOUT_S, accept=(503,))
        body = _json_object(reply)
        if reply.status == 503 and "sources" not in body:
            _raise(reply)
        # A busy queue (503) stored them all the same: the drain sweep admits them.
        return shapes.source_sync(body["sources"][0])

    def remove(self, document_ids: Sequence[str]) -> int:
        return sum(self.purge(document_id) for document_id in dict.fromkeys(document_ids))

    def purge(self, document_id: str) -> bool:
        reply = self._call("DELETE", f"/documents/{_quote(document_id)}", accept=(404,))
        return reply.status != 404

    def reindex(self, document_ids: Sequence[str] | None = None, *, collection_id: str | None = None) -> ReindexReport:
        payload = {"document_ids": None if document_ids is None else list(document_ids), "collection": collection_id}
        reply = self._call("POST", "/reindex", payload, accept=(503,))
        body = _json_object(reply)
        if "queued" not in body:
            _raise(reply)
        return shapes.reindex_report(body)  # a busy queue: queued all the same, the sweep admits them

    def index_and_follow(self, document_ids: Sequence[str], *, show_progress: bool | None = None) -> FollowResult:
        """Follow documents the node indexes to Indexed or Failed through its event
        stream; :class:`NodeUnavailable` if the node stops first (the caller takes over)."""
        from kbtui.follow import follow_documents

        ids = list(dict.fromkeys(document_ids))
        stream = EventStream(self.endpoint)  # first: no event between the look-up and the stream is lost
        statuses = self.statuses(ids)
        lock = threading.Lock()
        ended = threading.Event()
        wanted = set(ids)

        def pump() -> None:
            try:
                for streamed in stream:
                    event = event_from(streamed.name, streamed.data)
                    status, document_id = getattr(event, "status", None), getattr(event, "document_id", None)
                    if status is not None and document_id in wanted:
                        with lock:
                            statuses[document_id] = status
            except NodeUnavailable:
                pass
            finally:
                ended.set()

        reader = threading.Thread(target=pump, name="kbtui-follow", daemon=True)
        reader.start()
        last_sync = time.monotonic()

        def count(_ids: Sequence[str]) -> Counter[str]:
            with lock:
                return Counter(statuses.values())

        def on_poll() -> None:
            nonlocal last_sync
            if ended.is_set() and not stream.closed:
                raise NodeUnavailable("the node stopped while indexing")
            if time.monotonic() - last_sync > RESYNC_S:
                fresh = self.statuses(ids)
                with lock:
                    statuses.clear()
                    statuses.update(fresh)
                last_sync = time.monotonic()

        try:
            return follow_documents(ids, show_progress=show_progress, on_poll=on_poll, count=count)
        finally:
            stream.close()

    # ------------------------------------------------------------ reading

    def resolve(self, reference: str, collection_id: str | None = None) -> str:
        return self.find_document(reference, collection_id).document_id

    def find_document(self, reference: str, collection_id: str | None = None) -> DocumentMatch:
        return shapes.document_match(self._json("GET", "/resolve" + _query(document=reference, collection=collection_id)))

    def documents(
        self, collection_id: str | None = None, status: str | None = None, *, updated_since: float | None = None,
        document_ids: Sequence[str] | None = None,
    ) -> list[DocumentRow]:
        if document_ids is not None:
            rows = [shapes.document_row(d) for d in self._lookup(document_ids)]
            return [r for r in rows if (collection_id is None or r.collection_id == collection_id)
                    and (status is None or r.status == status)
                    and (updated_since is None or r.updated_at >= updated_since)]
        body = self._json("GET", "/documents" + _query(collection=collection_id, status=status,
                                                       updated_since=updated_since))
        return [shapes.document_row(d) for d in body["documents"]]

    def _lookup(self, document_ids: Sequence[str]) -> list[dict]:
        return self._json("POST", "/documents/lookup", {"document_ids": list(document_ids)})["documents"]

    def document(self, document_id: str) -> DocumentRow:
        from kbtui.errors import NotFound

        found = self._lookup([document_id])
        if not found:
            raise NotFound("no such document")
        return shapes.document_row(found[0])

    def detail(self, document_id: str) -> DocumentDetail | None:
        reply = self._call("GET", f"/documents/{_quote(document_id)}", accept=(404,))
        return None if reply.status == 404 else shapes.document_detail(_json_object(reply))

    def document_text(self, document_id: str, collection_id: str, max_chars: int) -> DocumentText | None:
        target = f"/documents/{_quote(document_id)}/text" + _query(collection=collection_id, max_chars=max_chars)
        reply = self._call("GET", target, accept=(404,))
        return None if reply.status == 404 else shapes.document_text(_json_object(reply))

    def neighbours(self, chunk_id: str, collection_id: str, window: int) -> list[ChunkRecord]:
        body = self._json("GET", f"/chunks/{_quote(chunk_id)}/neighbours" + _query(collection=collection_id, window=window))
        return [shapes.chunk_record(c) for c in body["chunks"]]

    def display_names(self, document_ids: Sequence[str]) -> dict[str, str]:
        names = {d["document_id"]: d["display_name"] for d in self._lookup(list(dict.fromkeys(document_ids)))}
        return {d: names[d] for d in document_ids if d in names}

    def statuses(self, document_ids: Sequence[str]) -> dict[str, str]:
        return {d["document_id"]: d["status"] for d in self._lookup(document_ids)}

    def collections(self) -> list[str]:
        return self._json("GET", "/collections")["collections"]

    def collection_exists(self, collection_id: str) -> bool:
        return collection_id in self.collections()

    def status(self) -> NodeStatus:
        return shapes.node_status(self._json("GET", "/status"))

    def nodes(self) -> list[NodeRecord]:
        return [shapes.node_record(n) for n in self._json("GET", "/nodes")["nodes"]]

    # ------------------------------------------------------------ search

    def search(
        self, query: str, collection_id: str, *, limit: int | None = None, document_id: str | None = None,
        expand_neighbors: bool = False, per_document: bool = False, min_relevance: float | None = None,
    ) -> SearchResponse:
        body = self._json("POST", "/search", {
            "query": query, "collection": collection_id, "limit": limit, "document_id": document_id,
            "expand_neighbors": expand_neighbors, "per_document": per_document, "min_relevance": min_relevance,
            "explain": True,
        })
        return shapes.search_response(body)

    # ------------------------------------------------------------ sources

    def sources(self, collection_id: str | None = None) -> list[SourceRow]:
        body = self._json("GET", "/sources" + _query(collection=collection_id))
        return [shapes.source_row(r) for r in body["sources"]]

    def resolve_source(self, reference: str, collection_id: str | None = None) -> SourceRow:
        return shapes.source_row(self._json("GET", f"/sources/{_quote(reference)}" + _query(collection=collection_id)))

    def sync_source(
        self, source_id: str, *, dry_run: bool = False, prune: bool = False,
        on_progress: Callable[[int, int], object] | None = None,
    ) -> SyncReport:
        body = self._json("POST", f"/sources/{_quote(source_id)}/sync", {"dry_run": dry_run, "prune": prune},
                          timeout=None)
        return shapes.sync_report(body)

    def remove_source(self, source_id: str, *, purge: bool = True) -> int:
        return self._json("DELETE", f"/sources/{_quote(source_id)}" + _query(purge=purge))["purged"]

    # ------------------------------------------------------------ repositories (Git sources, the older words)

    def register_repository(self, path: Path, name: str | None = None) -> RegisteredSource:
        body = self._json("POST", "/repositories", {"path": os.path.abspath(path), "name": name})
        return shapes.source_row(body).source

    def repositories(self) -> list[SourceRow]:
        return [shapes.source_row(r) for r in self._json("GET", "/repositories")["repositories"]]

    def resolve_repository(self, reference: str) -> SourceRow:
        return shapes.source_row(self._json("GET", f"/repositories/{_quote(reference)}"))

    def unregister_repository(self, repository_id: str, *, purge: bool) -> int:
        return self._json("DELETE", f"/repositories/{_quote(repository_id)}" + _query(purge=purge))["purged"]

    def import_repository(
        self, repository_id: str, collection_id: str, *, on_progress: Callable[[int, int], object] | None = None
    ) -> SyncReport:
        # The node scans in one request (no progress on the way); the sweep then admits what it left Pending.
        body = self._json("POST", f"/repositories/{_quote(repository_id)}/import", {"collection": collection_id},
                          timeout=None)
        return shapes.sync_report(body)

    # ------------------------------------------------------------ events

    def events(self) -> Iterator[Event | LogLine]:
        """The node's pipeline events as they happen; ends when the node stops."""
        return follow_events(self.endpoint)


def follow_events(endpoint: Endpoint, *, on_open: Callable[[EventStream], None] | None = None) -> Iterator[Event | LogLine]:
    """The events of the node at ``endpoint`` (:class:`NodeUnavailable` if none answers).
    The first is the queue as it stands. Ends when the node stops or cuts the stream off."""
    stream = EventStream(endpoint)
    if on_open is not None:
        on_open(stream)
    try:
        for streamed in stream:
            event = event_from(streamed.name, streamed.data)
            if event is not None:
                yield event
    except NodeUnavailable:
        return
    finally:
        stream.close()


def _raise(reply: Reply) -> None:
    """Raise what the node answered: the operator error it was, or NodeUnavailable
    when the node cannot take the work now (overloaded, stopping)."""
    body = _json_object(reply)
    if reply.status == 503 and body.get("error") in ("overloaded", "stopping"):
        raise NodeUnavailable(str(body.get("error")))  # done in-process instead
    raise_for(str(body.get("error", "internal")), str(body.get("message", f"HTTP {reply.status}")), body)


def _json_object(reply: Reply) -> dict:
    try:
        body = reply.json()
    except ValueError:
        raise NodeUnavailable("the node's answer was not JSON") from None
    if not isinstance(body, dict):
        raise NodeUnavailable("the node's answer was not a JSON object")
    return body
