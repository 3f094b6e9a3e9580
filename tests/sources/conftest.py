"""Real Git working trees built in the test, and a node whose embedder counts its calls."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from kbtui.cli.sources import index_pending
from kbtui.sources.repositories import import_repository, register_repository
from kbtui.sources.scan import ScanLimits
from kbtui.sources.sync import SyncReport

DEFAULT_LIMITS = ScanLimits(max_file_bytes=64 * 1024, max_total_bytes=16 * 1024 * 1024)


class GitTree:
    """A working tree on disk, driven with the real git binary."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        completed = subprocess.run(
            ["git", "-c", "user.name=Test", "-c", "user.email=test@example.invalid",
             "-c", "commit.gpgsign=false", *args],
            cwd=self.root, check=True, capture_output=True,
        )
        return completed.stdout.decode("utf-8", "replace")

    def path(self, relative: str | bytes) -> Path:
        return self.root / (os.fsdecode(relative) if isinstance(relative, bytes) else relative)

    def write(self, relative: str | bytes, content: str | bytes) -> Path:
        path = self.path(relative)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
        return path

    def commit(self, message: str = "change") -> None:
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)


class CountingEmbedder:
    """Delegates to the real embedder and counts what it was asked to embed."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.calls = 0
        self.texts = 0

    @property
    def identity(self):
        return self.inner.identity

    @property
    def identity_confident(self) -> bool:
        return self.inner.identity_confident

    def refresh_identity(self):
        return self.inner.refresh_identity()

    @property
    def context_window(self):
        return self.inner.context_window

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.texts += len(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)


@pytest.fixture(autouse=True)
def isolated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No personal git config (global excludes, hooks, identity) leaks into a test."""
    home = tmp_path / "git-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


@pytest.fixture
def tree(tmp_path: Path) -> GitTree:
    return GitTree(tmp_path / "repo")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside every repository, holding a secret file."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.md").write_text("# Outside\n\nthe outsidecanary must never be imported\n")
    return path


@pytest.fixture
def counting_node(node):
    node.embedder = CountingEmbedder(node.embedder)
    return node


def register(node, tree: GitTree, name: str | None = None) -> str:
    return register_repository(node.store, tree.root, name).id


def import_and_index(node, repository_id: str, collection: str = "DEFAULT", *,
                     limits: ScanLimits = DEFAULT_LIMITS, **kwargs) -> SyncReport:
    """What ``kbtui import`` does: the scan, then the pipeline for what it left Pending."""
    report = import_repository(node.store, repository_id, collection, limits, purge=node.purge, **kwargs)
    index_pending(node, report.pending_document_ids, quiet=True)
    return report


def skipped(report: SyncReport) -> dict[str, int]:
    return {reason: tally.count for reason, tally in report.skipped.items()}


def outcomes(report: SyncReport) -> dict[str, tuple[str, str | None]]:
    return {f.path: (f.outcome, f.reason) for f in report.files}
