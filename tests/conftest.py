"""Shared fixtures: a fresh data directory per test, and the CLI run in-process."""

from __future__ import annotations

import dataclasses
import logging
import os
import traceback
from dataclasses import dataclass
from pathlib import Path

import pykka
import pytest

from kbtui.cli import main
from kbtui.config import Config
from kbtui.node import Node
from tests.postgres_server import postgres_server, postgres_url  # noqa: F401 - fixtures for every test

# Tests put this marker in document text, file names, repository paths and
# queries (e.g. "envcanary", "zqxcanary7731"). No log record of any test, and
# no log file of any data directory a test used, may ever contain it.
CANARY_MARK = "canary"


class _CanaryWatch(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.leaks: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record still gets checked
            text = f"{record.msg} {record.args}"
        if record.exc_info:
            text += "".join(traceback.format_exception(*record.exc_info))
        if CANARY_MARK in text.lower():
            self.leaks.append(f"{record.name} at {record.levelname}")


@pytest.fixture(autouse=True)
def no_text_reaches_any_log():
    """Invariant 1, across the whole suite, with every logger at DEBUG."""
    watch = _CanaryWatch()
    root = logging.getLogger()
    loggers = [root] + [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)]
    levels = {logger: logger.level for logger in loggers}
    for logger in loggers:
        logger.setLevel(logging.DEBUG)
    root.addHandler(watch)
    try:
        yield
    finally:
        root.removeHandler(watch)
        for logger, level in levels.items():
            logger.setLevel(level)
    assert not watch.leaks, f"a log record carried test text: {watch.leaks}"


@pytest.fixture
def everything_at_debug(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Every logger at DEBUG (and the node's log file too), for the tests that look for leaked text."""
    monkeypatch.setenv("KBTUI_LOG_LEVEL", "DEBUG")
    caplog.set_level(logging.DEBUG)
    for name in list(logging.root.manager.loggerDict):
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


# KBTUI_TEST_STORE=postgresql runs the tests that go through the node on the
# PostgreSQL store: each test's knowledge base is then a fresh database of the
# suite's PostgreSQL server, selected through KBTUI_DATABASE_URL as an
# operator would (the Makefile's test target runs the directories listed in
# the README this way).
TEST_STORE_ENV = "KBTUI_TEST_STORE"


def on_postgres() -> bool:
    return os.environ.get(TEST_STORE_ENV, "sqlite").strip().lower() == "postgresql"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest):
    """An empty data directory, selected through ``KBTUI_HOME`` as an operator would
    (and, with ``KBTUI_TEST_STORE=postgresql``, an empty PostgreSQL database)."""
    path = tmp_path / "kbhome"
    monkeypatch.setenv("KBTUI_HOME", str(path))
    monkeypatch.setenv("KBTUI_EMBEDDING_PROVIDER", "hash")
    if on_postgres():
        monkeypatch.setenv("KBTUI_DATABASE_URL", request.getfixturevalue("postgres_url"))
    else:
        monkeypatch.delenv("KBTUI_DATABASE_URL", raising=False)
    yield path
    for log_file in (path / "logs").glob("*.log*"):
        assert CANARY_MARK not in log_file.read_text(errors="replace").lower(), "a log file carried test text"


@pytest.fixture
def node(home: Path):
    opened = Node.open(Config.load(home))
    yield opened
    opened.close()


@pytest.fixture
def make_node(home):
    """Open a node on the test's data directory with config overrides; actors stopped after."""
    opened: list[Node] = []

    def make(**overrides: object) -> Node:
        config = dataclasses.replace(Config.load(home), **overrides)
        node = Node.open(config)
        opened.append(node)
        return node

    yield make
    pykka.ActorRegistry.stop_all()
    for node in opened:
        node.close()


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
