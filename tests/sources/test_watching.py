"""A running node keeps its sources in sync: saves under ``kbtui serve`` are
searchable within seconds, changes made while no node ran are picked up at
start, a Git source follows new commits, and a source that cannot be watched
is scanned periodically (and says so)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kbtui.sources.watch import counts_as_change, filesystem_type, watchable
from store.models import Chunk, Document
from tests.conftest import write
from tests.faults.processes import kbtui, kbtui_env
from tests.sources.conftest import GitTree

DEADLINE_S = 30.0


def wait_for(condition: Callable[[], bool], *, deadline_s: float = DEADLINE_S, what: str) -> float:
    """Poll ``condition`` until it holds; return how long it took."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < deadline_s, f"timed out waiting for {what}"
        time.sleep(0.1)
    return time.monotonic() - started


def searchable(home: Path, word: str) -> bool:
    result = kbtui(home, "search", word, "--json")
    return result.returncode == 0 and any(word in h["text"] for h in json.loads(result.stdout)["hits"])


def watch_states(home: Path) -> list[str]:
    return [s["watch"] for s in json.loads(kbtui(home, "sources", "--json").stdout)]


class Serving:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kbtui", "serve"], env=kbtui_env(home),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=60)


@pytest.fixture
def serve(home):
    started: list[Serving] = []

    def start() -> Serving:
        serving = Serving(home)
        started.append(serving)
        return serving

    yield start
    for serving in started:
        serving.stop()


@pytest.mark.timeout(120)
def test_a_save_under_a_running_node_is_searchable_within_seconds(home, tmp_path, serve):
    folder = tmp_path / "notes"
    write(folder / "plan.md", "# Plan\n\nthe first draft\n")
    assert kbtui(home, "add", str(folder)).returncode == 0
    serve()
    wait_for(lambda: watch_states(home) == ["events"], what="the node to watch the folder")

    write(folder / "plan.md", "# Plan\n\nthe okapiroute is final\n")
    took = wait_for(lambda: searchable(home, "okapiroute"), what="the edit to be searchable")
    assert took < 15
    write(folder / "new.md", "# New\n\na capybarafile appears\n")
    wait_for(lambda: searchable(home, "capybarafile"), what="a new file to be searchable")
    (folder / "plan.md").unlink()
    wait_for(lambda: not searchable(home, "okapiroute"), what="the deleted file to leave the index")
    assert [s["documents"] for s in json.loads(kbtui(home, "sources", "--json").stdout)] == [{"Indexed": 1}]


@pytest.mark.timeout(120)
def test_a_node_started_after_changes_picks_them_up(home, tmp_path, serve):
    folder = tmp_path / "notes"
    write(folder / "a.md", "# A\n\nthe old tapirword\n")
    write(folder / "b.md", "# B\n\nstays as it is\n")
    write(folder / "c.md", "# C\n\nto be deleted\n")
    assert kbtui(home, "add", str(folder)).returncode == 0
    # While no node runs: an edit, a new file, a deletion.
    write(folder / "a.md", "# A\n\nthe new markhorword\n")
    write(folder / "d.md", "# D\n\nthe serowword arrives\n")
    (folder / "c.md").unlink()

    serve()
    wait_for(lambda: searchable(home, "markhorword") and searchable(home, "serowword"), what="the catch-up scan")
    assert not searchable(home, "tapirword")
    listed = json.loads(kbtui(home, "ls", "--json").stdout)
    assert sorted((d["source_path"], d["status"]) for d in listed) == [
        ("a.md", "Indexed"), ("b.md", "Indexed"), ("d.md", "Indexed"),
    ]


@pytest.mark.timeout(120)
def test_a_git_source_follows_new_commits_on_its_branch(home, tmp_path, serve, isolated_git):
    tree = GitTree(tmp_path / "repo")
    tree.write("README.md", "# Repo\n\nfirst commit\n")
    tree.commit("first")
    assert kbtui(home, "add", str(tree.root)).returncode == 0
    assert json.loads(kbtui(home, "sources", "--json").stdout)[0]["kind"] == "git"
    serve()
    wait_for(lambda: watch_states(home) == ["events"], what="the node to watch the repository")

    tree.write("docs/release.md", "# Release\n\nthe gharialrelease is out\n")
    tree.commit("second")
    wait_for(lambda: searchable(home, "gharialrelease"), what="the new commit to be searchable")
    head = tree.git("rev-parse", "HEAD").strip()
    wait_for(lambda: json.loads(kbtui(home, "sources", "--json").stdout)[0]["last_commit"] == head,
             what="the scan to record the new commit")


