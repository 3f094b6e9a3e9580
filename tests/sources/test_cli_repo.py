"""`kbtui repo add|ls|rm` and `kbtui import`, as an operator runs them."""

from __future__ import annotations

import json

CANARY = "zqxrepocanary4417"


def test_register_list_import_and_search(run_cli, tree):
    tree.write("docs/backup.md", "# Backups\n\nNightly pg_basebackup runs at 02:00.\n")
    tree.write(".env", "TOKEN=1\n")
    tree.commit()

    added = run_cli("repo", "add", str(tree.root), "--name", "ops-docs", "--json")
    assert added.code == 0, added.err
    registration = json.loads(added.out)
    assert registration["name"] == "ops-docs" and registration["document_count"] == 0

    imported = run_cli("import", "ops-docs", "-c", "ops", "--json")
    assert imported.code == 0, imported.err
    report = json.loads(imported.out)
    assert report["status"] == "completed" and report["collection"] == "OPS"
    assert report["added"] == {"count": 1, "bytes": len(tree.path("docs/backup.md").read_bytes())}
    assert report["skipped"] == {"sensitive": {"count": 1, "bytes": 8}}
    assert report["index_failed_document_ids"] == [] and len(report["pending_document_ids"]) == 1
    assert "files" not in report  # only with --list

    hits = json.loads(run_cli("search", "basebackup", "-c", "ops", "--json").out)["hits"]
    assert hits and hits[0]["source_path"] == "docs/backup.md"

    listed = json.loads(run_cli("repo", "ls", "--json").out)
    assert [(r["name"], r["document_count"], r["last_import_status"]) for r in listed] == [("ops-docs", 1, "completed")]

    again = json.loads(run_cli("import", registration["repository_id"][:8], "-c", "ops", "--json", "--list").out)
    assert again["unchanged"]["count"] == 1 and again["pending_document_ids"] == []
    assert {(f["path"], f["outcome"]) for f in again["files"]} == {("docs/backup.md", "unchanged"), (".env", "skipped")}


def test_the_human_report_has_a_row_per_outcome_and_reason(run_cli, tree):
    tree.write("a.md", "# A\n\nalpha\n")
    tree.write("id_rsa", "key\n")
    tree.commit()
    run_cli("repo", "add", str(tree.root))
    result = run_cli("import", "repo")
    assert result.code == 0, result.err
    lines = [line.split() for line in result.out.splitlines()]
    assert ["added", "1", "11", "B"] in lines
    assert ["sensitive", "1", "4", "B"] in lines
    assert ["1", "indexed,", "0", "failed"] in lines


def test_registering_a_folder_that_is_not_a_top_level_is_one_line(run_cli, tree, tmp_path):
    tree.write("docs/a.md", "# A\n")
    tree.commit()
    for folder in (tree.root / "docs", tmp_path):
        result = run_cli("repo", "add", str(folder))
        assert result.code == 2 and result.err.strip().count("\n") == 0
        assert str(folder) not in result.err
    assert json.loads(run_cli("repo", "ls", "--json").out) == []


def test_import_refuses_a_path_or_an_unknown_repository(run_cli, tree):
    tree.write("a.md", "# A\n")
    tree.commit()
    result = run_cli("import", str(tree.root))
    assert result.code == 2 and "no such repository" in result.err


def test_an_incomplete_import_exits_non_zero(run_cli, home, tree):
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("repository_max_total_bytes = 150\n")
    tree.write("a.md", "a" * 100)
    tree.write("b.md", "b" * 100)
    tree.commit()
    run_cli("repo", "add", str(tree.root))
    result = run_cli("import", "repo", "--json")
    assert result.code == 1
    report = json.loads(result.out)
    assert report["status"] == "incomplete" and report["skipped"]["aggregate_limit"]["count"] == 1


def test_repo_rm_keeps_documents_unless_purged(run_cli, tree):
    tree.write("a.md", "# A\n\nalpha\n")
    tree.commit()
    run_cli("repo", "add", str(tree.root), "--name", "first")
    run_cli("import", "first")
    kept = run_cli("repo", "rm", "first")
    assert kept.code == 0 and "1 document(s) kept" in kept.out
    assert len(json.loads(run_cli("ls", "--json").out)) == 1
    run_cli("repo", "add", str(tree.root), "--name", "second")
    run_cli("import", "second")
    purged = run_cli("repo", "rm", "second", "--purge")
    assert purged.code == 0 and "1 document(s) purged" in purged.out
    assert json.loads(run_cli("ls", "--json").out) == []
    assert run_cli("repo", "rm", "second").code == 2


def test_no_path_or_text_of_a_repository_reaches_a_log(run_cli, home, tmp_path, everything_at_debug):
    from tests.sources.conftest import GitTree

    tree = GitTree(tmp_path / f"{CANARY}-repo")
    tree.write(f"{CANARY}/notes-{CANARY}.md", f"# {CANARY}\n\nbody {CANARY}\n")
    tree.write(f".env.{CANARY}", "X=1\n")
    tree.write(f"{CANARY}-empty.md", "")
    tree.commit()
    (tree.root / f"link-{CANARY}.md").symlink_to(tmp_path)
    assert run_cli("repo", "add", str(tree.root), "--name", f"name-{CANARY}").code == 0
    assert run_cli("import", f"name-{CANARY}", "--list").code == 0
    tree.git("rm", "-rq", CANARY)
    tree.commit()
    assert run_cli("import", f"name-{CANARY}", "--json").code == 0
    assert run_cli("repo", "ls").code == 0
    assert run_cli("repo", "rm", f"name-{CANARY}", "--purge").code == 0

    log_text = (home / "logs" / "kbtui.log").read_text()
    assert "scan completed" in log_text  # the log was really written, with counts
    assert CANARY not in log_text
    assert CANARY not in everything_at_debug.text
    assert all(CANARY not in str(r.args) for r in everything_at_debug.records)
