"""``kbtui search`` through a running node, before anything heavy is imported.

A search in a pipe or with ``--json`` is one request to the node on its Unix
socket: this module answers it with the standard library, the collection
rules and the printable-text escaping, and nothing else (no click, no rich,
no HTTP library, no catalog). It gives up, returning None, whenever it is not
sure to print exactly what the full command prints: another option, a
terminal (coloured output), no node answering, an unknown collection, an
error from the node. The full command then does the work and says why.

The tab-separated hit lines are written here, for both paths.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
from collections.abc import Sequence
from pathlib import Path

from kbtui.api import API_PREFIX, SOCKET_NAME
from kbtui.api.identity import (
    BASE_HEADER,
    CHALLENGE_HEADER,
    PROOF_HEADER,
    NotOurNode,
    is_own_socket,
    new_challenge,
    read_identity,
)
from kbtui.printable import printable

ALL = "all"
ALL_COLLECTIONS = "*"  # kbtui.retrieval.results.ALL_COLLECTIONS, without importing retrieval
NODE_API_ENV = "KBTUI_NODE_API"
TIMEOUT_S = 120.0
_MAX_SOCKET_PATH = 100  # longer paths go through the full client (kbtui.api.transport)
_PEERCRED = struct.Struct("3i")
HIT_COLUMNS = ("rank", "relevance", "score", "score_kind", "document_id", "collection", "source", "page", "heading",
               "text")


def hits_tsv(hits: Sequence[dict], names: dict[str, str]) -> str:
    """A header line and one line per hit (``-`` for nothing): whole ids, the
    chunk's text on one line, control characters escaped, so ``cut -f`` and
    ``grep`` work. ``names``: the operator's own names of hits without a path."""
    lines = ["\t".join(HIT_COLUMNS)]
    for rank, hit in enumerate(hits, start=1):
        relevance = hit.get("relevance")
        fields = [
            str(rank), "-" if relevance is None else f"{relevance:.2f}", f"{hit['score']:.4f}", hit["score_kind"],
            hit["document_id"], hit["collection"], hit["source_path"] or names.get(hit["document_id"], ""),
            hit["page"], hit["heading_path"], " ".join(str(hit["text"]).split()),
        ]
        lines.append("\t".join("-" if v is None or v == "" else printable(str(v)) for v in fields))
    return "\n".join(lines)


def search_json(body: dict) -> str:
    """``kbtui search --json``'s output from a search response's JSON (the node's, or ours)."""
    match = body.get("match")
    if match is not None and match.get("best_similarity") is not None:
        match = {**match, "best_similarity": round(match["best_similarity"], 4)}
    payload: dict[str, object] = {
        "hits": body["hits"], "degraded": body["degraded"], "elapsed_ms": round(body["elapsed_ms"], 2), "match": match,
        "hidden_below_floor": body.get("hidden_below_floor", 0),
    }
    if "explain" in body:
        payload["explain"] = body["explain"]
    return json.dumps(payload, indent=2)


class _NotHere(Exception):
    """The fast path cannot answer: the full command will."""


def answer_quickly(argv: Sequence[str]) -> int | None:
    """The exit code of ``kbtui search ...`` answered by a running node, or None
    when the full command must run instead."""
    try:
        request = _parse(list(argv))
        if request is None or os.environ.get(NODE_API_ENV, "").strip().lower() in ("0", "off", "no", "false"):
            return None
        query, collection, limit, chunks, min_score, as_json = request
        node = _Node(_home())
        if collection is not None and collection != ALL_COLLECTIONS and collection not in node.collections():
            return None  # the full command lists the known ones
        body = node.post("/search", {
            "query": query, "collection": collection or "DEFAULT", "limit": limit, "document_id": None,
            "expand_neighbors": False, "per_document": not chunks, "min_relevance": min_score, "explain": False,
        })
        unnamed = [h["document_id"] for h in body["hits"] if not h["source_path"]]
        names = node.names(unnamed) if unnamed and not as_json else {}
    except (_NotHere, OSError, ValueError, KeyError, TypeError):
        return None
    if as_json:
        _print(search_json(body))
        return 0
    notice = quiet_notice(body["degraded"], (body.get("match") or {}).get("verdict"), body.get("hidden_below_floor", 0))
    if notice:
        print(f"kbtui: {notice}", file=sys.stderr)
    _print(hits_tsv(body["hits"], names))
    return 0


