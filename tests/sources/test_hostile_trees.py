"""Hostile working trees (HOSTILE-CASES 7-11): links out, swaps, FIFOs, odd names, hostile config."""

from __future__ import annotations

import os
import socket
import stat
import subprocess

import pytest

from kbtui.sources.scan import SourceScan as RepositoryScan
from store.files import SourceFile
from store.models import Chunk, Document
from tests.sources.conftest import DEFAULT_LIMITS, GitTree, import_and_index, outcomes, register, skipped


def rows() -> dict[str, Document]:
    return {d.source_path: d for d in Document.select().where(Document.source_path.is_null(False))}


def chunk_text() -> str:
    return "\n".join(c.content for c in Chunk.select())


def _replace_with_special(path, kind: str) -> None:
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()
    else:
        try:
            os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("creating a device file needs privileges this run does not have")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["fifo", "socket", "char_device"])
def test_non_regular_files_are_skipped_and_a_fifo_never_blocks(node, tree, kind):
    tree.write("special.md", "# Was a file\n")
    tree.write("normal.md", "# Normal\n\nnormal text\n")
    tree.commit()
    _replace_with_special(tree.path("special.md"), kind)  # still listed: it is tracked
    if kind == "fifo":
        os.mkfifo(tree.path("untracked-fifo.md"))  # git does not list it at all
    report = import_and_index(node, register(node, tree))
    assert outcomes(report) == {"special.md": ("skipped", "not_regular"), "normal.md": ("added", None)}
    assert set(rows()) == {"normal.md"}


def test_a_symlink_pointing_outside_is_skipped_and_counted(node, tree, outside):
    tree.write("inside.md", "# Inside\n\ninside text\n")
    (tree.root / "link-out.md").symlink_to(outside / "secret.md")
    (tree.root / "link-in.md").symlink_to(tree.path("inside.md"))
    (tree.root / "dangling.md").symlink_to(tree.root / "nowhere.md")
    tree.commit()  # git stores the links as links
    report = import_and_index(node, register(node, tree))
    assert skipped(report) == {"symlink": 3}
    assert set(rows()) == {"inside.md"}
    assert "outsidecanary" not in chunk_text()


def test_a_directory_replaced_by_a_symlink_out_of_the_tree_is_refused(node, tree, outside):
    tree.write("docs/secret.md", "# Docs\n\nthe real docs\n")
    tree.write("top.md", "# Top\n\ntop\n")
    tree.commit()
    for child in tree.path("docs").iterdir():
        child.unlink()
    tree.path("docs").rmdir()
    tree.path("docs").symlink_to(outside, target_is_directory=True)  # outside/ has secret.md too
    report = import_and_index(node, register(node, tree))
    assert outcomes(report) == {
        "docs": ("skipped", "symlink"),  # the link itself, listed as untracked
        "docs/secret.md": ("skipped", "symlink"),  # the tracked path now behind it
        "top.md": ("added", None),
    }
    assert "outsidecanary" not in chunk_text()


def _swap_to_symlink(target):
    def swap(path):
        link = path.with_name(path.name + ".tmp-link")
        link.symlink_to(target)
        os.replace(link, path)

    return swap


def _swap_to_other_file(path):
    other = path.with_name(path.name + ".tmp-other")
    other.write_text("# Replacement\n\nswappedcanary\n")
    os.replace(other, path)


def _swap_to_fifo(path):
    fifo = path.with_name(path.name + ".tmp-fifo")
    os.mkfifo(fifo)
    os.replace(fifo, path)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("swap_kind", ["symlink_out", "other_file", "fifo"])
