"""A real ``kbtui serve`` process for the API and CLI tests, and ways to talk to it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from kbtui.api import SOCKET_NAME


def kbtui_env(home: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "KBTUI_HOME": str(home), "KBTUI_EMBEDDING_PROVIDER": "hash", "KBTUI_LOG_LEVEL": "DEBUG",
            **extra}


def kbtui(home: Path, *args: str, timeout: float = 120, **extra_env: str) -> subprocess.CompletedProcess:
    """``kbtui ARGS`` in a new process, as an operator runs it."""
    return subprocess.run(
        [sys.executable, "-m", "kbtui", *args], env=kbtui_env(home, **extra_env), capture_output=True, text=True,
        timeout=timeout,
    )


def wait_for(condition, *, timeout: float = 60, interval: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(interval)


def answers(path: Path) -> bool:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        sock.close()


@dataclass
class ServingNode:
    home: Path
    process: subprocess.Popen
    args: tuple[str, ...] = ()
    _client: httpx.Client | None = field(default=None, repr=False)

    @property
    def socket(self) -> Path:
        return self.home / SOCKET_NAME

    @property
    def http(self) -> httpx.Client:
        """An independent HTTP client (httpx) on the node's socket."""
        if self._client is None:
            self._client = httpx.Client(transport=httpx.HTTPTransport(uds=str(self.socket)), base_url="http://kbtui/v1",
                                        timeout=60)
        return self._client

    def log(self) -> str:
        path = self.home / "logs" / "kbtui.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def api_calls(self) -> int:
        """Requests the node has answered so far (its DEBUG log names each, never its path)."""
        return self.log().count(" kbtui.api.app: api: ")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout=60)


def start_node(home: Path, *args: str, config: str | None = None) -> ServingNode:
    if config is not None:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        (home / "config.toml").write_text(config)
    process = subprocess.Popen(
        [sys.executable, "-m", "kbtui", "serve", *args], env=kbtui_env(home), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )
    node = ServingNode(home, process, args)
    deadline = time.monotonic() + 60
    while not answers(node.socket):
        if process.poll() is not None:
            raise AssertionError(f"kbtui serve exited: {process.stderr.read()}")
        assert time.monotonic() < deadline, "the node did not start"
        time.sleep(0.05)
    return node


def documents_by_status(node: ServingNode) -> dict[str, int]:
    status = node.http.get("/status").json()
    return status["documents"]


def sse_events(lines) -> list[tuple[str, dict]]:
    """Parse server-sent event lines (from httpx's ``iter_lines``) as they come."""
    name = None
    for line in lines:
        if line.startswith("event: "):
            name = line[len("event: "):]
        elif line.startswith("data: ") and name is not None:
            yield name, json.loads(line[len("data: "):])
            name = None
