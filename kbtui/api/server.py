"""Serving the API from the node process: uvicorn in a background thread.

The node (``kbtui serve``, or the TUI running the node) starts an
:class:`ApiServer` once it holds the node lock, so the socket is only ever
bound by the one process that runs the pipeline (a socket file left by a
node that died is stale, and replaced).

What keeps a client from hurting the node:
- the Unix socket is 0600 inside the 0700 data directory, and every
  connection's peer credentials (SO_PEERCRED) must name this process's uid;
- HTTP is parsed by h11 with headers bounded (16 KiB) and a deadline for
  them on every request of a connection, bodies are bounded (4 MiB) and read
  whole within a deadline before a use case may start, at most 256
  connections and 32 running use cases (more answer the API's JSON 503 at
  once);
- everything runs off the pipeline's actors: an event-stream client gets a
  bounded queue and is cut off when it falls behind (:mod:`kbtui.api.hub`).

A TCP listener exists only when asked for (``--listen``), on a loopback
address only, and every request on it must carry the token that the node
writes to ``api.token`` (0600) for as long as it listens.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import secrets
import socket
import stat
import threading
import time
from dataclasses import dataclass

import pykka
import uvicorn
from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from actors.events import SweepPending
from actors.runtime import Runtime
from kbtui.api import TOKEN_NAME
from kbtui.api.app import OVERLOADED, Services, build_app, error_response
from kbtui.api.hub import EventHub, EventRelay
from kbtui.api.identity import read_identity
from kbtui.api.transport import peer_uid, socket_address, socket_path
from kbtui.errors import DataDirectoryProblem, KbtuiError
from kbtui.logs import LogLineHandler
from kbtui.node import Node

log = logging.getLogger(__name__)

MAX_HEADER_BYTES = 16 * 1024
HEADER_TIMEOUT_S = 10.0  # from connecting to the end of the request's headers
MAX_CONNECTIONS = 256
BACKLOG = 64
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0

# uvicorn logs tracebacks of failures it sees; none should reach it, but a
# traceback's message could carry text: keep its lines, drop the details.
class _Redacted(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info:
            exc_type = record.exc_info[0].__name__ if record.exc_info[0] else "error"
            record.msg = f"{str(record.msg).splitlines()[0]} ({exc_type}; details withheld)"
            record.args = ()
            record.exc_info = record.exc_text = record.stack_info = None
        return True


for _name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
    logging.getLogger(_name).addFilter(_Redacted())
logging.getLogger("uvicorn").setLevel(logging.WARNING)


async def _overloaded(scope: Scope, receive: Receive, send: Send) -> None:
    """The answer on a connection over MAX_CONNECTIONS: the API's JSON 503, then close."""
    await error_response(OVERLOADED, {"Connection": "close"})(scope, receive, send)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, plus: other users' connections are refused
    when they connect, every request's headers must arrive in time (the first
    of a connection and each after a response alike), a connection over the
    limit and a malformed request get the API's JSON errors, not plain text."""

    # uvicorn's protocol narrows asyncio's BaseTransport to the stream Transport it is given.
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family == socket.AF_UNIX:
            uid = peer_uid(sock)
            if uid != os.getuid():
                log.warning("api: refused a connection from another user (uid %d)", uid)
                transport.abort()
                return
        if len(self.connections) > MAX_CONNECTIONS:  # this one included
            self.app = _overloaded  # its request is read (under the deadline), then answered 503
        self._await_headers()

    def _await_headers(self) -> None:
        """Arm the header deadline for the next request (none is in yet)."""
        deadline = getattr(self, "_header_deadline", None)
        if deadline is not None:
            deadline.cancel()
        self._cycle_before = self.cycle
        self._header_deadline = self.loop.call_later(HEADER_TIMEOUT_S, self._headers_too_slow)

    def _headers_too_slow(self) -> None:
        if self.cycle is self._cycle_before and not self.transport.is_closing():
            self.transport.close()

    def handle_events(self) -> None:
        super().handle_events()
        if self.cycle is not self._cycle_before:  # a request's headers are in
            self._header_deadline.cancel()

    def on_response_complete(self) -> None:
        # Armed before the next cycle can start: a pipelined request in the
        # buffer starts inside super() and cancels it at once.
        self._await_headers()
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        deadline = getattr(self, "_header_deadline", None)
        if deadline is not None:
            deadline.cancel()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        import h11

        body = b'{"error":"bad_http","message":"a malformed HTTP request, or headers over 16 KiB"}'
        headers = [(b"content-type", b"application/json"), (b"connection", b"close"),
                   (b"content-length", str(len(body)).encode())]
        for event in (h11.Response(status_code=400, headers=headers, reason=b"Bad Request"), h11.Data(data=body),
                      h11.EndOfMessage()):
            self.transport.write(self.conn.send(event))
        self.transport.close()