def test_a_file_swapped_between_check_and_open_is_refused(node, tree, outside, swap_kind):
    tree.write("victim.md", "# Victim\n\noriginal text\n")
    tree.write("bystander.md", "# Bystander\n\nunaffected\n")
    tree.commit()
    swap = {
        "symlink_out": _swap_to_symlink(outside / "secret.md"),
        "other_file": _swap_to_other_file,
        "fifo": _swap_to_fifo,
    }[swap_kind]
    swapped_paths = []

    def attacker(source_path: str) -> None:
        if source_path == "victim.md":
            swap(tree.path("victim.md"))
            swapped_paths.append(source_path)

    report = import_and_index(node, register(node, tree), before_open=attacker)

    assert swapped_paths == ["victim.md"], "the seam ran between the check and the open"
    assert outcomes(report) == {"victim.md": ("skipped", "swapped"), "bystander.md": ("added", None)}
    assert set(rows()) == {"bystander.md"}
    text = chunk_text()
    assert "outsidecanary" not in text and "swappedcanary" not in text


def test_a_file_that_changes_while_it_is_read_is_refused(node, tree, monkeypatch):
    tree.write("growing.md", "# Growing\n\nfirst line\n")
    tree.commit()
    real_read = SourceFile.read

    def append_then_read(self: SourceFile, size: int = -1) -> bytes:
        with open(tree.path("growing.md"), "a") as handle:
            handle.write("a line written during the read\n")
        return real_read(self, size)

    monkeypatch.setattr(SourceFile, "read", append_then_read)
    report = import_and_index(node, register(node, tree))
    assert outcomes(report) == {"growing.md": ("skipped", "changed_during_read")}
    assert rows() == {}


def test_hostile_names_are_imported_as_distinct_documents_and_shown_escaped(node, tree, run_cli):
    names = {
        b"caf\xe9-latin1.md": "caf\\xe9-latin1.md",  # not UTF-8
        b"line\nbreak.md": "line\nbreak.md",
        "evil\u202edm.exe.md".encode(): "evil\u202edm.exe.md",  # a BiDi override
        b"README.md": "README.md",
        b"readme.md": "readme.md",  # a case collision: two files on this filesystem
    }
    for raw, _ in names.items():
        tree.write(raw, f"# Named\n\ncontent of {raw!r}\n")
    tree.commit()
    repo_id = register(node, tree)
    report = import_and_index(node, repo_id)

    documents = rows()
    assert set(documents) == set(names.values())
    assert len({d.id for d in documents.values()}) == len(names)
    for raw, identity in names.items():
        assert node.store.blobs.read_bytes(documents[identity].id) == tree.path(raw).read_bytes()
    shown = {f.path for f in report.files}
    assert shown == {"caf\\xe9-latin1.md", "line\\nbreak.md", "evil\\u202edm.exe.md", "README.md", "readme.md"}
    for path in shown:
        assert "\n" not in path and "\u202e" not in path

    listing = run_cli("import", repo_id, "--list")
    assert listing.code == 0, listing.err
    assert "\u202e" not in listing.out and "line\\nbreak.md" in listing.out
    for line in listing.out.splitlines():
        assert not line.startswith("break.md")  # no raw newline split a path


def test_unicode_twins_have_one_identity_and_the_second_is_reported(node, tree):
    tree.write("cafe\u0301.md", "# Decomposed\n\nnfd\n")  # NFD
    tree.write("caf\u00e9.md", "# Composed\n\nnfc\n")  # NFC
    tree.commit()
    report = import_and_index(node, register(node, tree))
    assert set(rows()) == {"caf\u00e9.md"}
    assert [(f.outcome, f.reason) for f in report.files] == [("added", None), ("skipped", "name_collision")]


def test_a_nested_repository_is_not_entered(node, tree):
    tree.write("top.md", "# Top\n")
    tree.commit()
    nested = GitTree(tree.root / "vendor-repo")
    nested.write("inner.md", "# Inner\n\nnestedcanary\n")
    nested.commit()
    report = import_and_index(node, register(node, tree))
    assert outcomes(report) == {"top.md": ("added", None), "vendor-repo": ("skipped", "not_regular")}
    assert "nestedcanary" not in chunk_text()


