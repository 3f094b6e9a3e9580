"""A real HTTP server on 127.0.0.1 that speaks Ollama's /api/chat, with scripted replies.

Each test gives it a ``script``: a function from the decoded request body to
``(status, body)``. Every request body is kept in ``requests`` so a test can
check what the model was offered and what the tools returned to it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kbtui.tools.fencing import Fence

Script = Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]


def tool_call_reply(name: str, arguments: dict[str, Any], model: str = "stub") -> dict[str, Any]:
    call = {"function": {"name": name, "arguments": arguments}}
    return _reply(model, {"role": "assistant", "content": "", "tool_calls": [call]})


def text_reply(content: str, model: str = "stub") -> dict[str, Any]:
    return _reply(model, {"role": "assistant", "content": content})


def _reply(model: str, message: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": model, "created_at": "2026-01-01T00:00:00Z", "message": message,
        "done": True, "done_reason": "stop", "total_duration": 1, "eval_count": 1,
    }


def search_then_cite(query: str, **extra_arguments: Any) -> Script:
    """First turn: call search_knowledge_base; second turn: answer with the first
    hit's first sentence (read through the fence) and cite its ref."""

    def script(request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        tool_messages = [m for m in request["messages"] if m["role"] == "tool"]
        if not tool_messages:
            return 200, tool_call_reply("search_knowledge_base", {"query": query, **extra_arguments})
        payload = json.loads(tool_messages[-1]["content"])
        if not payload.get("hits"):
            return 200, text_reply("The knowledge base does not say.")
        hit = payload["hits"][0]
        text = Fence(payload["fence"]["nonce"]).unwrap("text", hit["text"])
        return 200, text_reply(f"{text.split('.')[0].strip()}. [{hit['ref']}]")

    return script


class ScriptedOllama:
    def __init__(self) -> None:
        self.script: Script = lambda _request: (200, text_reply("no script"))
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                if self.path != "/api/chat":
                    status, reply = 404, {"error": "not found"}
                else:
                    outer.requests.append(body)
                    status, reply = outer.script(body)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass  # request lines would carry nothing useful into the test output

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
