"""Fixtures for actor tests: a real node on a file database, real actors."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from actors.events import AdmissionChanged, DocumentStatusChanged
from actors.listener import EventListener
from kbtui.embedding import EmbeddingUnavailable
from kbtui.embedding.hashing import HashEmbedder
from kbtui.node import Node
from store import catalog
from store.models import Document


class Recorder(EventListener):
    """A listener that keeps every event it is told about."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[object] = []

    def on_document_status_changed(self, event: DocumentStatusChanged) -> None:
        self.events.append(event)

    def on_admission_changed(self, event: AdmissionChanged) -> None:
        self.events.append(event)

    def on_command(self, message: object) -> object:
        if message == "events":
            return list(self.events)
        return super().on_command(message)


class ControlledEmbedder:
    """The real hash embedder behind a switch: it can be held, made to fail, and counted."""

    def __init__(self) -> None:
        self.inner = HashEmbedder()
        self.calls: list[int] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.down = False
        self.confident = True

    @property
    def identity(self):
        return self.inner.identity

    @property
    def identity_confident(self) -> bool:
        return self.confident

    def refresh_identity(self):
        return self.inner.identity

    @property
    def context_window(self):
        return None

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.entered.set()
        self.gate.wait(timeout=30)
        if self.down:
            raise EmbeddingUnavailable("embedder_unavailable", "provider down", retryable=True)
        self.calls.append(len(texts))
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)


def add_documents(node: Node, tmp_path, count: int, *, collection: str = "DEFAULT", words: int = 30) -> list[str]:
    ids = []
    for i in range(count):
        path = tmp_path / "docs" / f"doc{i:05d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        body = " ".join(f"word{(i * 7 + j) % 997}" for j in range(words))
        path.write_text(f"# Document {i}\n\nunique{i} {body}\n")
        ids.append(catalog.add_document(node.store, collection, path, display_name=path.name, fmt="markdown").document_id)
    return ids


def wait_until(predicate: Callable[[], bool], timeout: float = 60.0, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError("condition not reached in time")


def statuses(ids: Sequence[str]) -> dict[str, str]:
    return {d.id: d.status for d in Document.select(Document.id, Document.status).where(Document.id.in_(list(ids)))}


def all_indexed(ids: Sequence[str]) -> Callable[[], bool]:
    return lambda: set(statuses(ids).values()) == {"Indexed"}
