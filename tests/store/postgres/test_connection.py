"""Connecting to the PostgreSQL store: bounded waits, one line naming the
server, never the password, and the storage exit code."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

from store.errors import StoreError
from store.postgres.connection import (
    PostgresSettings,
    ServerProblem,
    connect,
    is_postgres_url,
    masked_url,
    server_name,
    storage_problem,
)

SECRET = "s3cr3t-pw"


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("postgresql://kb:s3cr3t-pw@db.example.org:5432/kb", "postgresql://kb:***@db.example.org:5432/kb"),
        ("postgres://kb:s3cr3t-pw@db/kb?sslmode=require", "postgres://kb:***@db/kb?sslmode=require"),
        # An unencoded "@" inside the password: the last "@" ends the user part.
        ("postgresql://kb:s3cr3t@pw@db/kb", "postgresql://kb:***@db/kb"),
        ("postgresql://db/kb?user=kb&password=s3cr3t-pw&sslmode=require",
         "postgresql://db/kb?user=kb&password=***&sslmode=require"),
        ("host=db user=kb password=s3cr3t-pw dbname=kb", "host=db user=kb password=*** dbname=kb"),
        ("host=db password='s3cr3t pw' dbname=kb", "host=db password=*** dbname=kb"),
        ("postgresql://kb@db/kb", "postgresql://kb@db/kb"),
        ("postgresql://db/kb", "postgresql://db/kb"),
    ],
)
def test_masked_url_hides_the_password_wherever_it_is_written(url: str, masked: str) -> None:
    assert masked_url(url) == masked


def test_settings_never_show_the_password() -> None:
    settings = PostgresSettings(f"postgresql://kb:{SECRET}@db.example.org:6543/kb")
    assert SECRET not in repr(settings)
    assert SECRET not in str(settings)
    assert settings.server == "db.example.org:6543/kb"


def test_only_postgresql_urls_name_a_postgres_store() -> None:
    assert is_postgres_url("postgresql://db/kb")
    assert is_postgres_url("postgres://db/kb")
    assert not is_postgres_url("sqlite:/tmp/kb.sqlite3")
    assert not is_postgres_url("/home/me/kb")
    with pytest.raises(StoreError):
        PostgresSettings("mysql://db/kb")


def test_server_name_of_a_socket_url() -> None:
    assert server_name("postgresql://postgres:@/kb?host=/tmp/sock") == "/tmp/sock:5432/kb"


def test_a_connection_runs_statements_in_autocommit(settings: PostgresSettings) -> None:
    with connect(settings) as conn:
        assert conn.autocommit
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert conn.execute("SHOW statement_timeout").fetchone() == ("20s",)


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that accepts connections and never answers
    (a hung or firewalled server)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for sock in accepted:
            sock.close()
        listener.close()


def test_a_server_that_never_answers_fails_in_bounded_time_with_one_line(
    silent_server: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    settings = PostgresSettings(f"postgresql://kb:{SECRET}@127.0.0.1:{silent_server}/kb", connect_timeout_s=2)
    started = time.monotonic()
    with pytest.raises(ServerProblem) as raised:
        connect(settings)
    elapsed = time.monotonic() - started
    assert elapsed < 10, f"connect waited {elapsed:.1f} s"
    message = raised.value.message
    assert "\n" not in message
    assert f"127.0.0.1:{silent_server}/kb" in message
    assert "did not answer within 2 s" in message
    assert SECRET not in message and SECRET not in caplog.text
    assert raised.value.exit_code == 3


def test_a_port_nobody_listens_on_is_refused_with_one_line() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = PostgresSettings(f"postgresql://kb:{SECRET}@127.0.0.1:{port}/kb", connect_timeout_s=2)
    with pytest.raises(ServerProblem) as raised:
        connect(settings)
    assert raised.value.message == f"the PostgreSQL server 127.0.0.1:{port}/kb refused the connection; check that it runs"


def test_a_missing_database_is_named(postgres_server) -> None:
    settings = PostgresSettings(postgres_server.url("no_such_database", password=SECRET))
    with pytest.raises(ServerProblem) as raised:
        connect(settings)
    assert "has no such database" in raised.value.message
    assert "/no_such_database" in raised.value.message
    assert SECRET not in raised.value.message


def test_a_statement_over_the_timeout_becomes_a_storage_error(postgres_url: str) -> None:
    settings = PostgresSettings(postgres_url, statement_timeout_ms=200)
    with connect(settings) as conn:
        started = time.monotonic()
        with pytest.raises(psycopg.Error) as raised:
            conn.execute("SELECT pg_sleep(5)")
        assert time.monotonic() - started < 3
    problem = storage_problem(raised.value, settings)
    assert problem is not None and problem.exit_code == 3
    assert problem.message.startswith("the PostgreSQL server ")
    assert "did not finish within 200 ms" in problem.message


def test_a_connection_lost_mid_transaction_rolls_back_and_says_so(settings: PostgresSettings, postgres_url: str) -> None:
    with connect(settings) as conn, connect(settings) as killer:
        conn.execute("CREATE TABLE t (x integer)")
        pid = conn.info.backend_pid
        with pytest.raises(psycopg.Error) as raised:
            with conn.transaction():
                conn.execute("INSERT INTO t VALUES (1)")
                killer.execute("SELECT pg_terminate_backend(%s)", (pid,))
                conn.execute("INSERT INTO t VALUES (2)")
        problem = storage_problem(raised.value, settings)
        assert problem is not None
        assert "shut down" in problem.message or "was lost" in problem.message
        assert killer.execute("SELECT count(*) FROM t").fetchone() == (0,)


def test_a_bug_is_not_dressed_as_a_storage_condition(settings: PostgresSettings) -> None:
    with connect(settings) as conn, pytest.raises(psycopg.Error) as raised:
        conn.execute("SELECT no_such_column FROM pg_class")
    assert storage_problem(raised.value, settings) is None
    assert storage_problem(ValueError("x"), settings) is None
