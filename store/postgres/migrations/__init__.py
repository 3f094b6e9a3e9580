"""Numbered schema migrations of the PostgreSQL store, recorded in ``schema_version``.

The same idea as ``store/migrations``: a module ``mNNNN_name.py`` holds
``NAME`` and ``STATEMENTS``; the version is read first without a lock, so an
up-to-date database never waits; due migrations run in order, each in one
transaction (PostgreSQL's DDL is transactional: a failed migration leaves
nothing behind), under a transaction-scoped advisory lock so two nodes
starting on a new database cannot both apply one. A database whose schema is
newer than this kbtui is refused with one line.

Multi-node tables (leases, the node registry) will come as later migrations:
nothing here assumes a single node.
"""

from __future__ import annotations

import importlib
import pkgutil
import time

import psycopg

from store.errors import CatalogProblem

# pg_advisory_xact_lock key of schema changes ("kbtu" "i-mi" as two ASCII words).
MIGRATION_LOCK = 0x6B627475_692D6D69


def _migrations() -> list[tuple[int, str, list[str]]]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("m") and info.name[1:5].isdigit():
            module = importlib.import_module(f"{__name__}.{info.name}")
            found.append((int(info.name[1:5]), module.NAME, module.STATEMENTS))
    return sorted(found)


LATEST_VERSION = _migrations()[-1][0]


def current_version(conn: psycopg.Connection) -> int:
    """The schema version in force: 0 for a database with no schema yet. Reads only."""
    if conn.execute("SELECT to_regclass('schema_version')").fetchone()[0] is None:  # type: ignore[index]
        return 0
    row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    return int(row[0] or 0) if row else 0


def newer_schema_problem(version: int, server: str) -> CatalogProblem:
    return CatalogProblem(
        f"the PostgreSQL database {server} uses schema version {version}, newer than this kbtui "
        f"understands ({LATEST_VERSION}); upgrade kbtui (nothing was changed)"
    )


def apply_migrations(conn: psycopg.Connection, *, server: str = "the PostgreSQL store") -> int:
    """Bring the schema up to date; return the version now in force.

    ``server`` (:func:`store.postgres.connection.server_name`) names the
    database in the one-line refusals."""
    version = current_version(conn)
    if version > LATEST_VERSION:
        raise newer_schema_problem(version, server)
    if version == LATEST_VERSION:
        return version
    for number, name, statements in _migrations():
        if number <= version:
            continue
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                # Re-read under the lock: another node may have migrated meanwhile.
                now_in_force = current_version(conn)
                if now_in_force > LATEST_VERSION:
                    raise newer_schema_problem(now_in_force, server)
                if number <= now_in_force:
                    continue
                if number == 1:
                    conn.execute(
                        "CREATE TABLE IF NOT EXISTS schema_version ("
                        " version integer PRIMARY KEY, name text NOT NULL, applied_at double precision NOT NULL)"
                    )
                for statement in statements:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_version(version, name, applied_at) VALUES (%s, %s, %s)",
                    (number, name, time.time()),
                )
        except psycopg.errors.UndefinedFile:
            raise CatalogProblem(
                f"the PostgreSQL server of {server} does not have the pgvector and pg_trgm extensions installed; "
                "install them on the server (nothing was changed)"
            ) from None
        except psycopg.errors.InsufficientPrivilege:
            raise CatalogProblem(
                f"the PostgreSQL user may not create kbtui's schema in {server} (or the vector and pg_trgm "
                "extensions); ask the database's administrator (nothing was changed)"
            ) from None
    return current_version(conn)
