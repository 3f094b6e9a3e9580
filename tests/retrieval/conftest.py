"""Fixtures: a real node with documents ingested through the real stages."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbtui.extract import format_for


def add_and_index(node, tmp_path: Path, name: str, text: str, collection: str = "DEFAULT") -> str:
    """Write ``text`` to a file, add it to ``collection`` and index it; return its document id."""
    path = tmp_path / "sources" / collection / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    outcome = node.store.catalog.add_document(collection, path, display_name=name, fmt=format_for(name) or "text")
    assert node.ingest(outcome.document_id) == "Indexed"
    return outcome.document_id


@pytest.fixture
def indexed(node, tmp_path):
    def add(name: str, text: str, collection: str = "DEFAULT") -> str:
        return add_and_index(node, tmp_path, name, text, collection)

    return add
