"""Fixtures for the agent tools: documents really added, encrypted and indexed."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import pytest

from kbtui.collections import canonical_collection_id
from kbtui.extract import format_for
from kbtui.node import Node
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
        collection_id, fmt = canonical_collection_id(collection), format_for(name) or "text"
        if source_path is None:
            path = write(tmp_path / "incoming" / str(next(counter)) / name, text)
            document_id = node.store.catalog.add_document(collection_id, path, display_name=name, fmt=fmt).document_id
        else:
            data = text.encode()
            document_id = node.store.catalog.create_document(
                collection_id, io.BytesIO(data), content_hash=hashlib.sha256(data).hexdigest(), display_name=name,
                fmt=fmt, source_path=source_path,
            )
        assert node.ingest(document_id) == "Indexed"
        return document_id

    return add


@pytest.fixture
def ollama_server():
    """A loopback HTTP server speaking Ollama's /api/chat, scripted per test."""
    server = ScriptedOllama()
    server.start()
    yield server
    server.stop()
