"""Names and text a document controls print as inert text on the operator's terminal."""

from __future__ import annotations

import json

from tests.conftest import write

HOSTILE_NAME = "invoice\u202eexe.md"  # a right-to-left override would show "invoicedm.exe"


def test_hostile_names_and_headings_are_escaped_in_human_output(run_cli, tmp_path):
    write(tmp_path / HOSTILE_NAME, "# Red \x1b[31malert\x1b[0m [bold]markup[/bold]\n\nzero\u200bwidth body text\n")
    added = run_cli("add", str(tmp_path / HOSTILE_NAME), "--json")
    assert added.code == 0, added.err
    document = json.loads(added.out)[0]
    assert document["display_name"] == HOSTILE_NAME  # JSON keeps the real name

    listing = run_cli("ls").out
    assert "\u202e" not in listing and "invoice\\u202eexe.md" in listing
    found = run_cli("search", "alert").out
    assert "\x1b" not in found and "\\x1b[31malert" in found
    assert "[bold]markup[/bold]" in found  # shown literally, not interpreted as markup
    shown = run_cli("show", document["document_id"]).out
    assert "\u202e" not in shown and "\x1b" not in shown
