"""Fixtures for the agent tools: documents really added, encrypted and indexed."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbtui.collections import canonical_collection_id
from kbtui.extract import format_for
from kbtui.node import Node
from store import catalog
from store.models import Document
from tests.conftest import write
from tests.tools.scripted_ollama import ScriptedOllama


@pytest.fixture
def add_document(node: Node, tmp_path: Path):
    """Add ``text`` as a file named ``name`` and index it; returns the document id.

    ``source_path`` makes it look like a repository document (a relative path
    that results may show), which uploads never have.
    """
    counter = iter(range(1_000_000))

    def add(name: str, text: str, *, collection: str = "DEFAULT", source_path: str | None = None) -> str:
        path = write(tmp_path / "incoming" / str(next(counter)) / name, text)
        outcome = catalog.add_document(
            node.store, canonical_collection_id(collection), path,
            display_name=name, fmt=format_for(name) or "text",
        )
        if source_path is not None:
            Document.update(source_path=source_path).where(Document.id == outcome.document_id).execute()
        assert node.ingest(outcome.document_id) == "Indexed"
        return outcome.document_id

    return add


@pytest.fixture
def ollama_server():
    """A loopback HTTP server speaking Ollama's /api/chat, scripted per test."""
    server = ScriptedOllama()
    server.start()
    yield server
    server.stop()
