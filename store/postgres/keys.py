"""The node key's fingerprint in the PostgreSQL store (``node_meta``, under the
same name as in the SQLite catalog): every node that opens the database must
hold the key the data was written with (issue 28: the operator copies it).
"""

from __future__ import annotations

import hmac

import psycopg

from store.datadir import FINGERPRINT_KEY
from store.errors import CatalogProblem, KeyProblem
from store.keys import KEY_FILE_NAME, key_fingerprint


def stored_fingerprint(conn: psycopg.Connection) -> bytes | None:
    row = conn.execute("SELECT value FROM node_meta WHERE key = %s", (FINGERPRINT_KEY,)).fetchone()
    return bytes(row[0]) if row else None


def check_node_key(conn: psycopg.Connection, key: bytes, *, server: str) -> None:
    """Refuse ``key`` unless it is the one this database was written with; the
    first node to open a new database records its key's fingerprint.

    Mirrors ``store.keys.verify_key`` with the fingerprint kept in the database."""
    with conn.transaction():
        if stored_fingerprint(conn) is None:
            has_documents = conn.execute("SELECT EXISTS (SELECT 1 FROM document)").fetchone()
            if has_documents and has_documents[0]:
                raise CatalogProblem(
                    f"the PostgreSQL database {server} holds documents but no key fingerprint; "
                    "it was not written by kbtui (nothing was changed)"
                )
            # Two nodes starting at once: the first insert wins and both compare against it.
            conn.execute(
                "INSERT INTO node_meta(key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING",
                (FINGERPRINT_KEY, key_fingerprint(key)),
            )
        stored = stored_fingerprint(conn)
    refuse_other_key(key, stored, server=server)


def refuse_other_key(key: bytes, stored: bytes | None, *, server: str) -> None:
    """Refuse ``key`` unless its fingerprint is ``stored`` (read from the database)."""
    if stored is None or not hmac.compare_digest(key_fingerprint(key), stored):
        raise KeyProblem(
            f"the node key ({KEY_FILE_NAME}) does not match the data in the PostgreSQL database {server}; "
            f"copy {KEY_FILE_NAME} from a node that uses this database into this node's data directory"
        )
