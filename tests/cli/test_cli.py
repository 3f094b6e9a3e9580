"""The headless CLI, as an operator uses it."""

from __future__ import annotations

import json
import os

import psycopg

from tests.conftest import on_postgres, write


def flip_a_byte_of_the_source(home, document_id: str) -> None:
    """Damage a stored source as a failing disk would: its blob file, or on
    PostgreSQL its last segment row."""
    if on_postgres():
        with psycopg.connect(os.environ["KBTUI_DATABASE_URL"], autocommit=True) as conn:
            conn.execute(
                "UPDATE blob_segment SET record = set_byte(record, length(record) - 5,"
                " get_byte(record, length(record) - 5) # 255) WHERE blob_id = %s"
                " AND counter = (SELECT max(counter) FROM blob_segment WHERE blob_id = %s)",
                (document_id, document_id),
            )
        return
    blob = home / "blobs" / document_id
    raw = bytearray(blob.read_bytes())
    raw[-5] ^= 0xFF
    blob.write_bytes(bytes(raw))


def truncate_the_source(home, document_id: str) -> None:
    """Keep only a stored source's first segment, as a copy cut short would."""
    if on_postgres():
        with psycopg.connect(os.environ["KBTUI_DATABASE_URL"], autocommit=True) as conn:
            conn.execute("DELETE FROM blob_segment WHERE blob_id = %s AND counter > 0", (document_id,))
        return
    blob = home / "blobs" / document_id
    blob.write_bytes(blob.read_bytes()[: 32 + 65536 + 16])


def test_add_then_search_finds_the_document_by_a_word_in_it(run_cli, tmp_path):
    write(tmp_path / "docs" / "pg.md", "# Backups\n\nNightly pg_basebackup runs at 02:00 with WAL archiving.")
    write(tmp_path / "docs" / "ssh.md", "# SSH\n\nJump hosts accept ed25519 keys only.")
    added = run_cli("add", str(tmp_path / "docs"), "--json")
    assert added.code == 0, added.err
    docs = json.loads(added.out)
    assert {d["status"] for d in docs} == {"Indexed"}

    found = run_cli("search", "basebackup", "--json")
    hits = json.loads(found.out)["hits"]
    assert hits and hits[0]["heading_path"] == "Backups"
    assert "pg_basebackup" in hits[0]["text"]
    pg_doc = next(d for d in docs if d["display_name"] == "pg.md")
    assert hits[0]["document_id"] == pg_doc["document_id"]
    for key in ("document_id", "chunk_id", "collection", "heading_path", "source_path", "score", "score_kind", "text"):
        assert key in hits[0]
    assert hits[0]["score_kind"] == "Fusion"


def test_search_never_crosses_collections(run_cli, tmp_path):
    write(tmp_path / "secret.md", "# Payroll\n\nThe zebracorn budget is confidential.")
    write(tmp_path / "public.md", "# Lunch\n\nSoup on Fridays.")
    assert run_cli("add", str(tmp_path / "secret.md"), "-c", "hr").code == 0
    assert run_cli("add", str(tmp_path / "public.md"), "-c", "ops").code == 0
    in_ops = json.loads(run_cli("search", "zebracorn", "-c", "ops", "--json").out)["hits"]
    assert all(h["collection"] == "OPS" for h in in_ops)
    assert not any("zebracorn" in h["text"] for h in in_ops)
    in_hr = json.loads(run_cli("search", "zebracorn", "-c", "HR", "--json").out)["hits"]
    assert in_hr and "zebracorn" in in_hr[0]["text"]


def test_ls_json_carries_the_documented_fields(run_cli, tmp_path):
    write(tmp_path / "a.md", "# A\n\nalpha")
    run_cli("add", str(tmp_path / "a.md"))
    docs = json.loads(run_cli("ls", "--json").out)
    assert len(docs) == 1
    assert {"document_id", "collection", "status", "display_name", "failure_reason"} <= set(docs[0])
    assert docs[0]["display_name"] == "a.md"
    assert docs[0]["collection"] == "DEFAULT"


def test_a_missing_file_is_one_line_and_changes_nothing(run_cli, tmp_path):
    write(tmp_path / "a.md", "# A\n\nalpha")
    run_cli("add", str(tmp_path / "a.md"))
    before = json.loads(run_cli("ls", "--json").out)
    result = run_cli("add", str(tmp_path / "a.md"), str(tmp_path / "missing.md"))
    assert result.code == 2
    # One line naming the path as typed (issue 29: say which file), on stderr only, never in a log.
    assert result.err.strip() == f"kbtui: {tmp_path / 'missing.md'}: no such file or directory"
    assert json.loads(run_cli("ls", "--json").out) == before


