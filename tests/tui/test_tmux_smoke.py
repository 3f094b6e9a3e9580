"""The real program in a real terminal: ``kbtui`` in a detached tmux session at
80x24 on a temp data dir, driven by keys, read back with ``capture-pane``."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.tui.conftest import copy_examples

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Tmux:
    """One detached tmux session on its own server socket."""

    def __init__(self, socket: Path, name: str) -> None:
        self.base = ["tmux", "-S", str(socket)]
        self.name = name

    def run(self, *args: str) -> str:
        return subprocess.run([*self.base, *args], check=True, capture_output=True, text=True).stdout

    def start(self, command: str, *, width: int = 80, height: int = 24) -> None:
        self.run("new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height), command)

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", self.name, *keys)

    def type(self, text: str) -> None:
        self.run("send-keys", "-t", self.name, "-l", text)

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", self.name)

    def wait_for(self, predicate, *, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            shown = self.screen()
            if predicate(shown):
                return shown
            if time.monotonic() > deadline:
                raise AssertionError("the screen never showed it; last screen:\n" + shown)
            time.sleep(0.2)

    def alive(self) -> bool:
        return subprocess.run([*self.base, "has-session", "-t", self.name], capture_output=True).returncode == 0

    def kill(self) -> None:
        subprocess.run([*self.base, "kill-server"], capture_output=True)


def test_add_the_sample_corpus_and_search_it_over_a_terminal(tmp_path):
    corpus = copy_examples(tmp_path / "corpus")
    home = tmp_path / "kbhome"
    done = tmp_path / "exit-code"
    env = {
        "KBTUI_HOME": str(home), "KBTUI_EMBEDDING_PROVIDER": "hash", "TERM": "xterm-256color",
        "PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "LANG": "C.UTF-8",
    }
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    command = f"env -i {exports} {shlex.quote(sys.executable)} -m kbtui; echo $? > {shlex.quote(str(done))}"
    tmux = Tmux(tmp_path / "tmux.sock", f"kbtui-{uuid.uuid4().hex[:8]}")
    tmux.start(f"cd {shlex.quote(str(Path(__file__).resolve().parents[2]))} && {command}")
    try:
        first = tmux.wait_for(lambda s: "● node DEFAULT" in s)
        assert "No documents yet. Press a to add" in first

        tmux.keys("a")
        tmux.wait_for(lambda s: "Add documents" in s)
        tmux.type(str(corpus) + "/")
        tmux.keys("Enter")
        shown = tmux.wait_for(lambda s: "All 6 · Indexed 6" in s and s.count("Indexed") >= 7)
        assert "ssh-hardening.md" in shown and "6 added" in shown

        tmux.keys("/")
        tmux.wait_for(lambda s: "Search DEFAULT" in s)
        tmux.type("rotate tls certificates")
        shown = tmux.wait_for(lambda s: "hits in DEFAULT" in s)
        lines = shown.splitlines()
        assert lines[1].strip() == "rotate tls certificates"
        assert lines[3].strip().startswith("1. TLS certificate rotation")
        assert "tls-certificate-rotation.md · Fusion" in lines[4]

        tmux.keys("Down")  # into the results
        time.sleep(0.3)
        tmux.keys("Enter")
        shown = tmux.wait_for(lambda s: "this hit · chunk" in s)
        assert "neighbour · chunk" in shown

        tmux.keys("Escape")
        tmux.wait_for(lambda s: "hits in DEFAULT" in s)
        tmux.keys("Escape")
        tmux.wait_for(lambda s: "● node DEFAULT" in s)
        tmux.keys("q")
        deadline = time.monotonic() + 30
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert done.read_text().strip() == "0"
    finally:
        tmux.kill()


def test_under_a_c_locale_everything_on_screen_is_ascii(indexed_template, tmp_path):
    home = tmp_path / "kbhome"
    shutil.copytree(indexed_template, home)
    env = {"KBTUI_HOME": str(home), "KBTUI_EMBEDDING_PROVIDER": "hash", "TERM": "xterm-256color",
           "PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "LANG": "C"}
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    tmux = Tmux(tmp_path / "tmux.sock", f"kbtui-c-{uuid.uuid4().hex[:8]}")
    tmux.start(f"cd {shlex.quote(str(Path(__file__).resolve().parents[2]))} && "
               f"env -i {exports} {shlex.quote(sys.executable)} -m kbtui", width=60, height=20)
    try:
        shown = tmux.wait_for(lambda s: "* node DEFAULT" in s and "Indexed 6" in s)
        assert shown.isascii() and "|" in shown.splitlines()[0]  # the header's separators, not a replacement
        tmux.keys("?")
        shown = tmux.wait_for(lambda s: "Keys: Documents" in s)
        assert shown.isascii() and "#- Keys: Documents -" in shown  # the thick frame, drawn in ASCII
        tmux.keys("Escape", "q")
    finally:
        tmux.kill()
