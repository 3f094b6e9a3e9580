"""Document detail (metadata, history, sections, chunks) and the repository import screen."""

from __future__ import annotations

import asyncio
import subprocess

from textual.widgets import DataTable, OptionList, Static, Tree

from kbtui.sources.importer import register_repository
from kbtui.tui.screens.document import DocumentScreen
from kbtui.tui.screens.repository_import import ImportScreen
from store.models import Document
from tests.tui.conftest import fast_options, make_app, wait_until


def test_detail_shows_the_decrypted_name_history_sections_and_chunks(indexed_node, utc):
    tls = next(d.id for d in Document.select() if d.size_bytes > 1100)
    app = make_app(indexed_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_until(lambda: len(app.documents_screen.rows) == 6)
            app.open_document(tls)
            await wait_until(lambda: isinstance(app.screen, DocumentScreen) and app.screen.detail is not None)
            screen = app.screen
            meta = str(screen.query_one("#document-meta", Static).content)
            assert "tls-certificate-rotation.md" in meta  # decrypted for the operator
            assert "4 chunks · 4 sections" in meta
            history = screen.query_one("#document-history", DataTable)
            statuses = [str(history.get_row_at(i)[1]) for i in range(history.row_count)]
            assert statuses == ["Pending", "Extracting", "Chunking", "Embedding", "Indexed"]

            await pilot.press("2")
            tree = screen.query_one("#document-sections", Tree)
            top = tree.root.children[0]
            assert str(top.label).startswith("TLS certificate rotation")
            assert [str(c.label).split("  ")[0] for c in top.children] == ["When to rotate", "Procedure", "Verification"]

            await pilot.press("3")
            chunks = screen.query_one("#document-chunks", DataTable)
            assert chunks.row_count == 4
            kinds = [str(chunks.get_row_at(i)[1]) for i in range(4)]
            assert "list" in kinds
            assert str(chunks.get_row_at(0)[3]).count("–") == 1  # offsets start–end

    asyncio.run(run())


def git(root, *args):
    subprocess.run(["git", "-c", "user.name=T", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false", *args],
                   cwd=root, check=True, capture_output=True)


def test_import_a_registered_repository_and_watch_the_report(tui_node, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # no personal git config
    repo = tmp_path / "ops-repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "docs" / "backup.md").write_text("# Backups\n\nNightly backups run at 02:00.\n")
    (repo / "README.md").write_text("# Ops\n\nRunbooks for the on-call engineer.\n")
    (repo / "id_rsa").write_text("not really a key\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    register_repository(tui_node.store, repo, "ops")
    app = make_app(tui_node, fast_options())

    async def run() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_until(lambda: app.mode == "node")
            await pilot.press("i")
            await wait_until(lambda: isinstance(app.screen, ImportScreen))
            screen = app.screen
            repositories = screen.query_one("#import-repositories", OptionList)
            await wait_until(lambda: repositories.option_count == 1)
            assert "ops" in str(repositories.get_option_at_index(0).prompt)
            await pilot.press("enter")
            await wait_until(lambda: screen.report is not None)
            report = screen.report
            assert (report.added.count, report.skipped["sensitive"].count) == (2, 1)
            summary = str(screen.query_one("#import-summary", Static).content)
            assert summary.startswith("completed · 3 files listed into DEFAULT · 2 queued")
            await pilot.press("escape")
            documents = app.documents_screen
            await wait_until(lambda: len(documents.rows) == 2 and all(r.status == "Indexed" for r in documents.rows.values()))
            assert sorted(r.source_path for r in documents.rows.values()) == ["README.md", "docs/backup.md"]

    asyncio.run(run())
