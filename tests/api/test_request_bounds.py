"""Bounds per request on the node's API, against a real ``kbtui serve``: a
header deadline for every request of a keep-alive connection, a whole-body
deadline before a use-case slot is taken, bounded JSON with no NaN, and the
API's JSON for every error, the connection-limit 503 included."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import closing, suppress

import pytest

from kbtui.api.app import BODY_TIMEOUT_S, MAX_CONCURRENT_REQUESTS
from kbtui.api.server import HEADER_TIMEOUT_S, MAX_CONNECTIONS
from tests.api.serving import ServingNode, kbtui, start_node, wait_for


@pytest.fixture
def served(home) -> Iterator[ServingNode]:
    node = start_node(home)
    yield node
    node.stop()
    assert "Traceback" not in node.process.stderr.read()


def connect(node: ServingNode) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(node.socket))
    return sock


def read_response(sock: socket.socket) -> tuple[bytes, bytes]:
    """One whole HTTP response (headers, body) with a Content-Length."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    while len(body) < length:
        body += sock.recv(65536)
    return head, body


def closed_by_node(sock: socket.socket, dribble: bytes, *, within: float) -> bool:
    """Send ``dribble`` a byte at a time (one every 0.5 s) until the node closes the connection."""
    deadline = time.monotonic() + within
    sock.settimeout(0.5)
    for byte in dribble:
        if time.monotonic() > deadline:
            return False
        try:
            sock.sendall(bytes([byte]))
            if sock.recv(65536) == b"":
                return True
        except TimeoutError:
            continue
        except (BrokenPipeError, ConnectionResetError):
            return True
    return False


def test_every_request_of_a_keep_alive_connection_has_a_header_deadline(served):
    with closing(connect(served)) as sock:
        sock.sendall(b"GET /v1/status HTTP/1.1\r\nHost: kbtui\r\n\r\n")
        head, _ = read_response(sock)
        assert head.startswith(b"HTTP/1.1 200") and b"connection: close" not in head.lower()
        # The next request's headers dribble in, a byte every half second, never finishing.
        started = time.monotonic()
        dribble = b"GET /v1/status HTTP/1.1\r\nHost: kbtui\r\nX-Slow: " + b"a" * 1000
        assert closed_by_node(sock, dribble, within=HEADER_TIMEOUT_S + 10)
        assert time.monotonic() - started < HEADER_TIMEOUT_S + 5


def test_slow_bodies_hold_no_use_case_slot_and_are_cut_at_the_body_deadline(served):
    """More slow uploads than there are use-case slots: the node still answers
    at once, and each upload gets a JSON 400 when its body deadline passes."""
    slow = [connect(served) for _ in range(MAX_CONCURRENT_REQUESTS + 8)]
    answers: list[bytes] = []
    headers_sent = threading.Semaphore(0)

    def upload(sock: socket.socket) -> None:
        sock.sendall(b"POST /v1/search HTTP/1.1\r\nHost: kbtui\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n")
        headers_sent.release()
        sock.settimeout(0.5)
        answer = b""
        deadline = time.monotonic() + BODY_TIMEOUT_S + 15
        while time.monotonic() < deadline:
            with suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(b" ")  # the body, a byte at a time
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            except ConnectionResetError:
                break
            answer += chunk
            if not chunk or b"}" in answer:
                break
        answers.append(answer)

    threads = [threading.Thread(target=upload, args=(sock,)) for sock in slow]
    for thread in threads:
        thread.start()
    try:
        for _ in slow:
            assert headers_sent.acquire(timeout=10)
        assert served.http.get("/status").status_code == 200
        searched = served.http.post("/search", json={"query": "anything"})
        assert searched.status_code == 200, searched.text
    finally:
        for thread in threads:
            thread.join(BODY_TIMEOUT_S + 20)
        for sock in slow:
            sock.close()
    assert len(answers) == len(slow)
    for answer in answers:  # none was refused for want of a slot (503), each timed out
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400"), answer[:200]
        assert json.loads(body)["error"] == "bad_request"


@pytest.mark.parametrize(
    "body",
    [
        b'{"query": "x", "min_relevance": NaN}',
        b'{"query": "x", "min_relevance": Infinity}',
        b'{"query": "x", "min_relevance": -Infinity}',
        b'{"query": "x", "min_relevance": 1e999}',
        b'{"query": "x", "extra": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",  # was a 500
        b'{"query": "x", "collection": ' + b'{"a": ' * 20 + b"1" + b"}" * 20 + b"}",
    ],
    ids=["nan", "infinity", "minus-infinity", "1e999", "deep-array", "deep-object"],
)
def test_json_is_bounded_in_depth_and_takes_no_nan(served, body):
    answer = served.http.post("/search", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 400 and answer.headers["content-type"] == "application/json"
    assert answer.json()["error"] == "invalid_json"


def test_a_query_parameter_takes_no_nan(served):
    for value in ("nan", "inf", "-Infinity"):
        answer = served.http.get("/documents", params={"updated_since": value})
        assert answer.status_code == 400 and answer.json()["error"] == "invalid_arguments"


def test_the_connection_limit_answers_the_apis_json_503(served):
    held = [connect(served) for _ in range(MAX_CONNECTIONS)]
    try:
        def refused() -> bytes | None:
            with closing(connect(served)) as sock:
                sock.sendall(b"GET /v1/status HTTP/1.1\r\nHost: kbtui\r\n\r\n")
                head, body = read_response(sock)
            return head + b"\r\n\r\n" + body if head.startswith(b"HTTP/1.1 503") else None

        answer = wait_for(refused, timeout=HEADER_TIMEOUT_S - 2, what="the connection limit")
        head, _, body = answer.partition(b"\r\n\r\n")
        assert b"content-type: application/json" in head.lower() and b"retry-after: 1" in head.lower()
        assert json.loads(body)["error"] == "overloaded"
    finally:
        for sock in held:
            sock.close()
    assert served.http.get("/status").status_code == 200


def test_the_cli_takes_no_nan_for_a_number(home):
    result = kbtui(home, "search", "anything", "--min-score", "nan")
    assert result.returncode == 2 and "'nan' is not a finite number" in result.stderr
    for value in ("inf", "-inf"):
        assert kbtui(home, "search", "anything", "--min-score", value).returncode == 2
