"""The PostgreSQL schema: numbered migrations, applied once, a newer schema refused."""

from __future__ import annotations

import threading

import psycopg
import pytest

from store.errors import CatalogProblem
from store.postgres.connection import PostgresSettings, connect
from store.postgres.migrations import LATEST_VERSION, apply_migrations, current_version

# The SQLite catalog's tables as of its migrations 0001-0006 (store/migrations);
# its "vector" is "chunk_vector" here (pgvector's type is called vector).
SQLITE_TABLES = {
    "node_meta", "collection", "document", "status_history", "section", "chunk", "chunk_vector",
    "source", "source_file", "removed_document",
}


def tables(conn: psycopg.Connection) -> set[str]:
    rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()
    return {row[0] for row in rows}


def test_a_new_database_gets_the_whole_schema_and_its_version(settings: PostgresSettings) -> None:
    with connect(settings) as conn:
        assert current_version(conn) == 0
        assert apply_migrations(conn, server=settings.server) == LATEST_VERSION
        assert tables(conn) >= SQLITE_TABLES
        assert {"blob", "blob_segment", "lexeme_stat", "lexical_total", "vector_index", "schema_version"} <= tables(conn)
        extensions = {row[0] for row in conn.execute("SELECT extname FROM pg_extension").fetchall()}
        assert {"vector", "pg_trgm"} <= extensions
        # Applying again changes nothing and records nothing twice.
        assert apply_migrations(conn, server=settings.server) == LATEST_VERSION
        assert conn.execute("SELECT count(*) FROM schema_version").fetchone() == (LATEST_VERSION,)


def test_nodes_starting_together_apply_each_migration_once(settings: PostgresSettings) -> None:
    results: list[object] = []

    def start() -> None:
        try:
            with connect(settings) as conn:
                results.append(apply_migrations(conn, server=settings.server))
        except Exception as exc:  # noqa: BLE001 - the assertion below shows it
            results.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [LATEST_VERSION] * 4
    with connect(settings) as conn:
        assert conn.execute("SELECT count(*) FROM schema_version").fetchone() == (LATEST_VERSION,)


def test_a_newer_schema_is_refused_with_one_line_and_left_alone(settings: PostgresSettings) -> None:
    with connect(settings) as conn:
        apply_migrations(conn, server=settings.server)
        conn.execute("INSERT INTO schema_version(version, name, applied_at) VALUES (%s, 'future', 0)", (LATEST_VERSION + 1,))
        with pytest.raises(CatalogProblem) as raised:
            apply_migrations(conn, server=settings.server)
        assert "\n" not in raised.value.message
        assert f"uses schema version {LATEST_VERSION + 1}, newer than this kbtui" in raised.value.message
        assert settings.server in raised.value.message
        assert raised.value.exit_code == 3
        assert current_version(conn) == LATEST_VERSION + 1


def test_a_failed_migration_leaves_nothing_behind(settings: PostgresSettings) -> None:
    with connect(settings) as conn:
        conn.execute("CREATE TABLE document (id text)")  # in the way of the first migration
        with pytest.raises(psycopg.errors.DuplicateTable):
            apply_migrations(conn, server=settings.server)
        assert current_version(conn) == 0
        assert tables(conn) == {"document"}


def test_removed_documents_are_remembered_by_the_database(conn: psycopg.Connection) -> None:
    conn.execute("INSERT INTO collection(id, created_at) VALUES ('DEFAULT', 0)")
    conn.execute(
        "INSERT INTO document(id, collection_id, content_hash, display_name, format, size_bytes, status, created_at,"
        " updated_at) VALUES ('d1', 'DEFAULT', 'h', '\\x00', 'text', 1, 'Pending', 0, 0)"
    )
    conn.execute("DELETE FROM document WHERE id = 'd1'")
    assert conn.execute("SELECT id FROM removed_document").fetchall() == [("d1",)]
    conn.execute(
        "INSERT INTO document(id, collection_id, content_hash, display_name, format, size_bytes, status, created_at,"
        " updated_at) VALUES ('d1', 'DEFAULT', 'h', '\\x00', 'text', 1, 'Pending', 0, 0)"
    )
    assert conn.execute("SELECT id FROM removed_document").fetchall() == []
