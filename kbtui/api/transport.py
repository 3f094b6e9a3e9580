"""Where the node listens and how a client talks to it: the Unix socket in the
data directory, peer credentials, and HTTP/1.1 requests over h11.

h11 (the HTTP/1.1 state machine uvicorn itself serves with) does the protocol;
this module only moves bytes. It imports nothing heavy: ``kbtui search``
through a running node pays for the request, not for the server library.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import h11

from kbtui.api import API_PREFIX, SOCKET_NAME
from kbtui.api.identity import (
    BASE_HEADER,
    CHALLENGE_HEADER,
    PROOF_HEADER,
    BaseIdentity,
    NotOurNode,
    is_own_socket,
    new_challenge,
)

# A Unix socket address holds at most 108 bytes (with its NUL); a longer path
# is reached through the data directory's descriptor (Linux: /proc/self/fd).
_MAX_SOCKET_PATH = 100
_PEERCRED = struct.Struct("3i")  # pid, uid, gid
CONNECT_TIMEOUT_S = 2.0
READ_CHUNK = 65536
# Bounds on what a client accepts from the node: a node is trusted, but a
# wrong answer must not exhaust the client's memory.
MAX_RESPONSE_HEADERS = 64 * 1024


class NodeUnavailable(Exception):
    """No node answered: nothing listens on the socket, or the node went away
    before its answer was complete. The caller works in-process instead."""


def socket_path(home: Path) -> Path:
    return home / SOCKET_NAME


@contextlib.contextmanager
def socket_address(path: Path) -> Iterator[str]:
    """An address ``bind``/``connect`` accept for ``path``, however long it is."""
    text = os.fspath(path)
    if len(text.encode()) <= _MAX_SOCKET_PATH:
        yield text
        return
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{directory}/{path.name}"
    finally:
        os.close(directory)


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket (SO_PEERCRED)."""
    _pid, uid, _gid = _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
    return uid


@dataclass(frozen=True)
class Endpoint:
    """How to reach a node: its Unix socket, or (when asked for) a loopback TCP
    port with the token from the node's token file; and the knowledge base the
    node must prove it serves (see :mod:`kbtui.api.identity`)."""

    identity: BaseIdentity | None
    unix_path: Path | None = None
    host: str | None = None
    port: int | None = None
    token: str | None = None

    def connect(self, timeout: float | None) -> socket.socket:
        if self.identity is None:
            # No key in the data directory: no node can prove it is ours.
            raise NodeUnavailable("no node key")
        try:
            if self.unix_path is not None:
                if not is_own_socket(self.unix_path):
                    raise NodeUnavailable("no socket")
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    sock.settimeout(CONNECT_TIMEOUT_S)
                    with socket_address(self.unix_path) as address:
                        sock.connect(address)
                    if peer_uid(sock) != os.getuid():
                        raise NotOurNode("the node's socket in the data directory belongs to another user")
                except BaseException:
                    sock.close()
                    raise
            else:
                sock = socket.create_connection((self.host, self.port), timeout=CONNECT_TIMEOUT_S)
        except (TimeoutError, FileNotFoundError, ConnectionError, NotADirectoryError) as exc:
            raise NodeUnavailable(type(exc).__name__) from None
        except OSError as exc:  # e.g. ENOTSOCK: a stale file where the socket was
            raise NodeUnavailable(type(exc).__name__) from None
        sock.settimeout(timeout)
        return sock


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> object:
        return json.loads(self.body) if self.body else None


