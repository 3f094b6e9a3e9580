"""``kbtui add`` when files change under it (issue 16, findings 5, 6 and 10).

Each case lists a directory, then changes one listed file before it is
examined, as an unlucky operator (or an attacker sharing the directory)
would. A file that vanished cannot be read as it should: it is named on
stderr and the command exits 1. A FIFO, a directory or a symlink in its place
is what the scan's rules skip anyway (counted by reason, named with --list).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from kbtui.sources.scan import SourceScan
from store.models import Document
from tests.conftest import write

CANARY = "zqxcanary"


def make_corpus(root: Path, count: int = 6) -> Path:
    for number in range(count):
        write(root / f"note-{number:02d}.md", f"# Note {number}\n\nbody of note {number} about topic{number}\n")
    return root


def swap_after_listing(monkeypatch: pytest.MonkeyPatch, change: Callable[[Path], None], victim: str) -> None:
    """The scan lists the folder, then ``change`` hits ``victim`` before it is examined."""
    examine = SourceScan._examine

    def change_then_examine(self, raw, *args):
        if raw == victim.encode():
            change(self.root / victim)
        return examine(self, raw, *args)

    monkeypatch.setattr(SourceScan, "_examine", change_then_examine)


def to_fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def to_directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


def to_dangling_symlink(path: Path) -> None:
    path.unlink()
    path.symlink_to(path.parent / "nowhere.md")


SWAPS = {  # change, skip reason, whether it is named on stderr (and the exit code 1)
    "deleted": (Path.unlink, "vanished", "it no longer exists"),
    "fifo": (to_fifo, "not_regular", None),
    "directory": (to_directory, "not_regular", None),
    "dangling_symlink": (to_dangling_symlink, "symlink", None),
}


@pytest.mark.timeout(120)  # a FIFO opened without O_NONBLOCK hung here forever
@pytest.mark.parametrize("swap", sorted(SWAPS))
def test_a_file_changed_between_listing_and_opening_is_reported_and_the_rest_are_added(
    run_cli, tmp_path, monkeypatch, swap
):
    corpus = make_corpus(tmp_path / "corpus")
    change, reason, explanation = SWAPS[swap]
    swap_after_listing(monkeypatch, change, "note-02.md")
    result = run_cli("add", str(corpus), "--list")

    assert "Traceback" not in result.err
    if explanation is None:
        assert result.code == 0 and result.err == ""
    else:
        assert result.code == 1, "a file that could not be read is a failed document"
        assert result.err.strip().splitlines() == [f"kbtui: {corpus / 'note-02.md'}: not added, {explanation}"]
    assert f"5 added, 1 skipped (1 {reason})" in result.out
    assert f"skipped:{reason}" in result.out and "note-02.md" in result.out  # --list names it
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
def test_a_special_file_that_reports_no_size_is_not_added_and_not_registered(run_cli, tmp_path):
    # /proc/self/mem says it is a regular file of 0 bytes (its reads fail): it is
    # refused before a byte is read, and never becomes a source.
    good = write(tmp_path / "good.md", "# Good\n\ncontent")
    result = run_cli("add", "/proc/self/mem", str(good))
    assert result.code == 1
    assert result.err.strip() == "kbtui: /proc/self/mem: not added, it is empty"
    assert [d.status for d in Document.select()] == ["Indexed"]
    assert [s["kind"] for s in json.loads(run_cli("sources", "--json").out)] == ["file"]


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
    assert "2 added, 1 skipped (1 symlink)" in result.out
    assert Document.select().count() == 2


def test_a_symlink_named_on_the_command_line_is_followed(run_cli, tmp_path):
    # The operator chose it: the file it points at becomes the source (and is
    # re-checked, never through a link, at every scan).
    target = write(tmp_path / "real.md", "# Real\n\ncontent")
    link = tmp_path / "named.md"
    link.symlink_to(target)
    result = run_cli("add", str(link), "--json")
    assert result.code == 0, result.err
    assert [d["display_name"] for d in json.loads(result.out)] == ["real.md"]
    [source] = json.loads(run_cli("sources", "--json").out)
    assert source["root"] == str(target.resolve())


def test_a_readme_that_is_only_a_title_is_indexed_and_found(run_cli, tmp_path):
    readme = write(tmp_path / "README.md", "# Zanzibar deployment tools\n")
    result = run_cli("add", str(readme), "--json")
    assert result.code == 0, result.err
    assert [(d["status"], d["failure_reason"]) for d in json.loads(result.out)] == [("Indexed", None)]
    hits = json.loads(run_cli("search", "zanzibar", "--json").out)["hits"]
    assert hits and hits[0]["heading_path"] == "Zanzibar deployment tools"
