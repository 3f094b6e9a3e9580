"""Importing a real Git working tree: what gets in, what is skipped, what a re-import does."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from kbtui.errors import KbtuiError, NotFound
from kbtui.sources.git import NotAGitTopLevel
from kbtui.sources.repositories import import_repository, register_repository
from kbtui.sources.scan import ScanLimits
from kbtui.sources.sync import SyncFailed as ImportFailed
from kbtui.sources.sync import SyncInProgress as ImportInProgress
from kbtui.sources.sync import _exclusive_sync as _exclusive_import
from store import sources
from store.catalog import set_status
from store.errors import SourceAlreadyRegistered as RepositoryAlreadyRegistered
from store.models import Chunk, Document, Status, StatusHistory
from tests.sources.conftest import DEFAULT_LIMITS, GitTree, import_and_index, outcomes, register, skipped


def rows() -> dict[str, Document]:
    return {d.source_path: d for d in Document.select().where(Document.source_path.is_null(False))}


def chunk_text() -> str:
    return "\n".join(c.content for c in Chunk.select())


# ---------------------------------------------------------------- registration


def test_only_a_git_top_level_can_be_registered(node, tree, tmp_path):
    tree.write("docs/a.md", "# A\n")
    tree.commit()
    plain = tmp_path / "plain"
    plain.mkdir()
    bare = tmp_path / "bare.git"
    GitTree(tmp_path / "seed").git("clone", "-q", "--bare", str(tree.root), str(bare))
    for folder in (plain, tree.root / "docs", bare, tmp_path / "missing", tree.root / "docs" / "a.md"):
        with pytest.raises(NotAGitTopLevel):
            register_repository(node.store, folder)
    registered = register_repository(node.store, tree.root)
    assert registered.name == "repo" and registered.root == str(tree.root.resolve())
    with pytest.raises(RepositoryAlreadyRegistered):
        register_repository(node.store, tree.root, "another-name")
    assert [r.id for r in sources.list_sources(node.store)] == [registered.id]


def test_the_root_and_name_are_stored_encrypted(node, tree):
    tree.commit()
    register_repository(node.store, tree.root, "payroll-zzsecret")
    raw = node.store.db.execute_sql("SELECT name, root_path, root_digest FROM source").fetchone()
    dump = b"".join(bytes(v) if isinstance(v, (bytes, memoryview)) else v.encode() for v in raw)
    assert b"payroll-zzsecret" not in dump and str(tree.root).encode() not in dump


@pytest.mark.parametrize("name", ["", "   ", "two\nlines", "evil\u202eexe", "x" * 101])
def test_a_bad_repository_name_is_refused(node, tree, name):
    tree.commit()
    with pytest.raises(KbtuiError):
        register_repository(node.store, tree.root, name)
    assert sources.list_sources(node.store) == []


def test_the_registration_is_checked_again_at_every_import(node, tree):
    tree.write("a.md", "# A\n\nalpha\n")
    tree.commit()
    repo_id = register(node, tree)
    import_and_index(node, repo_id)
    shutil.rmtree(tree.root / ".git")  # no longer a working tree
    tree.path("a.md").unlink()
    with pytest.raises(NotAGitTopLevel):
        import_repository(node.store, repo_id, "DEFAULT", DEFAULT_LIMITS, purge=node.purge)
    assert set(rows()) == {"a.md"}, "a failed validation purges nothing"
    assert sources.get_source(node.store, repo_id).last_scan_status == "failed"


def test_a_registered_folder_replaced_by_a_symlink_is_refused(node, tree, tmp_path):
    tree.write("a.md", "# A\n")
    tree.commit()
    repo_id = register(node, tree)
    elsewhere = GitTree(tmp_path / "elsewhere")
    elsewhere.write("b.md", "# B\n")
    elsewhere.commit()
    tree.root.rename(tmp_path / "moved")
    tree.root.symlink_to(elsewhere.root)
    with pytest.raises(NotAGitTopLevel):
        import_repository(node.store, repo_id, "DEFAULT", DEFAULT_LIMITS, purge=node.purge)
    assert rows() == {}


# ---------------------------------------------------------------- the first import


def test_first_import_takes_only_safe_supported_files(counting_node, tree, outside):
    node = counting_node
    tree.write(".gitignore", "ignored.md\nlogs/\n")
    tree.write("README", "plain text readme\n")
    tree.write("docs/guide.md", "# Guide\n\nhow to rotate the flux capacitor\n")
    tree.write("docs/notes.txt", "notes about the warp core\n")
    tree.write(".env", "API_TOKEN=envcanary\n")
    tree.write(".env.local", "API_TOKEN=envcanary\n")
    tree.write("config/prod.env", "API_TOKEN=envcanary\n")
    tree.write("id_rsa", "-----BEGIN OPENSSH PRIVATE KEY-----\nkeycanary\n")
    tree.write("certs/server.pem", "-----BEGIN CERTIFICATE-----\nkeycanary\n")
    tree.write("certs/server.key", "keycanary\n")
    tree.write(".ssh/config.md", "keycanary\n")
    tree.write("node_modules/pkg/readme.md", "# vendored\n\ngeneratedcanary\n")
    tree.write("build/out.md", "generatedcanary\n")
    tree.write("pkg/__pycache__/notes.txt", "generatedcanary\n")
    tree.write("env/pyvenv.cfg", "home = /usr/bin\n")
    tree.write("env/lib/README.md", "generatedcanary\n")
    tree.write("picture.gif", b"GIF89a")
    tree.write("data.txt", b"looks like text\x00\x01\x02 but is not")
    tree.write("empty.md", "")
    tree.write("huge.md", "x" * (DEFAULT_LIMITS.max_file_bytes + 1))
    tree.write("ignored.md", "ignoredcanary\n")
    tree.write("logs/run.log", "ignoredcanary\n")
    tree.commit("first")
    (tree.root / "escape.md").symlink_to(outside / "secret.md")
    (tree.root / "escape-dir").symlink_to(outside, target_is_directory=True)
    tree.write("untracked.md", "# Untracked\n\nnot yet committed but not ignored\n")

    report = import_and_index(node, register(node, tree))

    assert report.status == "completed"
    assert set(rows()) == {"README", "docs/guide.md", "docs/notes.txt", "untracked.md"}
    assert report.added.count == 4 and report.added.bytes == sum(d.size_bytes for d in rows().values())
    assert (report.updated.count, report.unchanged.count, report.removed.count) == (0, 0, 0)
    assert skipped(report) == {
        "sensitive": 7,  # .env, .env.local, prod.env, id_rsa, server.pem, server.key, .ssh/config.md
        # node_modules, build, __pycache__, and both files of a virtualenv (known by its pyvenv.cfg)
        "generated": 5,
        "unsupported_format": 2,  # .gitignore, picture.gif
        "binary_content": 1,  # data.txt: content decides, not the name
        "empty": 1,
        "too_large": 1,
        "symlink": 2,
        "gitignored": 2,  # ignored.md and logs/ (a directory counts once)
    }
    assert report.skipped["too_large"].bytes == DEFAULT_LIMITS.max_file_bytes + 1
    assert outcomes(report)["escape.md"] == ("skipped", "symlink")
    assert {d.status for d in rows().values()} == {"Indexed"}
    text = chunk_text()
    assert "flux capacitor" in text and "warp core" in text
    for canary in ("envcanary", "keycanary", "generatedcanary", "ignoredcanary", "outsidecanary"):
        assert canary not in text
    assert node.embedder.calls > 0


def test_rows_keep_relative_paths_only(node, tree):
    tree.write("a/b/c.md", "# Deep\n\ndeep text\n")
    tree.commit()
    import_and_index(node, register(node, tree))
    document = rows()["a/b/c.md"]
    assert not document.source_path.startswith("/")
    assert str(tree.root) not in document.source_path
    assert {c.source_path for c in Chunk.select()} == {"a/b/c.md"}
    # The operator sees the relative path as the document's name.
    assert node.display_names([document.id]) == {document.id: "a/b/c.md"}


# ---------------------------------------------------------------- re-imports


def test_a_second_import_without_change_embeds_nothing(counting_node, tree):
    node = counting_node
    tree.write("a.md", "# A\n\nalpha\n")
    tree.write("b/b.md", "# B\n\nbravo\n")
    tree.commit()
    repo_id = register(node, tree)
    first = import_and_index(node, repo_id)
    assert first.added.count == 2
    calls_after_first = node.embedder.calls
    history_after_first = StatusHistory.select().count()
    before = {p: (d.id, d.updated_at, d.status) for p, d in rows().items()}

    second = import_and_index(node, repo_id)

    assert second.status == "completed"
    assert (second.added.count, second.updated.count, second.removed.count) == (0, 0, 0)
    assert second.unchanged.count == 2 and second.unchanged.bytes == first.added.bytes
    assert second.pending_document_ids == ()
    assert node.embedder.calls == calls_after_first, "an unchanged repository embeds nothing"
    assert StatusHistory.select().count() == history_after_first, "nothing was re-queued"
    assert {p: (d.id, d.updated_at, d.status) for p, d in rows().items()} == before


def test_a_changed_path_is_updated_in_place(counting_node, tree):
    node = counting_node
    tree.write("a.md", "# A\n\nthe old zephyr wording\n")
    tree.write("b.md", "# B\n\nbravo stays\n")
    tree.commit()
    repo_id = register(node, tree)
    import_and_index(node, repo_id)
    old = rows()["a.md"]
    node.embedder.calls = node.embedder.texts = 0

    tree.write("a.md", "# A\n\nthe new quasar wording\n")
    tree.commit()
    report = import_and_index(node, repo_id)

    assert (report.updated.count, report.unchanged.count, report.added.count) == (1, 1, 0)
    assert outcomes(report)["a.md"] == ("updated", None)
    new = rows()["a.md"]
    assert new.id == old.id and new.content_hash != old.content_hash and new.status == "Indexed"
    assert node.embedder.texts == new.chunk_count, "only the changed document was embedded"
    text = chunk_text()
    assert "quasar" in text and "zephyr" not in text
    assert node.store.blobs.read_bytes(new.id) == tree.path("a.md").read_bytes()


def test_renames_move_the_document_and_deletes_are_purged_after_a_completed_scan(counting_node, tree):
    node = counting_node
    tree.write("old-name.md", "# Moving\n\nthe file that moves\n")
    tree.write("doomed.md", "# Doomed\n\ndeleted soon\n")
    tree.write("kept.md", "# Kept\n\nstays\n")
    tree.commit()
    repo_id = register(node, tree)
    import_and_index(node, repo_id)
    doomed = rows()["doomed.md"]
    moving = rows()["old-name.md"]
    node.embedder.calls = node.embedder.texts = 0

    tree.git("mv", "old-name.md", "new-name.md")
    tree.git("rm", "-q", "doomed.md")
    tree.commit("rename and delete")
    report = import_and_index(node, repo_id)

    assert set(rows()) == {"new-name.md", "kept.md"}
    assert outcomes(report) == {
        "new-name.md": ("renamed", None),
        "kept.md": ("unchanged", None),
        "doomed.md": ("removed", None),
    }
    assert [f.previous_path for f in report.files if f.outcome == "renamed"] == ["old-name.md"]
    assert report.removed.count == 1 and report.renamed.count == 1
    moved = rows()["new-name.md"]
    assert moved.id == moving.id and moved.status == "Indexed", "the rename moved the document itself"
    assert {c.source_path for c in Chunk.select().where(Chunk.document == moved.id)} == {"new-name.md"}
    assert node.embedder.texts == 0, "a rename embeds nothing"
    assert {h.source_path for h in node.search("new-name", "DEFAULT").hits} >= {"new-name.md"}
    assert not node.store.blobs.path_for(doomed.id).exists()
    assert "deleted soon" not in chunk_text()


def test_a_reimport_that_removes_a_file_leaves_no_label_in_the_vector_index(node, tree):
    """Through the node's use cases, as every face runs an import: the chunks of a
    removed file leave the open ANN index at once, not at the next start."""
    tree.write("doomed.md", "# Doomed\n\ndeleted soon, with words of its own\n")
    tree.write("kept.md", "# Kept\n\nstays where it is\n")
    tree.commit()
    repo_id = node.register_repository(tree.root).id
    node.index_and_follow(node.import_repository(repo_id, "DEFAULT").pending_document_ids, show_progress=False)
    doomed = rows()["doomed.md"]
    doomed_chunks = {c.id for c in Chunk.select(Chunk.id).where(Chunk.document == doomed.id)}
    assert node.search("deleted soon", "DEFAULT").hits  # the vector arm opened the ANN index
    index = node.store.vectors.index_for(doomed.vector_identity, doomed.vector_dim)
    assert index.ready and doomed_chunks <= index.consistency().index_ids

    tree.git("rm", "-q", "doomed.md")
    tree.commit("delete")
    report = node.import_repository(repo_id, "DEFAULT")

    assert report.removed.count == 1
    consistency = index.consistency()
    assert consistency.consistent and not doomed_chunks & consistency.index_ids
    assert {h.document_id for h in node.search("deleted soon", "DEFAULT").hits} == {rows()["kept.md"].id}


def test_a_file_that_becomes_ineligible_is_removed(node, tree):
    tree.write("notes.md", "# Notes\n\nsmall now\n")
    tree.commit()
    repo_id = register(node, tree)
    import_and_index(node, repo_id)
    tree.write("notes.md", "y" * (DEFAULT_LIMITS.max_file_bytes + 1))
    tree.commit()
    report = import_and_index(node, repo_id)
    assert [(f.path, f.outcome, f.reason) for f in report.files] == [
        ("notes.md", "skipped", "too_large"),
        ("notes.md", "removed", None),
    ]
    assert skipped(report) == {"too_large": 1} and report.removed.count == 1
    assert rows() == {}


def test_identical_bytes_at_two_paths_are_two_documents(node, tree):
    tree.write("one/same.md", "# Same\n\nidentical bytes\n")
    tree.write("two/same.md", "# Same\n\nidentical bytes\n")
    tree.commit()
    report = import_and_index(node, register(node, tree))
    assert report.added.count == 2
    documents = rows()
    assert documents["one/same.md"].id != documents["two/same.md"].id
    assert documents["one/same.md"].content_hash == documents["two/same.md"].content_hash
    assert {c.source_path for c in Chunk.select()} == {"one/same.md", "two/same.md"}


def test_a_scan_that_fails_part_way_purges_nothing(node, tree):
    for name in ("a.md", "b.md", "c.md"):
        tree.write(name, f"# {name}\n\ntext of {name}\n")
    tree.commit()
    repo_id = register(node, tree)
    import_and_index(node, repo_id)
    tree.git("rm", "-q", "a.md")
    tree.write("b.md", "# b\n\nchanged b\n")
    tree.write("d.md", "# d\n\nnew d\n")
    tree.commit()

    def fail_at_c(source_path: str) -> None:
        if source_path == "c.md":
            raise OSError(28, "No space left on device")

    with pytest.raises(ImportFailed) as failure:
        import_repository(node.store, repo_id, "DEFAULT", DEFAULT_LIMITS, purge=node.purge, before_open=fail_at_c)

    report = failure.value.report
    assert report.status == "failed" and report.removed.count == 0
    assert "OSError" in failure.value.message and "c.md" not in failure.value.message
    assert outcomes(report) == {"b.md": ("updated", None)}
    assert set(rows()) == {"a.md", "b.md", "c.md"}, "a.md is gone from the tree but must not be purged"
    assert sources.get_source(node.store, repo_id).last_scan_status == "failed"

    again = import_and_index(node, repo_id)
    assert again.status == "completed" and set(rows()) == {"b.md", "c.md", "d.md"}


def test_the_aggregate_limit_stops_the_scan_and_purges_nothing(node, tree):
    for name in ("a.md", "b.md", "c.md", "d.md"):
        tree.write(name, name[0] * 99 + "\n")  # 100 bytes each
    tree.commit()
    repo_id = register(node, tree)
    import_and_index(node, repo_id)
    tree.git("rm", "-q", "d.md")
    tree.write("a.md", "A" * 99 + "\n")
    tree.commit()

    report = import_and_index(node, repo_id, limits=ScanLimits(max_file_bytes=1000, max_total_bytes=250))

    assert report.status == "incomplete"
    assert outcomes(report) == {
        "a.md": ("updated", None),
        "b.md": ("unchanged", None),
        "c.md": ("skipped", "aggregate_limit"),
    }
    assert report.skipped["aggregate_limit"].bytes == 100
    assert set(rows()) == {"a.md", "b.md", "c.md", "d.md"}, "an incomplete scan purges nothing"


def test_the_per_file_limit_is_exact_and_a_sparse_giant_is_never_read(node, tree, monkeypatch):
    from store.files import SourceFile

    bytes_read: list[int] = []
    real_read = SourceFile.read

    def recording_read(self: SourceFile, size: int = -1) -> bytes:
        data = real_read(self, size)
        opened = Path(os.readlink(f"/proc/self/fd/{self.fd}"))
        if opened.is_relative_to(tree.root) and ".git" not in opened.parts:  # not git's own config files
            bytes_read.append(len(data))
        return data

    monkeypatch.setattr(SourceFile, "read", recording_read)
    limit = 4096
    tree.write("exact.md", "e" * limit)
    tree.write("over.md", "o" * (limit + 1))
    tree.commit()
    with open(tree.path("sparse.md"), "wb") as handle:
        handle.truncate(64 << 30)  # 64 GiB of holes: reading it would never finish
    report = import_and_index(node, register(node, tree), limits=ScanLimits(limit, 1 << 20))
    assert outcomes(report) == {
        "exact.md": ("added", None),
        "over.md": ("skipped", "too_large"),
        "sparse.md": ("skipped", "too_large"),
    }
    assert report.skipped["too_large"].bytes == (limit + 1) + (64 << 30)
    assert report.status == "completed"
    assert sum(bytes_read) == limit, "only the file within the limit was read, and boundedly"


def test_import_takes_a_registered_id_never_a_path(node, tree):
    tree.write("a.md", "# A\n")
    tree.commit()
    register(node, tree)
    with pytest.raises(NotFound):
        sources.resolve_source(node.store, str(tree.root))
    with pytest.raises(NotFound):
        import_repository(node.store, str(tree.root), "DEFAULT", DEFAULT_LIMITS, purge=node.purge)


def test_two_imports_of_one_repository_never_run_at_once(node, tree):
    tree.write("a.md", "# A\n")
    tree.commit()
    repo_id = register(node, tree)
    with _exclusive_import(node.store.home, repo_id):
        with pytest.raises(ImportInProgress):
            import_repository(node.store, repo_id, "DEFAULT", DEFAULT_LIMITS, purge=node.purge)
    assert import_repository(node.store, repo_id, "DEFAULT", DEFAULT_LIMITS, purge=node.purge).added.count == 1


# ---------------------------------------------------------------- collections and ownership


def test_two_repositories_in_one_collection_each_keep_their_own_path(node, tree, tmp_path):
    tree.write("README.md", "# First\n\nfirst repository\n")
    tree.commit()
    other = GitTree(tmp_path / "other")
    other.write("README.md", "# Second\n\nsecond repository\n")
    other.write("own.md", "# Own\n\nonly in the second\n")
    other.commit()
    first_id, second_id = register(node, tree), register(node, other)
    import_and_index(node, first_id)
    report = import_and_index(node, second_id)
    # Identity is (source, path): both READMEs are documents, neither takes the other over.
    assert outcomes(report) == {"README.md": ("added", None), "own.md": ("added", None)}
    assert "first repository" in chunk_text() and "second repository" in chunk_text()
    readmes = Document.select().where(Document.source_path == "README.md")
    assert {d.source_id for d in readmes} == {first_id, second_id}
    # The first repository's next import neither sees nor purges the second's documents.
    again = import_and_index(node, first_id)
    assert again.removed.count == 0 and again.unchanged.count == 1
    assert Document.select().count() == 3
    # Into its own collection the second repository imports everything again.
    separate = import_and_index(node, second_id, "SECOND")
    assert separate.added.count == 2


def test_repositories_in_two_collections_are_purged_separately(node, tree):
    tree.write("a.md", "# A\n\nalpha\n")
    tree.commit()
    repo_id = register(node, tree)
    import_and_index(node, repo_id, "ONE")
    import_and_index(node, repo_id, "TWO")
    tree.git("rm", "-q", "a.md")
    tree.commit()
    assert import_and_index(node, repo_id, "ONE").removed.count == 1
    assert [d.collection_id for d in rows().values()] == ["TWO"]


def test_unregistering_keeps_or_purges_the_documents(node, tree, tmp_path):
    tree.write("a.md", "# A\n\nalpha\n")
    tree.commit()
    repo_id = register(node, tree)
    import_and_index(node, repo_id)
    assert sources.unregister_source(node.store, repo_id) == 0
    assert set(rows()) == {"a.md"}
    # Registered again, the repository adopts its unowned documents instead of duplicating them.
    again = register(node, tree)
    report = import_and_index(node, again)
    assert outcomes(report) == {"a.md": ("unchanged", None)}
    assert sum(sources.document_counts(again)[again].values()) == 1
    assert sources.unregister_source(node.store, again, purge=node.purge) == 1
    assert rows() == {} and node.store.blobs.blob_ids() == set()


def test_the_knowledge_base_inside_the_tree_is_never_imported(tree, monkeypatch):
    from kbtui.config import Config
    from kbtui.node import Node

    home = tree.root / "kb-data"
    monkeypatch.setenv("KBTUI_HOME", str(home))
    node = Node.open(Config.load(home))
    try:
        tree.write("a.md", "# A\n\nalpha\n")
        tree.commit()
        (home / "logs").mkdir(exist_ok=True)
        (home / "logs" / "kbtui.log").write_text("a log line\n")
        report = import_and_index(node, register(node, tree))
        assert set(rows()) == {"a.md"}
        assert skipped(report).get("sensitive", 0) >= 1
    finally:
        node.close()


def test_a_failed_document_is_reported_and_other_documents_still_index(node, tree):
    tree.write("blank.md", "   \n\n")
    tree.write("good.md", "# Good\n\ncontent\n")
    tree.commit()
    report = import_and_index(node, register(node, tree))
    assert report.added.count == 2
    statuses = {p: (d.status, d.failure_reason) for p, d in rows().items()}
    assert statuses == {"blank.md": ("Failed", "no_text"), "good.md": ("Indexed", None)}


def test_an_interrupted_indexing_run_is_finished_by_the_next_import(counting_node, tree):
    node = counting_node
    tree.write("a.md", "# A\n\nalpha\n")
    tree.commit()
    repo_id = register(node, tree)
    first = import_repository(node.store, repo_id, "DEFAULT", DEFAULT_LIMITS, purge=node.purge)  # scanned, never indexed
    assert first.pending_document_ids and rows()["a.md"].status == "Pending"
    second = import_and_index(node, repo_id)
    assert second.unchanged.count == 1 and second.pending_document_ids == first.pending_document_ids
    assert rows()["a.md"].status == "Indexed"
    assert os.path.exists(node.store.blobs.path_for(rows()["a.md"].id))


def test_documents_a_running_node_takes_mid_scan_are_still_reported_as_queued(node, tree):
    # A running node's drain sweep admits Pending rows while the scan goes on;
    # the report must still name every document this import queued, or the
    # TUI says "1 queued" for 2 and `kbtui import` stops following one.
    for name in ("a.md", "b.md", "c.md"):
        tree.write(name, f"# {name}\n\ntext of {name}\n")
    tree.commit()

    def node_takes_what_is_pending(done: int, total: int) -> None:
        for document in Document.select().where(Document.status == Status.PENDING.value):
            set_status(document.id, Status.EXTRACTING)

    report = import_repository(node.store, register(node, tree), "DEFAULT", DEFAULT_LIMITS, purge=node.purge,
                               on_progress=node_takes_what_is_pending)
    assert report.added.count == 3
    assert Document.select().where(Document.status == Status.PENDING.value).count() == 0
    assert sorted(report.pending_document_ids) == sorted(d.id for d in rows().values())