def _request_bytes(
    conn: h11.Connection, endpoint: Endpoint, method: str, target: str, body: bytes | None, challenge: str
) -> bytes:
    headers = [("Host", "kbtui"), ("Connection", "close"), ("Accept", "application/json"),
               (CHALLENGE_HEADER, challenge)]
    if endpoint.identity is not None:
        headers.append((BASE_HEADER, endpoint.identity.base_id))
    if endpoint.token:
        headers.append(("Authorization", f"Bearer {endpoint.token}"))
    if body is not None:
        headers += [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    data = conn.send(h11.Request(method=method, target=API_PREFIX + target, headers=headers))
    if body:
        data += conn.send(h11.Data(data=body))
    return data + conn.send(h11.EndOfMessage())


def _events(conn: h11.Connection, sock: socket.socket) -> Iterator[object]:
    """h11 events of the answer, reading the socket as needed."""
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError as exc:
            raise NodeUnavailable("malformed or cut answer") from exc
        if event is h11.NEED_DATA:
            try:
                data = sock.recv(READ_CHUNK)
            except (TimeoutError, ConnectionError) as exc:
                raise NodeUnavailable(type(exc).__name__) from None
            conn.receive_data(data)
            continue
        yield event
        if isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
            return


def _check_proof(endpoint: Endpoint, challenge: str, response: h11.Response) -> None:
    """Believe an answer only from the node of our own knowledge base."""
    headers = {k.decode().lower(): v.decode("latin-1") for k, v in response.headers}
    if endpoint.identity is None or not endpoint.identity.proves(challenge, headers.get(PROOF_HEADER)):
        raise NotOurNode(
            "the node answering in the data directory serves another knowledge base "
            "(is api.sock a link, or was node.key replaced?); nothing was done"
        )


def request(endpoint: Endpoint, method: str, target: str, payload: object = None, *, timeout: float | None) -> Reply:
    """One request (a new connection each time: a Unix socket connects in microseconds)."""
    body = None if payload is None else json.dumps(payload).encode()
    challenge = new_challenge()
    sock = endpoint.connect(timeout)
    try:
        conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_RESPONSE_HEADERS)
        try:
            sock.sendall(_request_bytes(conn, endpoint, method, target, body, challenge))
        except (TimeoutError, ConnectionError) as exc:
            raise NodeUnavailable(type(exc).__name__) from None
        status, headers, chunks = 0, {}, []
        for event in _events(conn, sock):
            if isinstance(event, h11.Response):
                _check_proof(endpoint, challenge, event)
                status = event.status_code
                headers = {k.decode().lower(): v.decode("latin-1") for k, v in event.headers}
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
        return Reply(status, headers, b"".join(chunks))
    finally:
        sock.close()


@dataclass(frozen=True)
class StreamedEvent:
    """One server-sent event: its name and JSON data."""

    name: str
    data: dict[str, object]


class EventStream:
    """A live ``GET /v1/events`` stream: iterate for events; ``close`` ends it
    from any thread. Iteration ends when the node closes the stream."""

    def __init__(self, endpoint: Endpoint, *, read_timeout_s: float | None = None) -> None:
        self._sock = endpoint.connect(read_timeout_s)
        self._conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_RESPONSE_HEADERS)
        self.closed = False
        challenge = new_challenge()
        try:
            self._sock.sendall(_request_bytes(self._conn, endpoint, "GET", "/events", None, challenge))
            self._answer = _events(self._conn, self._sock)
            first = next(self._answer)
            if isinstance(first, h11.Response):
                _check_proof(endpoint, challenge, first)
        except (TimeoutError, ConnectionError, StopIteration) as exc:
            self.close()
            raise NodeUnavailable(type(exc).__name__) from None
        except BaseException:
            self.close()
            raise
        if not isinstance(first, h11.Response) or first.status_code != 200:
            self.close()
            raise NodeUnavailable("the node refused the event stream")

    def __iter__(self) -> Iterator[StreamedEvent]:
        buffer = b""
        try:
            for event in self._answer:
                if not isinstance(event, h11.Data):
                    continue
                buffer += bytes(event.data)
                while b"\n\n" in buffer:
                    block, buffer = buffer.split(b"\n\n", 1)
                    parsed = parse_sse_block(block)
                    if parsed is not None:
                        yield parsed
        except (NodeUnavailable, OSError):
            if not self.closed:
                raise NodeUnavailable("the event stream was cut") from None

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()


def parse_sse_block(block: bytes) -> StreamedEvent | None:
    """One ``event:``/``data:`` block of a server-sent event stream (comments are keep-alives)."""
    name, data = "message", []
    for line in block.decode("utf-8").split("\n"):
        if line.startswith(":") or not line:
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
    if not data:
        return None
    return StreamedEvent(name, json.loads("\n".join(data)))