def test_a_hostile_repository_config_runs_nothing(node, tree, tmp_path):
    marker = tmp_path / "hook-ran"
    hook = tmp_path / "fsmonitor-hook"
    hook.write_text(f"#!/bin/sh\ntouch '{marker}'\n")
    hook.chmod(0o755)
    tree.write("a.md", "# A\n")
    tree.commit()
    tree.git("config", "core.fsmonitor", str(hook))
    # Control: plain git really runs the configured program while listing files.
    subprocess.run(["git", "ls-files", "--others"], cwd=tree.root, capture_output=True, check=True)
    assert marker.exists()
    marker.unlink()
    report = import_and_index(node, register(node, tree))
    assert report.added.count == 1
    assert not marker.exists(), "the scan made git run a program from the repository's config"


def test_inherited_git_environment_cannot_redirect_the_scan(node, tree, tmp_path, monkeypatch):
    decoy = GitTree(tmp_path / "decoy")
    decoy.write("decoy.md", "# Decoy\n\ndecoycanary\n")
    decoy.commit()
    tree.write("real.md", "# Real\n")
    tree.commit()
    repo_id = register(node, tree)
    monkeypatch.setenv("GIT_DIR", str(decoy.root / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(decoy.root))
    report = import_and_index(node, repo_id)
    assert set(rows()) == {"real.md"} and report.added.count == 1


def test_the_scan_itself_touches_no_database(tree):
    tree.write("a.md", "# A\n\nalpha\n")
    tree.write(".env", "X=1\n")
    tree.commit()
    with RepositoryScan(tree.root.resolve(), DEFAULT_LIMITS) as scan:
        results = list(scan)
    assert [(r.source_path, type(r).__name__) for r in results] == [
        (".env", "SkippedPath"),
        ("a.md", "AcceptedFile"),
    ]
    assert results[1].data == b"# A\n\nalpha\n"


def _git_file_as_fifo(tree: GitTree, tmp_path, where: str):
    """Put a FIFO where git would read a file for its ignore rules."""
    if where == "excludes-file":
        fifo = tmp_path / "excludes"
        tree.git("config", "core.excludesFile", str(fifo))
    elif where == "include":
        fifo = tmp_path / "included.gitconfig"
        tree.git("config", "include.path", str(fifo))
    elif where == "info-exclude":
        fifo = tree.root / ".git" / "info" / "exclude"
        fifo.unlink(missing_ok=True)
    else:  # a tracked .gitignore, replaced on disk
        fifo = tree.path("docs/.gitignore")
        fifo.unlink()
    os.mkfifo(fifo)


@pytest.mark.parametrize("where", ["excludes-file", "include", "info-exclude", "tracked-gitignore"])
def test_a_fifo_where_git_reads_its_rules_stops_the_scan_at_once(tmp_path, where, monkeypatch):
    """git opens these files blocking: a FIFO stalled an import for 121 s. Now
    the scan refuses at once with one line, and removes nothing."""
    from tests.faults.processes import kbtui, one_line

    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no personal Git config in the way
    tree = GitTree(tmp_path / "repo")
    tree.write("README.md", "# Readme\n\nthe top page\n")
    tree.write("docs/.gitignore", "*.tmp\n")
    tree.write("docs/guide.md", "# Guide\n\nthe guide\n")
    tree.git("add", "-A")
    tree.git("commit", "-q", "-m", "init")
    home = tmp_path / "kb"
    added = kbtui(home, "add", str(tree.root), "--json")
    assert added.returncode == 0, added.stderr
    _git_file_as_fifo(tree, tmp_path, where)

    synced = kbtui(home, "sync", timeout=60)
    assert synced.returncode == 1  # the source failed; sync goes on with the others
    line = one_line(synced.stderr)
    assert "which is not a regular file" in line and "nothing was removed" in line
    assert kbtui(home, "ls", "--format", "tsv").stdout.count("\n") == 1 + 2  # the header and both documents
