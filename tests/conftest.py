"""Shared fixtures: a fresh data directory per test, and the CLI run in-process."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import pytest

from kbtui.cli import main
from kbtui.config import Config
from kbtui.node import Node


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty data directory, selected through ``KBTUI_HOME`` as an operator would."""
    path = tmp_path / "kbhome"
    monkeypatch.setenv("KBTUI_HOME", str(path))
    monkeypatch.setenv("KBTUI_EMBEDDING_PROVIDER", "hash")
    return path


@pytest.fixture
def node(home: Path):
    opened = Node.open(Config.load(home))
    yield opened
    opened.close()


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def run_cli(home: Path, capsys: pytest.CaptureFixture[str]):
    """Run ``kbtui ARGS`` in this process and return its exit code and output."""

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            _drop_kbtui_log_handlers()
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


def _drop_kbtui_log_handlers() -> None:
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_kbtui", False):
            root.removeHandler(handler)
            handler.close()


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
