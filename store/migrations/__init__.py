"""Numbered schema migrations, recorded in ``schema_version``.

Each migration is a module ``mNNNN_name.py`` with ``NAME`` and ``STATEMENTS``.
The version is read first without a write transaction, so an up-to-date
catalog (every open but the first after an upgrade) never waits for the write
lock. Migrations that are due run in order inside one ``BEGIN IMMEDIATE``
transaction each, so two processes opening a new data directory at once
cannot both apply one.
"""

from __future__ import annotations

import importlib
import pkgutil
import time

from peewee import SqliteDatabase

from store.errors import CatalogProblem


def _migrations() -> list[tuple[int, str, list[str]]]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("m") and info.name[1:5].isdigit():
            module = importlib.import_module(f"{__name__}.{info.name}")
            found.append((int(info.name[1:5]), module.NAME, module.STATEMENTS))
    return sorted(found)


LATEST_VERSION = _migrations()[-1][0]


def current_version(db: SqliteDatabase) -> int:
    """The schema version in force: 0 for a catalog with no schema yet. Reads only."""
    has_table = db.execute_sql(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    if has_table is None:
        return 0
    row = db.execute_sql("SELECT MAX(version) FROM schema_version").fetchone()
    return row[0] or 0


def newer_schema_problem(version: int) -> CatalogProblem:
    return CatalogProblem(
        f"the catalog (kb.sqlite3) uses schema version {version}, newer than this kbtui "
        f"understands ({LATEST_VERSION}); upgrade kbtui (nothing was changed)"
    )


def apply_migrations(db: SqliteDatabase) -> int:
    """Bring the schema up to date; return the version now in force."""
    version = current_version(db)
    if version > LATEST_VERSION:
        raise newer_schema_problem(version)
    if version == LATEST_VERSION:
        return version
    for number, name, statements in _migrations():
        if number <= version:
            continue
        with db.atomic("IMMEDIATE"):
            # Re-read under the write lock: another process may have migrated.
            if number <= current_version(db):
                continue
            if number == 1:
                db.execute_sql(
                    "CREATE TABLE IF NOT EXISTS schema_version ("
                    " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
                )
            for statement in statements:
                db.execute_sql(statement)
            db.execute_sql(
                "INSERT INTO schema_version(version, name, applied_at) VALUES (?, ?, ?)",
                (number, name, time.time()),
            )
    return current_version(db)
