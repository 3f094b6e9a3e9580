"""Document text and queries reach a model only on this machine (unless the
operator opts in): embedder, reranker and chat, checked when the settings
load and again at every connection, on the addresses the host resolves to then.

The model server here listens on a real non-loopback address, 198.51.100.7 on
a veth interface, in a network namespace of the test's own; a private
``/etc/hosts`` in the same mount namespace sends ``localhost`` there (what a
changed resolver or a tampered hosts file would do). Every ``kbtui`` command
runs inside those namespaces, and the server records every request it gets.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kbtui.config import Config
from kbtui.settings import InvalidSetting
from tests.conftest import write
from tests.faults.processes import kbtui_env, one_line

ADDRESS = "198.51.100.7"  # TEST-NET-2: never a loopback address
REPOSITORY = Path(__file__).parents[2]


@dataclass
class OffMachine:
    pid: int
    port: int
    record: Path

    def requests(self) -> list[dict]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text(encoding="utf-8").splitlines()]

    def run(self, home: Path, *args: str, provider: str = "hash") -> subprocess.CompletedProcess:
        """``args`` (a kbtui command, or ``-c CODE``) in the server's network and mount namespaces."""
        command = [sys.executable, *args] if args[0] == "-c" else [sys.executable, "-m", "kbtui", *args]
        return subprocess.run(
            ["nsenter", f"--target={self.pid}", "--net", "--mount", *command],
            env={**kbtui_env(home), "KBTUI_EMBEDDING_PROVIDER": provider, "KBTUI_NODE_API": "off"},
            cwd=REPOSITORY, capture_output=True, text=True, timeout=120,
        )


@pytest.fixture
def off_machine(tmp_path) -> Iterator[OffMachine]:
    if os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("nsenter") and shutil.which("ip")):
        pytest.skip("needs root, unshare, nsenter and ip to make a network namespace")
    hosts = tmp_path / "hosts"
    hosts.write_text(f"{ADDRESS} localhost\n", encoding="utf-8")
    record = tmp_path / "requests.jsonl"
    setup = (
        "ip link set lo up && ip link add kb0 type veth peer name kb1 && "
        f"ip addr add {ADDRESS}/24 dev kb0 && ip link set kb0 up && ip link set kb1 up && "
        f"mount --bind {hosts} /etc/hosts && "
        f"exec {sys.executable} -m tests.faults.model_server {ADDRESS} {record}"
    )
    server = subprocess.Popen(
        ["unshare", "--net", "--mount", "sh", "-c", setup], cwd=REPOSITORY, stdout=subprocess.PIPE, text=True
    )
    try:
        line = server.stdout.readline() if server.stdout else ""
        assert line.strip().isdigit(), "the model server did not start in its namespace"
        yield OffMachine(server.pid, int(line), record)
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.parametrize("key", ["ollama_host", "chat_host", "reranker_url"])
def test_a_model_endpoint_off_this_machine_is_refused_when_the_settings_load(tmp_path, key):
    (tmp_path / "config.toml").write_text(f'{key} = "http://{ADDRESS}:11434"\n', encoding="utf-8")
    with pytest.raises(InvalidSetting, match=key):
        Config.load(tmp_path)
    (tmp_path / "config.toml").write_text(f'{key} = "http://gpu.example.net:11434"\n', encoding="utf-8")
    with pytest.raises(InvalidSetting, match=key):
        Config.load(tmp_path)  # a name other than localhost may resolve anywhere
    (tmp_path / "config.toml").write_text(
        f'{key} = "http://{ADDRESS}:11434"\nallow_cloud_model_access = true\n', encoding="utf-8"
    )
    assert getattr(Config.load(tmp_path), key) == f"http://{ADDRESS}:11434"  # the operator's opt-in


def test_an_ollama_embedder_off_this_machine_gets_nothing(off_machine, home, tmp_path):
    home.mkdir()
    (home / "config.toml").write_text(f'ollama_host = "http://{ADDRESS}:{off_machine.port}"\n', encoding="utf-8")
    write(tmp_path / "notes.md", "# Notes\n\nthe offsite canary paragraph\n")
    added = off_machine.run(home, "add", str(tmp_path / "notes.md"), provider="ollama")
    assert added.returncode == 2 and "ollama_host" in one_line(added.stderr)
    assert off_machine.requests() == []


def test_a_name_that_resolves_off_this_machine_at_connect_time_gets_nothing(off_machine, home, tmp_path):
    """``localhost`` passes the check at load; at connection it resolves to
    198.51.100.7, so the embedder, the reranker and the chat model all refuse
    to connect, and search and ask degrade with a reason."""
    local_name = f"http://localhost:{off_machine.port}"
    write(tmp_path / "docs" / "a.md", "# Alpha\n\nthe offsite canary alpha\n")
    write(tmp_path / "docs" / "b.md", "# Beta\n\nthe offsite canary beta\n")
    assert off_machine.run(home, "add", str(tmp_path / "docs")).returncode == 0  # hash embedder: no network
    (home / "config.toml").write_text(
        f'ollama_host = "{local_name}"\nreranker_url = "{local_name}"\nadaptive_reranking = false\n'
        'chat_model = "llama3.2"\n',
        encoding="utf-8",
    )

    searched = off_machine.run(home, "search", "offsite canary", "--json")
    assert searched.returncode == 0, searched.stderr
    assert "reranker_not_local" in json.loads(searched.stdout)["degraded"]

    asked = off_machine.run(home, "ask", "offsite canary?", "--json")
    assert asked.returncode == 1 and json.loads(asked.stdout)["status"] == "chat_model_not_local"

    embedded = off_machine.run(home, "-c", (
        "from kbtui.embedding import EmbeddingUnavailable\n"
        "from kbtui.embedding.ollama import OllamaEmbedder\n"
        f"embedder = OllamaEmbedder(host={local_name!r})\n"
        "try:\n"
        "    embedder.embed_documents(['the offsite canary chunk'])\n"
        "except EmbeddingUnavailable as failure:\n"
        "    print(failure.code, failure.retryable)\n"
    ))
    assert embedded.stdout.split() == ["embedder_not_local", "True"], embedded.stderr

    with_ollama = off_machine.run(home, "search", "offsite canary", "--json", provider="ollama")
    assert with_ollama.returncode == 0 and "embedder_unavailable" in json.loads(with_ollama.stdout)["degraded"]
    assert off_machine.requests() == []


def test_with_the_operators_opt_in_a_remote_model_is_used(off_machine, home, tmp_path):
    """The check is the gate, not a broken connection: opted in, the same server gets the query."""
    write(tmp_path / "docs" / "a.md", "# Alpha\n\nthe offsite alpha\n")
    write(tmp_path / "docs" / "b.md", "# Beta\n\nthe offsite beta\n")
    assert off_machine.run(home, "add", str(tmp_path / "docs")).returncode == 0
    (home / "config.toml").write_text(
        f'reranker_url = "http://{ADDRESS}:{off_machine.port}"\nadaptive_reranking = false\n'
        "allow_cloud_model_access = true\n",
        encoding="utf-8",
    )
    searched = off_machine.run(home, "search", "offsite", "--json")
    assert searched.returncode == 0, searched.stderr
    assert [r["path"] for r in off_machine.requests()] == ["/v1/rerank"]
