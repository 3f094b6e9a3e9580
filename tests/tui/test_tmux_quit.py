"""Quitting while the local model embeds, in a real terminal (issue 20, finding 1).

The first ``q`` must say at once what is draining; the second must leave
within two seconds with exit status 0 (never an abort from an inference
thread); the documents left mid-stage show as interrupted and the next start
indexes them.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.tui.test_tmux_smoke import Tmux

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

ROOT = Path(__file__).resolve().parents[2]
WORDS = ("rotate backup restore certificate kernel network volume snapshot replica cluster "
         "schedule retention journal checkpoint failover quorum ledger archive index shard").split()


def write_corpus(folder: Path, documents: int = 30, paragraphs: int = 40) -> Path:
    """Plain-text documents long enough that the local model takes a while over them."""
    folder.mkdir(parents=True)
    for number in range(documents):
        lines = []
        for paragraph in range(paragraphs):
            words = [WORDS[(number * 7 + paragraph * 3 + i) % len(WORDS)] for i in range(40)]
            lines.append(f"Section {paragraph} of note {number}: " + " ".join(words) + ".")
        (folder / f"note-{number:02d}.txt").write_text("\n\n".join(lines), encoding="utf-8")
    return folder


def toast_text(screen: str) -> str:
    """The words of the notifications: the part of each line right of a toast's edge."""
    return " ".join(" ".join(line.rsplit("▌", 1)[1].split()) for line in screen.splitlines() if "▌" in line)


def wait_for(predicate, *, timeout: float, step: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            return None
        time.sleep(step)


def test_q_during_ingestion_says_what_drains_and_q_again_leaves_cleanly(tmp_path):
    corpus = write_corpus(tmp_path / "corpus")
    home = tmp_path / "kbhome"
    done = tmp_path / "exit-code"
    env = {
        "KBTUI_HOME": str(home), "KBTUI_EMBEDDING_PROVIDER": "local", "TERM": "xterm-256color",
        "PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "LANG": "C.UTF-8",
    }
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())

    def start(name: str) -> Tmux:
        done.unlink(missing_ok=True)
        command = f"env -i {exports} {shlex.quote(sys.executable)} -m kbtui; echo $? > {shlex.quote(str(done))}"
        tmux = Tmux(tmp_path / f"{name}.sock", f"kbtui-{uuid.uuid4().hex[:8]}")
        tmux.start(f"cd {shlex.quote(str(ROOT))} && {command}")
        return tmux

    def status() -> dict:
        listed = subprocess.run([sys.executable, "-m", "kbtui", "status", "--json"], env={**os.environ, **env},
                                capture_output=True, text=True, timeout=60)
        return json.loads(listed.stdout)

    tmux = start("first")
    try:
        tmux.wait_for(lambda s: "● node DEFAULT" in s)
        tmux.keys("a")
        tmux.wait_for(lambda s: "Add documents" in s)
        tmux.type(str(corpus) + "/")
        tmux.keys("Enter")
        tmux.wait_for(lambda s: re.search(r"Embedding \d", s) is not None, timeout=90)

        pressed = time.monotonic()
        tmux.keys("q")
        notice = wait_for(lambda: "Stopping the node" in (shown := toast_text(tmux.screen())) and shown, timeout=3)
        assert notice, "no quit notice:\n" + tmux.screen()
        assert time.monotonic() - pressed < 1.0
        assert "in flight" in notice and "q again" in notice

        pressed = time.monotonic()
        tmux.keys("q")
        assert wait_for(lambda: done.exists() and done.read_text().strip(), timeout=5), "the UI did not leave"
        assert time.monotonic() - pressed < 2.0
        assert done.read_text().strip() == "0"
    finally:
        tmux.kill()

    left = status()
    assert left["node_running"] is False
    assert left["interrupted"], left  # documents mid-stage, said to resume at the next start
    indexed_before = left["documents"].get("Indexed", 0)

    tmux = start("second")
    try:
        tmux.wait_for(lambda s: "● node DEFAULT" in s)
        # The next start picks them up: more documents get indexed, none stays interrupted.
        assert wait_for(lambda: status()["documents"].get("Indexed", 0) > indexed_before, timeout=120, step=1)
        tmux.keys("q")
        tmux.wait_for(lambda s: "Stopping the node" in s or done.exists(), timeout=5)
        if not done.exists():
            tmux.keys("q")
        assert wait_for(lambda: done.exists() and done.read_text().strip(), timeout=10)
        assert done.read_text().strip() == "0"
    finally:
        tmux.kill()
