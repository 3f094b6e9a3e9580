"""Migration 6 turns registered repositories into Git sources and keeps every document.

The data directory is made the way the previous kbtui made it: the catalog at
schema 5 (repository + repository_document), a repository imported into two
collections, one registered but never imported, and an upload. Then today's
kbtui opens it.
"""

from __future__ import annotations

import hashlib
import io
import time
import uuid

import pytest

from kbtui.config import Config
from kbtui.node import Node
from kbtui.sources.repositories import import_repository
from store import migrations, open_store
from store.blobs import seal_name
from store.catalog import create_document
from store.db import database
from store.sources import root_digest
from tests.sources.conftest import DEFAULT_LIMITS, GitTree, isolated_git  # noqa: F401 - the fixture, used by name


@pytest.fixture
def schema_5(monkeypatch):
    """Migrations stop at 5, as in the kbtui before sources."""
    older = [m for m in migrations._migrations() if m[0] <= 5]
    monkeypatch.setattr(migrations, "_migrations", lambda: older)
    monkeypatch.setattr(migrations, "LATEST_VERSION", 5)
    from store import opening

    monkeypatch.setattr(opening, "LATEST_VERSION", 5)


def _register_repository(store, root: str, name: str, *, imported: bool) -> str:
    """What store/repositories.register_repository (and record_import) wrote."""
    repository_id = uuid.uuid4().hex
    with database.atomic():
        database.execute_sql(
            "INSERT INTO repository(id, name, root_path, root_digest, created_at, last_import_at, last_import_status)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (repository_id, seal_name(store.node_key, f"repository-name:{repository_id}", name),
             seal_name(store.node_key, f"repository-root:{repository_id}", root),
             root_digest(store.node_key, root), time.time(), time.time() if imported else None,
             "completed" if imported else None),
        )
    return repository_id


def _imported(store, repository_id: str, collection: str, path: str, data: bytes) -> str:
    def link(document_id: str) -> None:
        database.execute_sql(
            "INSERT INTO repository_document(document_id, repository_id) VALUES (?, ?)", (document_id, repository_id)
        )

    return create_document(
        store, collection, io.BytesIO(data), content_hash=hashlib.sha256(data).hexdigest(),
        display_name=path, fmt="markdown", source_path=path, also=link,
    )


@pytest.mark.usefixtures("isolated_git")
def test_repositories_become_git_sources_and_every_document_stays(home, tmp_path, schema_5, monkeypatch):
    tree = GitTree(tmp_path / "repo")
    tree.write("a.md", "# A\n\nalpha\n")
    tree.write("b.md", "# B\n\nbravo\n")
    tree.commit()
    store = open_store(home)
    try:
        imported = _register_repository(store, str(tree.root.resolve()), "runbooks", imported=True)
        never = _register_repository(store, str(tmp_path / "elsewhere"), "later", imported=False)
        ids = {
            ("OPS", "a.md"): _imported(store, imported, "OPS", "a.md", b"# A\n\nalpha\n"),
            ("OPS", "b.md"): _imported(store, imported, "OPS", "b.md", b"# B\n\nbravo\n"),
            ("TWO", "a.md"): _imported(store, imported, "TWO", "a.md", b"# A\n\nalpha\n"),
        }
        upload = create_document(store, "DEFAULT", io.BytesIO(b"upload"), content_hash=hashlib.sha256(b"upload").hexdigest(),
                                 display_name="u.txt", fmt="text")
    finally:
        store.close()
    monkeypatch.undo()  # today's kbtui, all migrations

    node = Node.open(Config.load(home))
    try:
        sources = {row.source.id: row for row in node.sources()}
        assert set(sources) == {imported, never}
        assert (sources[imported].source.kind, sources[imported].source.collection_id) == ("git", "OPS")
        assert sources[imported].source.name == "runbooks" and sources[imported].counts == {"Pending": 2}
        assert (sources[never].source.collection_id, sources[never].source.last_scan_at) == ("DEFAULT", None)
        assert {d.document_id for d in node.documents()} == {*ids.values(), upload}

        # The same repository into TWO: its own source there adopts the document, adds nothing twice.
        report = import_repository(node.store, imported, "TWO", DEFAULT_LIMITS, purge=node.purge)
        outcomes = {f.path: (f.outcome, f.document_id) for f in report.files}
        assert outcomes["a.md"] == ("unchanged", ids[("TWO", "a.md")])
        assert outcomes["b.md"][0] == "added"
        # And into OPS, as before the upgrade: nothing changed.
        again = import_repository(node.store, imported, "OPS", DEFAULT_LIMITS, purge=node.purge)
        assert again.unchanged.count == 2 and again.added.count == 0
    finally:
        node.close()
