"""The terminal UI over a real SSH session, the way an operator reaches a node:
an sshd of the test's own (its own config, host key and authorized key, on a
loopback port), ``ssh -t`` inside tmux, then add, search, the reader and quit,
and afterwards a terminal that is sane again (echo and canonical mode back,
the alternate screen left). Skipped only where sshd or tmux is not installed
(``make setup`` and ``.ci/run`` install both)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.tui.conftest import copy_examples
from tests.tui.test_tmux_smoke import Tmux

SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)
pytestmark = [
    pytest.mark.skipif(SSHD is None, reason="sshd is not installed (openssh-server)"),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]
REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_sshd(directory: Path) -> tuple[subprocess.Popen, int, Path]:
    """An sshd on a loopback port that lets this user in with a key made here."""
    directory.mkdir()
    host_key, user_key = directory / "host_key", directory / "user_key"
    for key in (host_key, user_key):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    authorized = directory / "authorized_keys"
    shutil.copy(user_key.with_suffix(".pub"), authorized)
    authorized.chmod(0o600)
    port = free_port()
    config = directory / "sshd_config"
    config.write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {host_key}", f"AuthorizedKeysFile {authorized}",
        f"PidFile {directory / 'sshd.pid'}", "StrictModes no", "UsePAM no", "PasswordAuthentication no",
        "KbdInteractiveAuthentication no", "PermitRootLogin prohibit-password", "PrintMotd no", "PrintLastLog no",
        "LogLevel ERROR", "",
    ]))
    # The privilege separation directory sshd insists on (it is gone after a reboot of a container).
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return process, port, user_key
        except OSError:
            if process.poll() is not None:
                raise AssertionError(f"sshd did not start: {process.stderr.read() if process.stderr else ''}") from None
            assert time.monotonic() < deadline, "sshd did not listen in time"
            time.sleep(0.1)


def test_add_search_read_and_quit_over_ssh_leave_a_sane_terminal(tmp_path):
    corpus = copy_examples(tmp_path / "corpus")
    home = tmp_path / "kbhome"
    sshd, port, user_key = start_sshd(tmp_path / "ssh")
    remote_env = {
        "KBTUI_HOME": str(home), "KBTUI_EMBEDDING_PROVIDER": "hash", "LANG": "C.UTF-8",
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
    }
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in remote_env.items())
    # On the far side: kbtui, then what the terminal looks like once it has left, then wait (the pane stays).
    remote = (f"cd {shlex.quote(str(REPO))} && env {exports} {shlex.quote(sys.executable)} -m kbtui; "
              "echo KBTUI_EXIT=$?; stty -a | tr '\\n' ' '; echo; echo STTY_DONE; sleep 60")
    ssh = [
        "ssh", "-t", "-p", str(port), "-i", str(user_key), "-o", "StrictHostKeyChecking=no",
        "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "BatchMode=yes",
        "127.0.0.1", remote,
    ]
    tmux = Tmux(tmp_path / "tmux.sock", f"kbtui-ssh-{uuid.uuid4().hex[:8]}")
    tmux.start(shlex.join(ssh), width=80, height=24)
    try:
        first = tmux.wait_for(lambda s: "● node DEFAULT" in s, timeout=60)
        assert "No documents yet" in first

        tmux.keys("a")
        tmux.wait_for(lambda s: "Add documents" in s)
        tmux.type(str(corpus) + "/")
        tmux.keys("Enter")
        tmux.wait_for(lambda s: "All 6 · Indexed 6" in s, timeout=60)

        tmux.keys("/")
        tmux.wait_for(lambda s: "Search DEFAULT" in s)
        tmux.type("restore the database")
        tmux.wait_for(lambda s: "hits in DEFAULT" in s)
        tmux.keys("Down")
        tmux.wait_for(lambda s: "1. PostgreSQL backup and restore" in s)
        tmux.keys("v")
        reader = tmux.wait_for(lambda s: re.search(r"match \d+/\d+ \(n/N\)", s))
        assert "Point-in-time recovery" in reader.splitlines()[-2]  # the status line: the section of the match

        tmux.keys("Escape")
        tmux.wait_for(lambda s: "hits in DEFAULT" in s)
        tmux.keys("Escape")
        tmux.wait_for(lambda s: "● node DEFAULT" in s)
        tmux.keys("q")
        after = tmux.wait_for(lambda s: "STTY_DONE" in s, timeout=60)
        assert "KBTUI_EXIT=0" in after
        settings = after.split("KBTUI_EXIT=0", 1)[1].split()
        assert "echo" in settings and "icanon" in settings and "isig" in settings  # not -echo, -icanon, -isig
        assert tmux.run("display-message", "-p", "-t", tmux.name, "#{alternate_on}").strip() == "0"
        assert tmux.run("display-message", "-p", "-t", tmux.name, "#{cursor_flag}").strip() == "1"  # cursor shown
    finally:
        tmux.kill()
        sshd.terminate()
        sshd.wait(timeout=10)