def test_a_directory_without_supported_files_becomes_a_source_that_says_why(run_cli, tmp_path):
    # A folder is a source even while it holds nothing to index: a running node
    # watches it, and what lands there later is added.
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "tool.exe").write_bytes(b"MZ\x90\x00")
    result = run_cli("add", str(tmp_path / "bin"))
    assert result.code == 0, result.err
    assert "nothing to add, 1 skipped (1 unsupported_format)" in result.out
    assert json.loads(run_cli("ls", "--json").out) == []
    [source] = json.loads(run_cli("sources", "--json").out)
    assert (source["kind"], source["name"], source["document_count"]) == ("folder", "bin", 0)


def test_an_unknown_collection_is_an_error(run_cli, tmp_path):
    write(tmp_path / "a.md", "# A\n\nalpha")
    run_cli("add", str(tmp_path / "a.md"))
    for args in (("ls", "-c", "nope"), ("search", "alpha", "-c", "nope")):
        result = run_cli(*args)
        assert result.code == 2 and "unknown collection" in result.err


def test_an_invalid_collection_id_is_an_error(run_cli, tmp_path):
    write(tmp_path / "a.md", "# A\n\nalpha")
    result = run_cli("add", str(tmp_path / "a.md"), "-c", "no spaces please")
    assert result.code == 2 and "collection id" in result.err
    listed = run_cli("ls", "--json")
    assert listed.code == 2 and "no knowledge base" in listed.err


def test_a_tampered_blob_is_refused_and_the_index_is_kept(run_cli, home, tmp_path):
    write(tmp_path / "a.md", "# A\n\nalpha bravo")
    doc = json.loads(run_cli("add", str(tmp_path / "a.md"), "--json").out)[0]
    flip_a_byte_of_the_source(home, doc["document_id"])

    result = run_cli("reindex", doc["document_id"])
    assert result.code == 1 and "failed authentication" in result.err
    assert result.err.strip().count("\n") == 0
    after = json.loads(run_cli("show", doc["document_id"], "--json").out)
    assert after["status"] == "Indexed" and after["chunk_count"] == doc["chunk_count"]
    assert json.loads(run_cli("search", "bravo", "--json").out)["hits"]


def test_a_truncated_blob_is_refused(run_cli, home, tmp_path):
    write(tmp_path / "a.md", "# A\n\n" + "alpha bravo " * 20000)
    doc = json.loads(run_cli("add", str(tmp_path / "a.md"), "--json").out)[0]
    truncate_the_source(home, doc["document_id"])
    result = run_cli("reindex", "--all")
    assert result.code == 1 and "failed authentication" in result.err


def test_a_wrong_key_stops_every_command_with_one_line(run_cli, home, tmp_path):
    write(tmp_path / "a.md", "# A\n\nalpha")
    run_cli("add", str(tmp_path / "a.md"))
    (home / "node.key").write_bytes(bytes(32))
    for args in (("ls",), ("search", "alpha"), ("add", str(tmp_path / "a.md"))):
        result = run_cli(*args)
        assert result.code == 3
        assert "node key" in result.err and result.err.strip().count("\n") == 0


def test_rm_purges_and_show_then_reports_not_found(run_cli, home, tmp_path):
    write(tmp_path / "a.md", "# A\n\nalpha")
    doc = json.loads(run_cli("add", str(tmp_path / "a.md"), "--json").out)[0]
    assert run_cli("rm", doc["document_id"][:10]).code == 0
    assert not (home / "blobs" / doc["document_id"]).exists()
    result = run_cli("show", doc["document_id"])
    assert result.code == 2 and "no such document" in result.err
    assert json.loads(run_cli("search", "alpha", "--json").out)["hits"] == []


def test_show_lists_history_and_sections(run_cli, tmp_path):
    write(tmp_path / "a.md", "# Top\n\nintro\n\n## Child\n\ndetail")
    doc = json.loads(run_cli("add", str(tmp_path / "a.md"), "--json").out)[0]
    shown = json.loads(run_cli("show", doc["document_id"], "--json").out)
    assert [h["status"] for h in shown["history"]] == ["Pending", "Extracting", "Chunking", "Embedding", "Indexed"]
    assert [s["heading_path"] for s in shown["sections"]] == ["Top", "Top > Child"]


def test_add_exit_code_says_a_document_failed(run_cli, tmp_path):
    write(tmp_path / "empty.md", "   \n\n")
    write(tmp_path / "good.md", "# Good\n\ncontent")
    result = run_cli("add", str(tmp_path / "empty.md"), str(tmp_path / "good.md"), "--json")
    assert result.code == 1
    statuses = {d["display_name"]: (d["status"], d["failure_reason"]) for d in json.loads(result.out)}
    assert statuses == {"empty.md": ("Failed", "no_text"), "good.md": ("Indexed", None)}
    assert len(json.loads(run_cli("ls", "--json").out)) == 2
