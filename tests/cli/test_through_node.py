"""The CLI through a running node's API, and in-process: the same output either
way; the node's warm search (and reranker); in-process again when the node
stops mid-command."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.api.serving import kbtui, kbtui_env, start_node, wait_for
from tests.conftest import write
from tests.retrieval.test_rerank import RerankServer

IN_PROCESS = {"KBTUI_NODE_API": "off"}


def _stable(text: str) -> str:
    """Output with what legitimately differs between two runs masked: timings."""
    text = re.sub(r"\d+ hits in \d+ ms", "N hits in T ms", text)
    text = re.sub(r'"(elapsed_ms|written_at|[a-z_]+_ms)": [0-9.e+-]+', r'"\1": T', text)
    return re.sub(r"\d+(\.\d+)? ms", "T ms", text)


@pytest.fixture
def corpus(home, tmp_path):
    docs = tmp_path / "docs"
    write(docs / "tls.md",
          "# TLS\n\n## Rotation\n\nrotate the certificates every ninety days\n\n## Pinning\n\nclients pin intermediates")
    write(docs / "backup.md", "# Backups\n\nthe nightly backup streams to the archive; restore to a point in time")
    write(docs / "notes.txt", "on-call notes: rotate the pager, check the archive")
    added = kbtui(home, "add", str(docs), "--json")
    assert added.returncode == 0, added.stderr
    return docs, [d["document_id"] for d in json.loads(added.stdout)]


def test_every_command_prints_the_same_through_the_node_and_in_process(home, corpus, tmp_path):
    docs, ids = corpus
    repo = tmp_path / "repo"
    write(repo / "guide.md", "# Guide\n\nthe wombat procedure")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    assert kbtui(home, "repo", "add", str(repo), "--name", "guides").returncode == 0
    node = start_node(home)
    try:
        commands = [
            ("ls",), ("ls", "--json"), ("ls", "--status", "Indexed"), ("ls", "-c", "NOPE"),
            ("show", ids[0][:8]), ("show", ids[0], "--json"), ("show", "ffffff"),
            ("search", "rotate certificates"), ("search", "rotate", "--json"), ("search", "archive", "--explain"),
            ("search", "archive", "--neighbors", "--json", "--explain"), ("search", "pinning", "-d", ids[0][:8]),
            ("search", "x", "-c", "bad collection!"),
            ("add", str(docs)), ("add", str(docs), "--json"), ("add", str(docs / "missing.md")),
            ("reindex", ids[1][:8]),
            ("repo", "ls"), ("repo", "ls", "--json"), ("sources",), ("sources", "--json"),
            ("status",), ("status", "--json"),
        ]
        for command in commands:
            calls = node.api_calls()
            through_node = kbtui(home, *command)
            # Bad arguments stop in the face itself, before any use case.
            refused_in_the_face = command in (("search", "x", "-c", "bad collection!"), ("add", str(docs / "missing.md")))
            assert node.api_calls() > calls or refused_in_the_face, command
            in_process = kbtui(home, *command, **IN_PROCESS)
            assert (through_node.returncode, _stable(through_node.stdout), _stable(through_node.stderr)) == (
                in_process.returncode, _stable(in_process.stdout), _stable(in_process.stderr)), command

        # Commands that change something, run once each way on equal things.
        first, second = kbtui(home, "rm", ids[1]), kbtui(home, "rm", ids[2], **IN_PROCESS)
        removed = re.compile(r"^removed [0-9a-f]{32} \S+$")  # "removed ID NAME", nothing else
        assert (first.returncode, second.returncode) == (0, 0)
        assert removed.match(first.stdout.strip()) and removed.match(second.stdout.strip())
        imported = kbtui(home, "import", "guides", "-c", "DOCS", "--json")
        assert imported.returncode == 0 and json.loads(imported.stdout)["added"]["count"] == 1
        again = kbtui(home, "import", "guides", "-c", "DOCS", "--json", **IN_PROCESS)
        assert json.loads(again.stdout)["unchanged"]["count"] == 1
        assert "POST import_repository" in node.log()
        synced = kbtui(home, "sync", "--json")
        assert synced.returncode == 0 and "POST sync_source" in node.log()
        assert {report["kind"] for report in json.loads(synced.stdout)} == {"folder", "git"}
    finally:
        node.stop()


def test_kbtui_search_is_warm_through_the_node(home, corpus):
    node = start_node(home)
    try:
        kbtui(home, "search", "warm up")
        started = time.perf_counter()
        answer = kbtui(home, "search", "rotate certificates", "--json")
        wall_ms = (time.perf_counter() - started) * 1000
        assert answer.returncode == 0
        assert "POST search" in node.log()
        assert json.loads(answer.stdout)["hits"][0]["heading_path"].startswith("TLS")
        assert wall_ms < 5000  # a sanity bound for a loaded machine; benchmarks/cli_search.py measures
    finally:
        node.stop()


def test_the_cli_reranks_through_the_node_with_the_real_embedder(home, tmp_path):
    """The issue's case: with the local model, a new process spends the rerank budget
    loading it; through the node the model is warm and the search reranks."""
    server = RerankServer()
    server.favourite = "archive"
    local = {"KBTUI_EMBEDDING_PROVIDER": "local"}
    write(tmp_path / "docs" / "backup.md", "# Backups\n\nthe nightly backup streams to the archive")
    write(tmp_path / "docs" / "notes.txt", "on-call notes: rotate the pager")
    write(tmp_path / "docs" / "tls.md", "# TLS\n\nrotate the certificates; the archive of old ones is kept")
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    # Not adaptive: these few documents would often let the arms agree and skip the rerank.
    (home / "config.toml").write_text(f'reranker_url = "{server.url}"\nadaptive_reranking = false\n')
    assert kbtui(home, "add", str(tmp_path / "docs"), **local).returncode == 0
    process = subprocess.Popen([sys.executable, "-m", "kbtui", "serve"], env=kbtui_env(home, **local),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: (home / "api.sock").exists(), what="the node")

        def reranked():
            answer = json.loads(kbtui(home, "search", "the archive", "--json", **local).stdout)
            return answer if answer["hits"] and answer["hits"][0]["score_kind"] == "Rerank" else None

        answer = wait_for(reranked, timeout=90, interval=0.5, what="a search reranked by the node")
        assert not [d for d in answer["degraded"] if d.startswith("reranker")]
        assert "archive" in answer["hits"][0]["text"]
        assert server.requests  # the node's search asked the reranker
    finally:
        process.terminate()
        process.wait(timeout=60)
        server.stop()


def _indexed_count(home) -> int:
    with sqlite3.connect(f"file:{home / 'kb.sqlite3'}?mode=ro", uri=True) as db:
        return db.execute("SELECT count(*) FROM document WHERE status = 'Indexed'").fetchone()[0]


def test_the_cli_finishes_in_process_when_the_node_stops_mid_command(home, tmp_path):
    node = start_node(home, config="max_in_flight = 1\nadmission_queue_capacity = 4\n")
    paths = [write(tmp_path / "many" / f"d{i:03}.md", f"# D{i}\n\nbody {i} " + "word " * 400) for i in range(80)]
    add = subprocess.Popen([sys.executable, "-m", "kbtui", "add", str(paths[0].parent)], env=kbtui_env(home),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # The node took the add and the command follows its event stream (the node's
        # drain sweep may start on the rows before the add's answer is even logged).
        wait_for(lambda: "POST add_documents" in node.log() and "GET events" in node.log(), timeout=120,
                 what="the add handed to the node")
        wait_for(lambda: _indexed_count(home) >= 3, timeout=120, what="the node indexing the add")
        assert _indexed_count(home) < 80
        node.stop(signal.SIGKILL)  # mid-command, without a goodbye
        out, err = add.communicate(timeout=300)
    finally:
        if add.poll() is None:
            add.kill()
    assert add.returncode == 0, err
    said = " ".join(out.split())
    assert "many (folder) -> DEFAULT: 80 added" in said and "80 indexed, 0 failed" in said
    assert _indexed_count(home) == 80


def test_mcp_uses_the_running_node(home, corpus):
    from tests.tools.test_mcp_server import _session_calls

    node = start_node(home)
    try:
        import asyncio

        _listed, (found,) = asyncio.run(_session_calls(home, [("search_knowledge_base", {"query": "rotate certificates"})]))
        assert found.structured_content["hits"] and "POST search" in node.log()
    finally:
        node.stop()


def test_status_follow_prints_the_node_s_events_until_it_stops(home, tmp_path):
    node = start_node(home)
    follow = subprocess.Popen([sys.executable, "-m", "kbtui", "status", "--follow", "--json"], env=kbtui_env(home),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        status = json.loads(follow.stdout.readline())
        assert status["node_running"] is True and status["queue"]["pid"] == node.process.pid
        added = kbtui(home, "add", str(write(tmp_path / "a.md", "# A\n\nthe quokka runbook")), "--json")
        document_id = json.loads(added.stdout)[0]["document_id"]
        statuses = []
        for line in follow.stdout:
            event = json.loads(line)
            if event["event"] == "document_status_changed" and event["document_id"] == document_id:
                statuses.append(event["status"])
                if event["status"] == "Indexed":
                    break
        assert statuses == ["Extracting", "Chunking", "Embedding", "Indexed"]
        node.stop()
        rest = [json.loads(line) for line in follow.stdout]
        assert rest[-1] == {"event": "node_stopped"}
        assert follow.wait(timeout=60) == 0
    finally:
        if follow.poll() is None:
            follow.kill()
        node.stop()
    # With no node, it prints the status and returns: there is nothing to follow.
    alone = kbtui(home, "status", "--follow")
    assert alone.returncode == 0 and "node: not running" in alone.stdout
