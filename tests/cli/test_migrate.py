"""kbtui migrate, as an operator runs it: a knowledge base moved from SQLite to
PostgreSQL and back answers the same searches with the very same vectors
(nothing embedded again, the model not even reachable); the source is never
changed; kill -9 mid-copy, then a re-run, completes; a target that holds
something else is refused with one line, and the password never shows."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.cli.backup_helpers import (
    catalog_rows,
    file_digests,
    kbtui_process,
    kill_9_when_paused,
    top_documents,
    write_corpus,
)
from tests.conftest import write
from tests.faults.processes import kbtui, one_line

PASSWORD = "Mig-r4te-secret"
ROUND_TRIP = 500


@pytest.fixture
def database_url(postgres_url: str) -> str:
    """The test's empty database, named with a password (the test server accepts any)."""
    return postgres_url.replace("postgres:@", f"postgres:{PASSWORD}@")


def add_base(home: Path, folder: Path, count: int) -> None:
    write_corpus(folder, count)
    added = kbtui(home, "add", str(folder), timeout=600)
    assert added.returncode == 0, added.stderr


def migrate(home: Path, target: str, **env: str):
    """``kbtui migrate --to TARGET --json`` in a child process; ``env`` adds to its environment."""
    return subprocess.run(
        [sys.executable, "-m", "kbtui", "migrate", "--to", target, "--json"],
        env={**os.environ, "KBTUI_HOME": str(home), "KBTUI_EMBEDDING_PROVIDER": "hash", **env},
        capture_output=True, text=True, timeout=600,
    )


def sqlite_store_digest(home: Path) -> dict[str, str]:
    """The catalog file and every encrypted source, by digest."""
    digests = {f"blobs/{name}": digest for name, digest in file_digests(home / "blobs").items()}
    digests["kb.sqlite3"] = hashlib.sha256((home / "kb.sqlite3").read_bytes()).hexdigest()
    return digests


def postgres_digest(url: str) -> tuple:
    """Row counts and digests of the documents, chunks, vectors and blob records of a PostgreSQL store."""
    with contextlib.closing(psycopg.connect(url)) as conn:
        return conn.execute(
            "SELECT (SELECT count(*) FROM status_history), (SELECT count(*) FROM source),"
            " (SELECT md5(string_agg(id || status || updated_at::text, ',' ORDER BY id)) FROM document),"
            " (SELECT md5(string_agg(id::text || content_hash, ',' ORDER BY id)) FROM chunk),"
            " (SELECT md5(string_agg(chunk_id::text || embedding::text, ',' ORDER BY chunk_id)) FROM chunk_vector),"
            " (SELECT md5(string_agg(md5(record), ',' ORDER BY blob_id, counter)) FROM blob_segment)"
        ).fetchone()


def catalog_copy(home: Path) -> dict[str, list[tuple]]:
    """What a SQLite catalog holds that a round trip must bring back as it was."""
    return {
        "document": catalog_rows(home, "SELECT id, collection_id, content_hash, display_name, format, source_path,"
                                       " source_id, size_bytes, status, chunk_count, vector_identity, created_at,"
                                       " updated_at, indexed_at FROM document ORDER BY id"),
        "history": catalog_rows(home, "SELECT id, document_id, status, reason, at FROM status_history ORDER BY id"),
        "section": catalog_rows(home, "SELECT * FROM section ORDER BY id"),
        "chunk": catalog_rows(home, "SELECT * FROM chunk ORDER BY id"),
        "vector": catalog_rows(home, "SELECT chunk_id, identity, dim, embedding FROM vector ORDER BY chunk_id"),
        "source": catalog_rows(home, "SELECT id, kind, collection_id, name, root_path, root_digest FROM source"),
        "source_file": catalog_rows(home, "SELECT * FROM source_file ORDER BY document_id"),
    }


def test_a_500_document_round_trip_gives_the_same_searches_and_embeds_nothing(home, tmp_path, database_url):
    add_base(home, tmp_path / "docs", ROUND_TRIP)
    queries = [f"zorblax{n} procedure" for n in range(0, ROUND_TRIP, 25)]
    before = top_documents(home, queries)
    catalog_before = catalog_copy(home)
    source_before = sqlite_store_digest(home)

    # The model is not reachable (no Ollama here): a copy that embedded anything would fail.
    to_postgres = migrate(home, database_url, KBTUI_EMBEDDING_PROVIDER="ollama")
    assert to_postgres.returncode == 0, to_postgres.stderr
    assert PASSWORD not in to_postgres.stdout + to_postgres.stderr
    report = json.loads(to_postgres.stdout)
    assert report["backend"] == "postgresql" and report["documents"] == ROUND_TRIP
    assert report["vectors"] == report["chunks"] == len(catalog_before["chunk"]) and report["sources"] == ROUND_TRIP
    assert report["searches_checked"] >= 20 and not report["restarted"]
    assert sqlite_store_digest(home) == source_before, "the SQLite source changed"

    # The node on PostgreSQL finds the best answer the SQLite one did (below it, the
    # stores break the ties of these look-alike notes each their own way).
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KBTUI_DATABASE_URL", database_url)
        assert top_documents(home, queries, limit=1) == {q: found[:1] for q, found in before.items()}
    postgres_before = postgres_digest(database_url)

    # Back to a new data directory, from PostgreSQL, whose settings file names the server.
    write(home / "config.toml", f'embedding_provider = "hash"\ndatabase_url = "{database_url}"\n')
    back = tmp_path / "back"
    to_sqlite = migrate(home, f"sqlite:{back}", KBTUI_DATABASE_URL=database_url, KBTUI_EMBEDDING_PROVIDER="ollama")
    assert to_sqlite.returncode == 0, to_sqlite.stderr
    assert PASSWORD not in to_sqlite.stdout + to_sqlite.stderr
    assert json.loads(to_sqlite.stdout)["documents"] == ROUND_TRIP
    assert postgres_digest(database_url) == postgres_before, "the PostgreSQL source changed"

    # The same rows (ids, vectors byte for byte), the same answers, the same key, the settings without the URL.
    assert catalog_copy(back) == catalog_before
    assert (back / "node.key").read_bytes() == (home / "node.key").read_bytes()
    settings = (back / "config.toml").read_text()
    assert 'embedding_provider = "hash"' in settings and "database_url" not in settings and PASSWORD not in settings
    assert top_documents(back, queries) == before
    doctor = kbtui(back, "doctor", "--json")
    assert doctor.returncode == 0, doctor.stdout