@dataclass
class RuntimePipeline:
    """The running pipeline, as the routes see it."""

    runtime: Runtime

    def admit(self, document_id: str) -> object:
        return self.runtime.admit(document_id)

    def state(self) -> object:
        return self.runtime.state()

    def sweep(self) -> None:
        admission = self.runtime.admission
        if admission is not None:
            with contextlib.suppress(pykka.ActorDeadError):
                admission.tell(SweepPending())


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` of a loopback address (``127.0.0.1:8765``, ``[::1]:8765``, ``localhost:8765``)."""
    host, _, port = text.rpartition(":")
    host = host.strip("[]")
    if host == "localhost":
        host = "127.0.0.1"
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise KbtuiError("--listen takes a loopback address and a port, e.g. 127.0.0.1:8765 (never a public address)")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise KbtuiError("--listen: the port must be a number from 1 to 65535")
    return host, int(port)


class ApiServer:
    """The node's API: start it once the pipeline runs, stop it before the pipeline."""

    def __init__(self, node: Node, *, listen: tuple[str, int] | None = None) -> None:
        self.node = node
        self.listen = listen
        self.hub = EventHub(node_id=node.node_id())
        # Started now, so it is a listener from the pipeline's first event on.
        self.relay = EventRelay.start(self.hub)
        self.path = socket_path(node.config.home)
        self.token_path = node.config.home / TOKEN_NAME
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket_inode: tuple[int, int] | None = None
        self._log_lines = LogLineHandler(self.hub.publish)

    def start(self, runtime: Runtime) -> ApiServer:
        """Bind and serve (from a background thread); returns once it answers."""
        sockets: list[socket.socket] = []
        token = None
        try:
            if self.listen is not None:
                sockets.append(_bind_tcp(*self.listen))
                token = self._write_token()
            # Bound last: a client that sees the socket answer finds the token already there.
            sockets.insert(0, self._bind_unix())
        except BaseException:
            for sock in sockets:
                sock.close()
            self._remove_files()
            raise
        config = uvicorn.Config(
            build_app(Services(self.node, RuntimePipeline(runtime), self.hub, token, read_identity(self.node.config.home))),
            http=GuardedH11Protocol, ws="none", lifespan="off", interface="asgi3",
            log_config=None, access_log=False, server_header=False,
            h11_max_incomplete_event_size=MAX_HEADER_BYTES, timeout_keep_alive=5,
            limit_concurrency=None,  # GuardedH11Protocol answers over MAX_CONNECTIONS with the API's JSON
            backlog=BACKLOG, timeout_graceful_shutdown=int(STOP_TIMEOUT_S),
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": sockets}, name="kbtui-api", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise KbtuiError("the node's API did not start; see the log")
            time.sleep(0.01)
        self._log_lines.attach()  # the node's log lines, live, to event-stream clients
        log.info("api: serving on %s%s", self.path.name, " and a loopback TCP port" if self.listen else "")
        return self

    def stop(self) -> None:
        """End the event streams, stop serving, remove the socket and token files."""
        self._log_lines.detach()
        self.hub.close()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(STOP_TIMEOUT_S + 1)
            if self._thread.is_alive() and self._server is not None:
                self._server.force_exit = True
                self._thread.join(1)
        self._remove_files()
        with contextlib.suppress(pykka.ActorDeadError):
            self.relay.stop(timeout=5)

    # ------------------------------------------------------------ files

    def _bind_unix(self) -> socket.socket:
        try:
            mode = os.lstat(self.path).st_mode
        except FileNotFoundError:
            pass
        else:
            if not stat.S_ISSOCK(mode):
                raise DataDirectoryProblem(f"{self.path.name} in the data directory is not a socket; remove it")
            os.unlink(self.path)  # stale: only the holder of the node lock gets here
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with socket_address(self.path) as address:
                sock.bind(address)
            os.chmod(self.path, 0o600)
            sock.listen(BACKLOG)
            info = os.stat(self.path)
            self._socket_inode = (info.st_dev, info.st_ino)
        except BaseException:
            sock.close()
            raise
        return sock

    def _write_token(self) -> str:
        token = secrets.token_urlsafe(32)
        temporary = self.token_path.with_name(TOKEN_NAME + ".tmp")
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(token + "\n")
        os.replace(temporary, self.token_path)
        return token

    def _remove_files(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            info = os.stat(self.path)
            if (info.st_dev, info.st_ino) == self._socket_inode:  # never another node's socket
                os.unlink(self.path)
        if self.listen is not None:
            with contextlib.suppress(FileNotFoundError):
                self.token_path.unlink()


def _bind_tcp(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        raise KbtuiError(f"--listen: cannot listen on that port ({os.strerror(exc.errno or 0).lower()})") from None
    return sock