@pytest.mark.timeout(120)
def test_a_source_that_cannot_be_watched_is_scanned_periodically_and_says_so(home, tmp_path, serve):
    home.mkdir(parents=True)
    (home / "config.toml").write_text('source_watch = "polling"\nsource_poll_interval_s = 1.0\n')
    folder = tmp_path / "share"
    write(folder / "a.md", "# A\n\nbefore\n")
    assert kbtui(home, "add", str(folder)).returncode == 0
    serve()
    wait_for(lambda: watch_states(home) == ["polling"], what="the node to poll the folder")
    assert "polling" in kbtui(home, "sources").stdout
    write(folder / "a.md", "# A\n\nthe dholeword after\n")
    wait_for(lambda: searchable(home, "dholeword"), what="the periodic scan")


def test_network_and_fuse_filesystems_are_not_trusted_for_events(tmp_path):
    mountinfo = (
        "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"
        "40 22 0:40 / /mnt/share rw,relatime - nfs4 server:/export rw\n"
        "41 22 0:41 / /mnt/ssh rw - fuse.sshfs host: rw\n"
        "42 22 0:42 / /mnt/with\\040space rw - cifs //host/s rw\n"
    )
    assert filesystem_type(Path("/home/op/notes"), mountinfo) == "ext4"
    assert filesystem_type(Path("/mnt/share/runbooks"), mountinfo) == "nfs4"
    assert not watchable(Path("/mnt/share/runbooks"), mountinfo)
    assert not watchable(Path("/mnt/ssh/x"), mountinfo)
    assert not watchable(Path("/mnt/with space/x"), mountinfo)
    assert watchable(Path("/mnt/shareholder"), mountinfo), "a prefix of a name is not its mount point"
    assert filesystem_type(tmp_path) is not None  # this machine's own table is read


def test_which_events_count_as_changes():
    home = "/data/kb"
    assert counts_as_change("/src/repo/docs/a.md", home)
    assert counts_as_change("/src/repo/.git/HEAD", home)
    assert counts_as_change("/src/repo/.git/refs/heads/main", home)
    assert not counts_as_change("/src/repo/.git/objects/ab/cdef", home)
    assert not counts_as_change("/src/repo/.git/index", home)
    assert not counts_as_change("/data/kb/blobs/x", home), "the knowledge base's own writes"
    assert not counts_as_change("/src/notes/.plan.md.swp", home)


def test_an_update_in_place_while_the_old_bytes_are_in_the_pipeline_wins(node, tmp_path):
    """The old version is being embedded when the file changes: the stale work
    must not commit over the update (nor leave the document stuck)."""
    folder = tmp_path / "notes"
    write(folder / "a.md", "# A\n\nthe stale ibexword\n")
    source = node.add_source(folder, "DEFAULT")
    embedding = threading.Event()
    release = threading.Event()
    inner = node.embedder

    class HeldEmbedder:
        def __getattr__(self, name):
            return getattr(inner, name)

        def embed_documents(self, texts):
            embedding.set()
            release.wait(30)
            return inner.embed_documents(texts)

    node.embedder = HeldEmbedder()
    with node.pipeline():
        assert embedding.wait(30), "the old bytes reached the embedder"
        write(folder / "a.md", "# A\n\nthe fresh oryxword\n")
        report = node.sync_source(source.row.source.id)
        assert report.updated.count == 1
        release.set()
        wait_for(lambda: _indexed_text(node) is not None and "oryxword" in _indexed_text(node),
                 what="the new bytes to be indexed")
    assert "ibexword" not in _indexed_text(node)


def _indexed_text(node) -> str | None:
    from store.db import thread_connection

    with thread_connection():
        document = Document.get_or_none(Document.source_path == "a.md")
        if document is None or document.status != "Indexed":
            return None
        return "\n".join(c.content for c in Chunk.select().where(Chunk.document == document.id))