def test_kill_9_mid_copy_then_a_rerun_completes_both_ways(home, tmp_path, database_url):
    add_base(home, tmp_path / "docs", 40)
    queries = [f"zorblax{n} procedure" for n in range(0, 40, 5)]
    before = top_documents(home, queries)

    marker = tmp_path / "paused"
    copying = kbtui_process(home, "migrate", "--to", database_url, pause_at="migrate", marker=marker)
    kill_9_when_paused(copying, marker)
    with contextlib.closing(psycopg.connect(database_url)) as conn:
        assert conn.execute("SELECT count(*) FROM chunk").fetchone()[0] > 0, "killed before any chunk was copied"
    again = migrate(home, database_url)
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["restarted"] and report["documents"] == 40 and report["sources"] == 40

    back = tmp_path / "back"
    marker.unlink()
    with pytest.MonkeyPatch.context() as patch:  # the child takes this environment: the source is PostgreSQL
        patch.setenv("KBTUI_DATABASE_URL", database_url)
        copying = kbtui_process(home, "migrate", "--to", f"sqlite:{back}", pause_at="migrate", marker=marker)
        kill_9_when_paused(copying, marker)
    assert catalog_rows(back, "SELECT count(*) FROM chunk")[0][0] > 0, "killed before any chunk was copied"
    again = migrate(home, f"sqlite:{back}", KBTUI_DATABASE_URL=database_url)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["restarted"]
    assert top_documents(back, queries) == before

    # A finished copy is refused, with one line.
    for target, env in ((database_url, {}), (f"sqlite:{back}", {"KBTUI_DATABASE_URL": database_url})):
        refused = migrate(home, target, **env)
        assert refused.returncode == 2
        line = one_line(refused.stderr)
        assert "already holds a finished kbtui migrate" in line and PASSWORD not in line


def test_a_target_that_holds_something_else_is_refused_with_one_line(home, tmp_path, database_url):
    add_base(home, tmp_path / "docs", 3)
    source_before = sqlite_store_digest(home)

    # A database another node (another key) wrote: the key check refuses it, naming no password.
    other = tmp_path / "other"
    write(tmp_path / "other-docs" / "x.md", "# X\n\nanother base")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KBTUI_DATABASE_URL", database_url)
        assert kbtui(other, "add", str(tmp_path / "other-docs")).returncode == 0
    refused = migrate(home, database_url)
    assert refused.returncode == 3
    line = one_line(refused.stderr)
    assert "node key" in line and PASSWORD not in line

    # A data directory of another knowledge base.
    refused = migrate(home, f"sqlite:{other}")
    assert refused.returncode == 2
    assert "already on SQLite" in one_line(refused.stderr)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KBTUI_DATABASE_URL", database_url)
        refused = migrate(other, f"sqlite:{home}")
    assert refused.returncode == 2
    assert "another knowledge base" in one_line(refused.stderr)

    # A database this same node wrote on its own (not a copy of this base): kept as it is.
    with contextlib.closing(psycopg.connect(database_url, autocommit=True)) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KBTUI_DATABASE_URL", database_url)
        assert kbtui(home, "add", str(tmp_path / "other-docs")).returncode == 0
    refused = migrate(home, database_url)
    assert refused.returncode == 2
    line = one_line(refused.stderr)
    assert "already holds a knowledge base" in line and PASSWORD not in line

    # Not a store name, and a server that cannot be reached: one line, no password.
    refused = migrate(home, f"mysql://kb:{PASSWORD}@db/kb")
    assert refused.returncode == 2 and PASSWORD not in one_line(refused.stderr)
    refused = migrate(home, f"postgresql://kb:{PASSWORD}@127.0.0.1:1/kb")
    assert refused.returncode == 3 and PASSWORD not in one_line(refused.stderr)
    assert sqlite_store_digest(home) == source_before
