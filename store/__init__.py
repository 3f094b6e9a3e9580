"""Everything on disk or in a database: the SQLite catalog, encrypted blobs,
vectors and the node key, or the same in PostgreSQL (:mod:`store.postgres`).

``Store`` and ``open_store`` (:mod:`store.opening`), and
``open_postgres_store`` (:mod:`store.postgres.storage`), load on first use, so a
module that needs only a light part of the store (its errors, the FTS syntax,
the chunk record) does not pay for the database and cryptography libraries:
``kbtui search`` through a running node imports almost nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from store.opening import DB_FILE_NAME, LATEST_SCHEMA_VERSION, Store, open_store
    from store.postgres.storage import open_postgres_store

__all__ = ["DB_FILE_NAME", "LATEST_SCHEMA_VERSION", "Store", "open_postgres_store", "open_store"]


def __getattr__(name: str) -> Any:
    if name == "open_postgres_store":
        from store.postgres import storage

        return storage.open_postgres_store
    if name in __all__:
        from store import opening

        return getattr(opening, name)
    raise AttributeError(f"module 'store' has no attribute {name!r}")
