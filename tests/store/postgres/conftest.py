"""A real PostgreSQL for the PostgreSQL store's tests (tests/postgres_server.py)."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from store.postgres.connection import PostgresSettings, connect, register_types
from store.postgres.migrations import apply_migrations


@pytest.fixture
def settings(postgres_url: str) -> PostgresSettings:
    return PostgresSettings(postgres_url, connect_timeout_s=5, statement_timeout_ms=20_000)


@pytest.fixture
def conn(settings: PostgresSettings) -> Iterator[psycopg.Connection]:
    """A connection to a fresh database with the schema applied."""
    connection = connect(settings)
    try:
        apply_migrations(connection, server=settings.server)
        register_types(connection)
        yield connection
    finally:
        connection.close()
