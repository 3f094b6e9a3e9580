"""Running ``kbtui`` as a real process, also on a read-only view of its data directory."""

from __future__ import annotations

import functools
import os
import shlex
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def kbtui_env(home: Path) -> dict[str, str]:
    return {**os.environ, "KBTUI_HOME": str(home), "KBTUI_EMBEDDING_PROVIDER": "hash"}


def kbtui(home: Path, *args: str, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    """``kbtui ARGS`` in a child process on the data directory ``home``."""
    return subprocess.run(
        [sys.executable, "-m", "kbtui", *args],
        env=kbtui_env(home), capture_output=True, text=True, timeout=timeout, **kwargs,
    )


def one_line(stderr: str) -> str:
    """The single line a failing command printed (asserting it is one line, no traceback)."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith("kbtui: "), stderr
    return lines[0]


@functools.cache
def _mount_namespace_prefix() -> tuple[str, ...] | None:
    """How to get a private mount namespace where a bind mount may be made
    read-only: ``unshare -m`` as root, ``unshare -rm`` (a user namespace) as an
    unprivileged user; None when neither works here."""
    with tempfile.TemporaryDirectory() as probe:
        script = f"mount --bind -o ro {shlex.quote(probe)} {shlex.quote(probe)} && ! touch {shlex.quote(probe)}/w"
        for prefix in (("unshare", "-m"), ("unshare", "-rm")):
            try:
                done = subprocess.run([*prefix, "sh", "-c", script], capture_output=True, timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                continue
            if done.returncode == 0:
                return prefix
    return None


class ReadOnlyView:
    """Runs kbtui where ``target`` (the data directory, or a part of it) is read-only.

    Preferably a real read-only bind mount, made in a private mount namespace
    of the child process only (nothing leaks into the host's mounts). Where
    that is impossible and we are not root, ``target`` is made 0555 and its
    files 0444 instead (as root, permission bits would not stop a write).
    """

    def __init__(self, home: Path, target: Path) -> None:
        self.home, self.target = home, target
        self.prefix = _mount_namespace_prefix()
        if self.prefix is None and os.geteuid() == 0:
            pytest.skip("no way to make a read-only directory here (root, and no mount namespace)")
        self.how = "bind mount" if self.prefix else "permissions"

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        if self.prefix is None:
            return kbtui(self.home, *args, timeout=timeout)
        target = shlex.quote(str(self.target))
        command = shlex.join([sys.executable, "-m", "kbtui", *args])
        script = f"mount --bind -o ro {target} {target} && exec {command}"
        return subprocess.run(
            [*self.prefix, "sh", "-c", script],
            env=kbtui_env(self.home), capture_output=True, text=True, timeout=timeout,
        )


@contextmanager
def read_only(home: Path, target: Path | None = None) -> Iterator[ReadOnlyView]:
    view = ReadOnlyView(home, target or home)
    if view.prefix is not None:
        yield view
        return
    modes = {path: stat.S_IMODE(path.stat().st_mode) for path in [view.target, *view.target.rglob("*")]}
    for path in modes:
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        yield view
    finally:
        for path, mode in modes.items():
            path.chmod(mode)
