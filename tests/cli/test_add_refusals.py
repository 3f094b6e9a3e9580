"""``kbtui add`` when files change under it (issue 16, findings 5, 6 and 10).

Each case lists a directory, then changes one listed file before it is opened,
as an unlucky operator (or an attacker sharing the directory) would. As root,
permission bits cannot make a file unreadable, so the opens that fail for real
here are: a file removed, a FIFO, a directory or a dangling symlink swapped in
between listing and opening, and ``/proc/self/mem`` (opens fine, every read of
its first page fails with EIO).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from kbtui.cli import documents as documents_command
from kbtui.collect import collect_files
from store.models import Document
from tests.conftest import write

CANARY = "zqxcanary"


def make_corpus(root: Path, count: int = 6) -> Path:
    for number in range(count):
        write(root / f"note-{number:02d}.md", f"# Note {number}\n\nbody of note {number} about topic{number}\n")
    return root


def swap_after_listing(monkeypatch: pytest.MonkeyPatch, change: Callable[[Path], None], victim: str) -> None:
    """``kbtui add`` lists the files, then ``change`` hits ``victim`` before it is opened."""

    def listing_then_change(paths):
        collected = collect_files(paths)
        change(next(f.path for f in collected.files if f.path.name == victim))
        return collected

    monkeypatch.setattr(documents_command, "collect_files", listing_then_change)


def to_fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def to_directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


def to_dangling_symlink(path: Path) -> None:
    path.unlink()
    path.symlink_to(path.parent / "nowhere.md")


SWAPS = {
    "deleted": (Path.unlink, "it no longer exists"),
    "fifo": (to_fifo, "it is not a regular file"),
    "directory": (to_directory, "it is not a regular file"),
    "dangling_symlink": (to_dangling_symlink, "it is a symbolic link"),
}


@pytest.mark.timeout(120)  # a FIFO opened without O_NONBLOCK hung here forever
@pytest.mark.parametrize("swap", sorted(SWAPS))
def test_a_file_changed_between_listing_and_opening_is_reported_and_the_rest_are_added(
    run_cli, tmp_path, monkeypatch, swap
):
    corpus = make_corpus(tmp_path / "corpus")
    change, explanation = SWAPS[swap]
    swap_after_listing(monkeypatch, change, "note-02.md")
    result = run_cli("add", str(corpus))

    assert result.code == 1, "a file that was not added is a failed document"
    assert "Traceback" not in result.err
    lines = result.err.strip().splitlines()
    assert lines == [f"kbtui: {corpus / 'note-02.md'}: not added, {explanation}"]
    assert "5 added, 0 already present, 1 not added" in result.out
    assert "5 indexed, 0 failed" in result.out
    assert Document.select().count() == 5
    assert {d.status for d in Document.select()} == {"Indexed"}


def test_json_output_lists_the_added_documents_and_the_refusal_goes_to_stderr(run_cli, tmp_path, monkeypatch):
    corpus = make_corpus(tmp_path / "corpus", 3)
    swap_after_listing(monkeypatch, Path.unlink, "note-01.md")
    result = run_cli("add", str(corpus), "--json")
    assert result.code == 1
    assert sorted(d["display_name"] for d in json.loads(result.out)) == ["note-00.md", "note-02.md"]
    assert result.err.count("\n") == 1 and "not added, it no longer exists" in result.err


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs /proc/self/mem")
def test_a_file_whose_reads_fail_is_reported_as_unreadable(run_cli, tmp_path):
    good = write(tmp_path / "good.md", "# Good\n\ncontent")
    result = run_cli("add", "/proc/self/mem", str(good))
    assert result.code == 1
    assert result.err.strip() == "kbtui: /proc/self/mem: not added, it cannot be read"
    assert [d.status for d in Document.select()] == ["Indexed"]


def test_an_empty_path_is_bad_input_not_the_current_directory(run_cli, home, tmp_path, monkeypatch):
    make_corpus(tmp_path / "cwd", 2)
    monkeypatch.chdir(tmp_path / "cwd")
    result = run_cli("add", "")
    assert result.code == 2
    assert result.err.strip() == "kbtui: argument 1: an empty path"
    assert not (home / "kb.sqlite3").exists(), "nothing was opened, nothing added"


def test_symlinks_inside_a_directory_are_skipped_and_counted(run_cli, tmp_path):
    corpus = make_corpus(tmp_path / "corpus", 2)
    outside = write(tmp_path / "outside" / f"{CANARY}.md", f"# Private\n\n{CANARY} secret\n")
    (corpus / "link.md").symlink_to(outside)
    result = run_cli("add", str(corpus))
    assert result.code == 0, result.err
    assert "2 added, 0 already present, 1 symbolic link(s) skipped" in result.out
    assert Document.select().count() == 2


def test_a_symlink_named_on_the_command_line_is_followed(run_cli, tmp_path):
    target = write(tmp_path / "real.md", "# Real\n\ncontent")
    link = tmp_path / "named.md"
    link.symlink_to(target)
    result = run_cli("add", str(link), "--json")
    assert result.code == 0, result.err
    assert [d["display_name"] for d in json.loads(result.out)] == ["named.md"]


def test_a_readme_that_is_only_a_title_is_indexed_and_found(run_cli, tmp_path):
    readme = write(tmp_path / "README.md", "# Zanzibar deployment tools\n")
    result = run_cli("add", str(readme), "--json")
    assert result.code == 0, result.err
    assert [(d["status"], d["failure_reason"]) for d in json.loads(result.out)] == [("Indexed", None)]
    hits = json.loads(run_cli("search", "zanzibar", "--json").out)["hits"]
    assert hits and hits[0]["heading_path"] == "Zanzibar deployment tools"