def _print(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def quiet_notice(degraded: Sequence[str], verdict: str | None, hidden: int = 0) -> str:
    """What a table says above the hits (degraded, related only, nothing matched,
    unrelated hits hidden), for stderr when the hits go to a pipe."""
    parts = []
    if degraded:
        parts.append("degraded: " + ", ".join(degraded))
    if verdict == "related":
        parts.append("no exact matches, showing related passages")
    elif verdict == "none":
        parts.append("nothing matched")
    if hidden:
        parts.append(hidden_note(hidden))
    return "; ".join(parts)


def hidden_note(hidden: int) -> str:
    """The count of hits left out as below the similarity floor."""
    return f"{hidden} unrelated hidden (below the similarity floor; --min-score 0 shows them)"


def _parse(argv: list[str]) -> tuple[str, str | None, int | None, bool, float | None, bool] | None:
    """(query, collection, limit, chunks, min score, json) of ``search`` with the options
    this path knows; None for anything else (the full command parses and checks it)."""
    if not argv or argv[0] != "search":
        return None
    query: str | None = None
    collection: str | None = None
    limit: int | None = None
    min_score: float | None = None
    chunks = as_json = False
    fmt: str | None = None
    words = iter(argv[1:])
    for word in words:
        name, has_value, inline = word.partition("=") if word.startswith("--") else (word, False, "")
        if name in ("-c", "--collection", "-n", "--limit", "--min-score", "--format"):
            value = inline if has_value else next(words, None)
            if value is None:
                return None
            if name in ("-c", "--collection"):
                collection = value
            elif name in ("-n", "--limit"):
                limit = int(value) if value.isdigit() else 0
                if not 1 <= limit <= 200:
                    return None
            elif name == "--min-score":
                min_score = float(value)
                if not 0.0 <= min_score <= 1.0:
                    return None
            else:
                fmt = value.lower()
        elif word == "--chunks":
            chunks = True
        elif word == "--json":
            as_json = True
        elif word.startswith("-") or query is not None:
            return None  # another option, or a second argument: the full command
        else:
            query = word
    if query is None or fmt not in (None, "tsv", "json"):
        return None
    as_json = as_json or fmt == "json"
    if fmt is None and not as_json and sys.stdout.isatty():
        return None  # a terminal's table is drawn by the full command
    return query, _collection(collection), limit, chunks, min_score, as_json


def _collection(raw: str | None) -> str | None:
    if raw is None:
        return None
    if raw.strip().lower() == ALL:
        return ALL_COLLECTIONS
    from kbtui.collections import canonical_collection_id
    from kbtui.errors import InvalidCollection

    try:
        return canonical_collection_id(raw)
    except InvalidCollection:
        raise _NotHere from None


def _home() -> str:
    configured = os.environ.get("KBTUI_HOME")
    if configured:
        return os.path.expanduser(configured)
    import platformdirs

    return str(platformdirs.user_data_path("kbtui", appauthor=False))


class _Node:
    """HTTP/1.1 requests to the node on its socket, one connection each (``Connection: close``)."""

    def __init__(self, home: str) -> None:
        self.path = os.path.join(home, SOCKET_NAME)
        if len(self.path.encode()) > _MAX_SOCKET_PATH:
            raise _NotHere
        # Only this data directory's own node (kbtui.api.identity); anything
        # else is for the full command, which says what is wrong in one line.
        try:
            if not is_own_socket(Path(self.path)):
                raise _NotHere
        except NotOurNode:
            raise _NotHere from None
        identity = read_identity(Path(home))
        if identity is None:
            raise _NotHere
        self.identity = identity

    def collections(self) -> list[str]:
        return self._request("GET", "/collections", None)["collections"]

    def names(self, document_ids: list[str]) -> dict[str, str]:
        found = self.post("/documents/lookup", {"document_ids": list(dict.fromkeys(document_ids))})["documents"]
        return {d["document_id"]: d["display_name"] for d in found}

    def post(self, target: str, payload: object) -> dict:
        return self._request("POST", target, payload)

    def _request(self, method: str, target: str, payload: object) -> dict:
        body = b"" if payload is None else json.dumps(payload).encode()
        challenge = new_challenge()
        head = (f"{method} {API_PREFIX}{target} HTTP/1.1\r\nHost: kbtui\r\nConnection: close\r\n"
                f"Accept: application/json\r\n{BASE_HEADER}: {self.identity.base_id}\r\n"
                f"{CHALLENGE_HEADER}: {challenge}\r\n")
        if payload is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(TIMEOUT_S)
            try:
                sock.connect(self.path)
            except OSError:
                raise _NotHere from None  # no node: the full command works in-process
            _pid, uid, _gid = _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
            if uid != os.getuid():
                raise _NotHere  # the full command refuses it with the right words
            sock.sendall((head + "\r\n").encode() + body)
            answer = bytearray()
            while chunk := sock.recv(65536):
                answer += chunk
        status, headers, content = _split(bytes(answer))
        if not self.identity.proves(challenge, headers.get(PROOF_HEADER)):
            raise _NotHere  # not our knowledge base's node: the full command refuses it in one line
        if status != 200:
            raise _NotHere  # the full command asks again and shows the node's error
        found = json.loads(content)
        if not isinstance(found, dict):
            raise _NotHere
        return found


def _split(answer: bytes) -> tuple[int, dict[str, str], bytes]:
    """Status, headers (lower-case names) and body of a whole HTTP/1.1 response (chunked or not)."""
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = _unchunk(body)
    elif "content-length" in headers:
        body = body[: int(headers["content-length"])]
    return status, headers, body


def _unchunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += data[:size]
        data = data[size + 2 :]
    return bytes(out)
