"""The CLI at 80 columns and in a pipe, as an operator uses it every day (issue 20, finding 11)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections import Counter

from rich.console import Console

from kbtui.follow import progress_display, progress_text
from store.catalog import set_status
from store.db import thread_connection
from store.models import Status
from tests.conftest import write

LONG_NAME = "a-rather-long-file-name-that-an-operator-really-uses-for-notes-" + "x" * 40 + ".md"


def kbtui(home, *args: str, columns: int = 80) -> subprocess.CompletedProcess:
    env = {**os.environ, "KBTUI_HOME": str(home), "KBTUI_EMBEDDING_PROVIDER": "hash", "COLUMNS": str(columns)}
    return subprocess.run([sys.executable, "-m", "kbtui", *args], env=env, capture_output=True, text=True, timeout=120)


def add(run_cli, path) -> dict:
    added = run_cli("add", str(path), "--json")
    return json.loads(added.out)[0]


def test_ls_in_a_pipe_is_one_tab_separated_line_per_document(run_cli, tmp_path):
    doc = add(run_cli, write(tmp_path / LONG_NAME, "# Notes\n\nalpha"))
    listed = run_cli("ls")  # captured: stdout is not a terminal
    lines = listed.out.splitlines()
    assert lines[0].split("\t") == [
        "document_id", "collection", "status", "failure_reason", "chunks", "size_bytes", "updated", "name",
    ]
    assert len(lines) == 2
    fields = lines[1].split("\t")
    assert fields[0] == doc["document_id"] and fields[2] == "Indexed" and fields[-1] == LONG_NAME
    assert fields[6].count("T") == 1 and fields[6][:2] == "20"  # an ISO time, not a Unix one


def test_ls_as_a_table_keeps_its_columns_at_80_columns(home, run_cli, tmp_path):
    add(run_cli, write(tmp_path / LONG_NAME, "# Notes\n\nalpha"))
    run_cli("add", str(write(tmp_path / "broken.pdf", "not a pdf at all")))
    table = kbtui(home, "ls", "--format", "table").stdout.splitlines()
    header, rows = table[0], table[1:3]
    assert all(len(line) <= 80 for line in table)
    # Both rows are one line each; the Failed one does not shrink the name column.
    name_width = header.index("STATUS") - header.index("NAME")
    assert name_width >= 20
    assert rows[0].index("Indexed") == rows[1].index("Failed") == header.index("STATUS")
    assert rows[0].split()[1].endswith("…")  # the long name is cut, not wrapped
    # The reason and what it means, below the table.
    failed = " ".join(table[table.index(next(line for line in table if line.startswith("failed "))):])
    assert "extract_corrupt" in failed and "damaged" in failed


def test_the_progress_line_fits_80_columns_without_collapsing():
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=True, color_system=None)
    progress = progress_display(console)
    counts = Counter({"Indexed": 12, "Embedding": 6, "Pending": 29})
    task = progress.add_task("indexing", total=47, line=progress_text(12, 47, 0.25, counts))
    progress.update(task, completed=12)
    console.print(progress.get_renderable())
    line = out.getvalue().splitlines()[0]
    assert len(line) <= 80
    assert "12/47 · 0.25/s · ETA 2 min 20 s · embedding 6 · pending 29" in line


def test_show_prints_readable_times_and_accepts_a_name_or_a_short_prefix(run_cli, tmp_path):
    doc = add(run_cli, write(tmp_path / "ls.txt", "list directory contents"))
    by_name = run_cli("show", "ls.txt")
    assert by_name.code == 0 and doc["document_id"] in by_name.out
    assert "matched by name" in by_name.err
    created = next(line for line in by_name.out.splitlines() if "created_at" in line)
    assert str(int(doc["created_at"])) not in created and "(just now)" in created and created.count(":") >= 2
    by_prefix = run_cli("show", doc["document_id"][:4])
    assert by_prefix.code == 0 and "matched by id prefix" in by_prefix.err
    too_short = run_cli("show", doc["document_id"][:3])
    assert too_short.code == 2 and "at least 4 characters" in too_short.err
    nothing = run_cli("show", "nope.txt")
    assert nothing.code == 2 and "no such document" in nothing.err and "nope.txt" not in nothing.err


def test_an_ambiguous_name_lists_the_ids_and_rm_deletes_nothing(run_cli, tmp_path):
    first = add(run_cli, write(tmp_path / "a" / "notes.md", "alpha"))
    second = add(run_cli, write(tmp_path / "b" / "notes.md", "beta"))
    result = run_cli("rm", "notes.md")
    assert result.code == 2 and "2 documents match" in result.err
    assert first["document_id"][:12] in result.err and second["document_id"][:12] in result.err
    assert len(json.loads(run_cli("ls", "--json").out)) == 2
    removed = run_cli("rm", first["document_id"][:6])
    assert removed.code == 0 and "matched by id prefix" in removed.out and "notes.md" in removed.out


def test_errors_list_the_valid_choices_and_statuses_ignore_case(run_cli, tmp_path):
    run_cli("add", str(write(tmp_path / "a.md", "alpha")), "-c", "OPS")
    unknown = run_cli("ls", "-c", "NOPE")
    assert unknown.code == 2 and "known: OPS" in unknown.err
    assert run_cli("ls", "--status", "indexed", "--json").code == 0
    assert len(json.loads(run_cli("ls", "--status", "INDEXED", "--json").out)) == 1
    path = run_cli("import", str(tmp_path))
    assert path.code == 2 and "name or id, not a path" in path.err and "kbtui repo add" in path.err


def test_documents_left_mid_stage_show_as_interrupted(home, run_cli, tmp_path):
    doc = add(run_cli, write(tmp_path / "a.md", "alpha"))
    with thread_connection():
        set_status(doc["document_id"], Status.EMBEDDING, progress=0.6)  # a node stopped here
    status = run_cli("status")
    assert "interrupted: Embedding 1 (interrupted — resumes at next start)" in status.out
    assert json.loads(run_cli("status", "--json").out)["interrupted"] == {"Embedding": 1}
    assert run_cli("ls").out.splitlines()[1].split("\t")[2] == "interrupted"
    assert json.loads(run_cli("ls", "--json").out)[0]["interrupted"] is True
    assert "Embedding (interrupted — resumes at next start)" in run_cli("show", doc["document_id"]).out
