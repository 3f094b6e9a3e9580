"""Document detail (metadata, history, sections, chunks) and the sources screen."""

from __future__ import annotations

import asyncio
import subprocess

from textual.widgets import DataTable, Static, Tree

from kbtui.sources.repositories import register_repository
from kbtui.tui.screens.document import DocumentScreen
from kbtui.tui.screens.sources import NO_SOURCES, SourcesScreen
from kbtui.tui.widgets.path_input import PathInput
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


def test_detail_says_when_the_documents_encrypted_source_is_damaged(indexed_node, utc):
    tls = next(d.id for d in Document.select() if d.size_bytes > 1100)
    blob = indexed_node.config.home / "blobs" / tls
    sealed = bytearray(blob.read_bytes())
    sealed[-1] ^= 0x01
    blob.write_bytes(bytes(sealed))
    app = make_app(indexed_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(100, 30)):
            await wait_until(lambda: len(app.documents_screen.rows) == 6)
            app.open_document(tls)
            await wait_until(lambda: isinstance(app.screen, DocumentScreen) and app.screen.detail is not None)
            meta = str(app.screen.query_one("#document-meta", Static).content)
            assert "damaged" in meta and "fails authentication" in meta and "cannot be re-indexed" in meta

    asyncio.run(run())


def git(root, *args):
    subprocess.run(["git", "-c", "user.name=T", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false", *args],
                   cwd=root, check=True, capture_output=True)


def test_sync_a_registered_repository_and_see_its_changes(tui_node, tmp_path, monkeypatch):
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
            await wait_until(lambda: isinstance(app.screen, SourcesScreen))
            screen = app.screen
            table = screen.query_one("#sources-table", DataTable)
            await wait_until(lambda: table.row_count == 1)
            assert "ops" in str(table.get_row_at(0)[0]) and str(table.get_row_at(0)[1]) == "git"
            await pilot.press("s")
            await wait_until(lambda: screen.report is not None)
            report = screen.report
            assert (report.added.count, report.skipped["sensitive"].count) == (2, 1)
            summary = str(screen.query_one("#sources-summary", Static).content)
            assert summary.startswith("ops: 2 added, 1 skipped (1 sensitive) · 2 queued")
            changes = screen.query_one("#sources-changes", DataTable)
            await wait_until(lambda: changes.row_count == 3)
            rows = {str(changes.get_row_at(i)[1]): (str(changes.get_row_at(i)[0]), str(changes.get_row_at(i)[2]))
                    for i in range(3)}
            assert rows == {"README.md": ("added", ""), "docs/backup.md": ("added", ""), "id_rsa": ("skipped", "sensitive")}
            await wait_until(lambda: "2 indexed" in str(table.get_row_at(0)[3]))
            await pilot.press("escape")
            documents = app.documents_screen
            await wait_until(lambda: len(documents.rows) == 2 and all(r.status == "Indexed" for r in documents.rows.values()))
            assert sorted(r.source_path for r in documents.rows.values()) == ["README.md", "docs/backup.md"]

    asyncio.run(run())


def test_register_a_folder_from_the_sources_screen_and_watch_it_change(tui_node, tmp_path):
    folder = tmp_path / "runbooks"
    folder.mkdir()
    (folder / "restart.md").write_text("# Restart\n\nrestart it gently\n")
    (folder / "binary.txt").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00")
    app = make_app(tui_node, fast_options())

    async def run() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_until(lambda: app.mode == "node")
            await pilot.press("i")
            await wait_until(lambda: isinstance(app.screen, SourcesScreen))
            screen = app.screen
            assert NO_SOURCES in str(screen.query_one("#sources-summary", Static).content)
            await pilot.press("a")
            path_input = screen.query_one("#sources-add", PathInput)
            assert path_input.has_focus
            path_input.value = str(tmp_path / "run")
            await wait_until(lambda: path_input._suggestion == str(folder) + "/")  # read in a thread
            await pilot.press("tab")  # takes the completion
            assert path_input.value == str(folder) + "/"
            await pilot.press("enter")
            table = screen.query_one("#sources-table", DataTable)
            await wait_until(lambda: table.row_count == 1 and screen.report is not None)
            assert (screen.report.added.count, screen.report.skipped_count) == (1, 1)
            changes = screen.query_one("#sources-changes", DataTable)
            await wait_until(lambda: changes.row_count == 2)
            assert ("skipped", "binary_content") in {
                (str(changes.get_row_at(i)[0]), str(changes.get_row_at(i)[2])) for i in range(2)
            }
            # The node watches it now; a save shows up in the list by itself.
            await wait_until(lambda: str(table.get_row_at(0)[5]) == "events", timeout=20)
            (folder / "new.md").write_text("# New\n\na new runbook\n")
            await wait_until(lambda: "2 indexed" in str(table.get_row_at(0)[3]), timeout=20)
            await wait_until(lambda: any(str(changes.get_row_at(i)[1]) == "new.md" for i in range(changes.row_count)))
            await pilot.press("w")
            await wait_until(lambda: str(table.get_row_at(0)[5]) == "off")

    asyncio.run(run())
