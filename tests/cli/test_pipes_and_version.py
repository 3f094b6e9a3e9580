"""The CLI in pipes: a reader that stops early is not a failure, search hits are
tab-separated lines, --version says what runs; and kbtui search through a
running node answers before anything heavy is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from store.migrations import LATEST_VERSION
from tests.api.serving import kbtui, kbtui_env, start_node
from tests.conftest import write

HEAVY = ("click", "rich", "store.catalog", "peewee", "numpy", "h11", "kbtui.node")


@pytest.fixture
def corpus(home, tmp_path):
    docs = tmp_path / "docs"
    write(docs / "tls.md", "# TLS\n\n## Rotation\n\nrotate the certificates\nevery ninety days\n\n## Pinning\n\npin them")
    write(docs / "backup.md", "# Backups\n\nthe nightly backup streams to the archive; rotate the tapes")
    for n in range(12):
        write(docs / f"runbook-{n:02}.md", f"# Runbook {n}\n\n" + "rotate the keys and the logs. " * 40)
    added = kbtui(home, "add", str(docs))
    assert added.returncode == 0, added.stderr
    return docs


def into_a_closed_pipe(home, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``kbtui ARGS`` writing into a pipe whose reader has already gone."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", "kbtui", *args], env=kbtui_env(home, **env), stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)


def test_a_reader_that_goes_away_is_not_a_failure(home, corpus):
    for args in (("search", "rotate"), ("search", "rotate", "--json"), ("ls",)):
        gone = into_a_closed_pipe(home, *args, KBTUI_NODE_API="off")
        assert (gone.returncode, gone.stderr) == (0, ""), args
    node = start_node(home)
    try:
        for args in (("search", "rotate"), ("search", "rotate", "--json")):
            gone = into_a_closed_pipe(home, *args)
            assert (gone.returncode, gone.stderr) == (0, ""), args
        piped = subprocess.run(["bash", "-o", "pipefail", "-c", f"{sys.executable} -m kbtui search rotate --chunks "
                                "-n 200 | head -1"], env=kbtui_env(home), capture_output=True, text=True, timeout=120)
        assert piped.returncode == 0 and piped.stdout.startswith("rank\t") and piped.stderr == ""
    finally:
        node.stop()


def test_search_in_a_pipe_is_one_tab_separated_line_per_hit(home, corpus):
    for env in ({"KBTUI_NODE_API": "off"}, {}):
        node = start_node(home) if not env else None
        try:
            found = kbtui(home, "search", "rotate certificates", **env)
        finally:
            if node is not None:
                node.stop()
        assert found.returncode == 0, found.stderr
        lines = found.stdout.splitlines()
        assert lines[0].split("\t") == ["rank", "relevance", "score", "score_kind", "document_id", "collection",
                                        "source", "page", "heading", "text"]
        rows = [line.split("\t") for line in lines[1:]]
        assert rows and all(len(row) == 10 for row in rows)
        first = rows[0]
        assert first[0] == "1" and len(first[4]) == 32 and first[5] == "DEFAULT" and first[6] == "tls.md"
        assert first[9] == "rotate the certificates every ninety days"  # its line break is a space: one line a hit


def test_version_says_the_version_the_schema_and_the_model(home):
    shown = kbtui(home, "--version")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [
        "kbtui 0.1.0", f"catalog schema {LATEST_VERSION}", "embedding model hash:feature-hash@v1:native:256",
    ]
    assert not home.exists()  # it opened nothing


def test_search_through_a_node_imports_nothing_heavy_and_says_the_same(home, corpus):
    in_process = kbtui(home, "search", "rotate", "--json", KBTUI_NODE_API="off")
    node = start_node(home)
    try:
        traced = subprocess.run([sys.executable, "-X", "importtime", "-m", "kbtui", "search", "rotate", "--json"],
                                env=kbtui_env(home), capture_output=True, text=True, timeout=120)
        tsv = kbtui(home, "search", "rotate")
    finally:
        node.stop()
    assert traced.returncode == 0
    imported = {line.rsplit("|", 1)[-1].strip() for line in traced.stderr.splitlines() if "|" in line}
    assert "kbtui.cli.fast" in imported and not imported & set(HEAVY)
    answer, expected = json.loads(traced.stdout), json.loads(in_process.stdout)
    for response in (answer, expected):
        response["elapsed_ms"] = 0
    assert answer == expected
    assert tsv.stdout == kbtui(home, "search", "rotate", KBTUI_NODE_API="off").stdout
