"""A model server that records every request: Ollama's embed, show, tags and
chat endpoints and llama-server's rerank, answered just well enough that a
client would go on to send document text.

Run as ``python -m tests.faults.model_server ADDRESS RECORD_FILE``: it binds
an ephemeral port on ADDRESS, prints the port on a line, and appends one JSON
line per request (method, path, body) to RECORD_FILE.
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MODEL = "nomic-embed-text:v1.5"
WIDTH = 768


def answer(path: str, request: dict) -> dict:
    if path == "/api/tags":
        return {"models": [{"model": MODEL, "name": MODEL, "digest": "sha256:" + "ab" * 32, "size": 1}]}
    if path == "/api/show":
        return {"model_info": {"general.architecture": "nomic-bert", "nomic-bert.embedding_length": WIDTH}}
    if path == "/api/embed":
        return {"model": MODEL, "embeddings": [[1.0] * WIDTH for _ in request.get("input", [])]}
    if path == "/api/chat":
        message = {"role": "assistant", "content": "An answer."}
        return {"model": request.get("model", ""), "message": message, "done": True}
    if path == "/v1/rerank":
        documents = request.get("documents", [])
        return {"results": [{"index": i, "relevance_score": 1.0 / (i + 1)} for i in range(len(documents))]}
    return {}


def serve(address: str, record: Path) -> None:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def _handle(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with record.open("a", encoding="utf-8") as out:
                out.write(json.dumps({"method": self.command, "path": self.path, "body": body.decode("utf-8", "replace")}) + "\n")
            try:
                request = json.loads(body or b"{}")
            except ValueError:
                request = {}
            payload = json.dumps(answer(self.path, request if isinstance(request, dict) else {})).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = _handle

    server = ThreadingHTTPServer((address, 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    serve(sys.argv[1], Path(sys.argv[2]))
