"""After a failure a command says what is true: what was stored, the real
reason a file was refused, and no filter silently dropped."""

from __future__ import annotations

import json

import peewee
import pytest

from store import sources as source_catalog
from tests.conftest import write


def test_a_lock_after_the_documents_were_stored_does_not_say_try_again(run_cli, home, tmp_path, monkeypatch):
    for number in range(3):
        write(tmp_path / "docs" / f"d{number}.md", f"# Doc {number}\n\ntext {number}\n")

    def locked(*args, **kwargs):
        raise peewee.OperationalError("database is locked")

    with monkeypatch.context() as patched:
        patched.setattr(source_catalog, "record_scan", locked)  # the scan's last write, after every document
        result = run_cli("add", str(tmp_path / "docs"), "--no-wait")
    assert result.code == 2
    assert "try again" not in result.err and "nothing was changed" not in result.err
    assert "3 document(s) stored as Pending before it stopped" in result.err
    assert len(json.loads(run_cli("ls", "--json").out)) == 3


@pytest.mark.parametrize("pseudo", ["/proc/self/status", "/proc/cpuinfo"])
def test_a_proc_file_is_refused_as_a_pseudo_file_not_as_empty(run_cli, pseudo):
    result = run_cli("add", pseudo)
    assert result.code == 1
    assert result.err == (
        f"kbtui: {pseudo}: not added, it is a kernel pseudo-file (as in /proc) that does not report its size\n"
    )


def test_a_truly_empty_file_is_still_empty(run_cli, tmp_path):
    result = run_cli("add", str(write(tmp_path / "empty.txt", "")))
    assert result.code == 1 and result.err.endswith("not added, it is empty\n")


def test_an_empty_document_filter_is_refused_not_ignored(run_cli, tmp_path):
    assert run_cli("add", str(write(tmp_path / "a.md", "# A\n\nalpha words\n"))).code == 0
    for empty in ("", "  "):
        result = run_cli("search", "alpha", "--document", empty)
        assert result.code == 2 and "--document: an empty reference" in result.err


def test_unknown_ids_in_a_reindex_are_not_found_not_damaged(home, tmp_path):
    from kbtui.config import Config
    from kbtui.node import Node

    node = Node.open(Config.load(home))
    try:
        added = node.add_source(write(tmp_path / "a.md", "# A\n\nalpha\n"), "DEFAULT")
        known = added.report.pending_document_ids[0]
        unknown = "0123456789abcdef0123456789abcdef"
        report = node.reindex([known, unknown])
        assert report.queued == (known,) and report.damaged == () and report.not_found == (unknown,)
    finally:
        node.close()
