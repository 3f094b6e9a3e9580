"""Opening the knowledge base a configuration names: SQLite in the data
directory (the embedded default), or PostgreSQL when ``database_url`` (or
``KBTUI_DATABASE_URL``) names a server."""

from __future__ import annotations

from kbtui.config import Config
from kbtui.ports import Storage


def schema_version(config: Config) -> int:
    """The catalog schema this kbtui reads and writes in ``config``'s store (an older one is upgraded)."""
    from store import LATEST_SCHEMA_VERSION

    return LATEST_SCHEMA_VERSION


def open_storage(config: Config, *, read_only: bool = False) -> Storage:
    """The store of ``config``'s knowledge base, checked and ready (see
    :func:`store.open_store` and :func:`store.open_postgres_store`)."""
    if config.database_url:
        from store import open_postgres_store

        return open_postgres_store(config.home, config.database_url, read_only=read_only)
    from store import open_store

    return open_store(config.home, read_only=read_only)
