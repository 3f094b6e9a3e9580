"""Invariant 1: no document text, chunk text, file name or query in any log."""

from __future__ import annotations

import json

from tests.conftest import write

CANARY = "zqxcanary7731"


def test_canary_never_reaches_a_log(run_cli, home, tmp_path, everything_at_debug):
    good = write(tmp_path / f"{CANARY}-notes.md", f"# {CANARY} heading\n\nbody with {CANARY} inside.")
    empty = write(tmp_path / f"{CANARY}-empty.md", "\n")
    assert run_cli("add", str(good), str(empty)).code == 1  # the empty one fails
    assert run_cli("search", f"where is {CANARY}").code == 0
    assert run_cli("ls").code == 0
    doc_ids = [d["document_id"] for d in json.loads(run_cli("ls", "--json").out)]
    assert run_cli("show", doc_ids[0]).code == 0
    assert run_cli("reindex", "--all").code == 1
    assert run_cli("rm", *doc_ids).code == 0

    log_text = (home / "logs" / "kbtui.log").read_text()
    assert "DEBUG" in log_text or "INFO" in log_text  # the log was really written
    assert CANARY not in log_text
    assert CANARY not in everything_at_debug.text
    assert all(CANARY not in str(r.args) for r in everything_at_debug.records)
