"""kbtui doctor on the PostgreSQL store: the data directory (key, modes), then
the server (reachable), the schema (its version), the key against the
database, the encrypted sources (each authenticates) and what the database
holds. It changes nothing: the session is read-only on the server's side.
"""

from __future__ import annotations

import hmac
import stat
from pathlib import Path

import psycopg

from store.blobs import HEADER_SIZE, LEGACY_VERSION, SegmentCipher, read_header
from store.datadir import prepare_home, read_fingerprint_file
from store.doctor import NOTE, OK, PROBLEM, WARNING, Examination
from store.errors import BlobCorrupt, StoreError
from store.keys import KEY_FILE_NAME, key_fingerprint, load_or_create_key
from store.node_lock import node_running
from store.postgres.connection import PostgresSettings, connect, translated_errors
from store.postgres.keys import stored_fingerprint
from store.postgres.lexical import integrity_check
from store.postgres.migrations import LATEST_VERSION, current_version


def examine_postgres(home: Path, url: str) -> Examination:
    """Check the PostgreSQL store at ``url`` for the node whose data directory is ``home``."""
    found = Examination(home)
    settings = PostgresSettings(url, read_only=True)
    found.add(OK, "store", f"PostgreSQL at {settings.server}")
    key = _check_directory_and_key_file(found, home)
    try:
        conn = connect(settings)
    except StoreError as exc:
        found.add(PROBLEM, "server", exc.message)
        return found
    try:
        with translated_errors(settings):
            _check_database(found, conn, key, settings.server)
    except StoreError as exc:
        found.add(PROBLEM, "server", exc.message)
    finally:
        conn.close()
    if node_running(home):
        found.add(NOTE, "node", "a node is running for this data directory: counts may move while it works")
    return found


def _check_directory_and_key_file(found: Examination, home: Path) -> bytes | None:
    try:
        prepare_home(home, create=False)
    except StoreError as exc:
        found.add(PROBLEM, "data directory", exc.message)
        return None
    mode = stat.S_IMODE(home.stat().st_mode)
    found.add(OK if not mode & 0o077 else WARNING, "data directory", f"holds the node key and logs (mode {mode:04o})")
    if not (home / KEY_FILE_NAME).exists():
        found.add(
            PROBLEM, "node key", f"no {KEY_FILE_NAME} in the data directory",
            f"copy {KEY_FILE_NAME} from a node that uses this database (owner-only, chmod 600)",
        )
        return None
    try:
        key = load_or_create_key(home, data_exists=True)  # reads only: never creates
    except StoreError as exc:
        found.add(PROBLEM, "node key", exc.message)
        return None
    recorded, damaged = read_fingerprint_file(home)
    if damaged:
        found.add(WARNING, "node key", "node.fingerprint beside the key cannot be read", "restore it from a backup")
    elif recorded is not None and recorded.key_fingerprint != key_fingerprint(key):
        found.add(
            WARNING, "node key", "node.fingerprint beside the key names another key",
            "the database decides which key is right (see below)",
        )
    return key


def _check_database(found: Examination, conn: psycopg.Connection, key: bytes | None, server: str) -> None:
    found.add(OK, "server", f"{server} answers")
    version = current_version(conn)
    if version == 0:
        found.add(NOTE, "schema", "the database holds no knowledge base yet", "kbtui add creates it")
        return
    if version > LATEST_VERSION:
        found.add(
            PROBLEM, "schema", f"schema version {version}, newer than this kbtui understands ({LATEST_VERSION})",
            "upgrade kbtui",
        )
        return
    if version < LATEST_VERSION:
        found.add(
            NOTE, "schema", f"schema version {version}, older than this kbtui's ({LATEST_VERSION})",
            "the next command upgrades it",
        )
    else:
        found.add(OK, "schema", f"schema version {version}")
    stored = stored_fingerprint(conn)
    if key is not None:
        if stored is None:
            found.add(NOTE, "node key", "the database records no key fingerprint yet", "the next command records it")
        elif hmac.compare_digest(key_fingerprint(key), stored):
            found.add(OK, "node key", "the one this database was written with")
        else:
            found.add(
                PROBLEM, "node key", f"{KEY_FILE_NAME} is not the key this database was written with",
                f"copy {KEY_FILE_NAME} from a node that uses this database",
            )
            key = None
    _check_contents(found, conn, key)


def _check_contents(found: Examination, conn: psycopg.Connection, key: bytes | None) -> None:
    counts: dict[str, int] = dict(conn.execute("SELECT status, count(*) FROM document GROUP BY status").fetchall())
    chunks = conn.execute("SELECT count(*) FROM chunk").fetchone()
    vectors = conn.execute("SELECT count(*) FROM chunk_vector").fetchone()
    sources = conn.execute("SELECT count(*) FROM source").fetchone()
    summary = ", ".join(f"{status} {n}" for status, n in sorted(counts.items())) or "none"
    found.add(
        OK, "contents", f"documents: {summary}; {chunks[0] if chunks else 0} chunk(s), "
        f"{vectors[0] if vectors else 0} vector(s), {sources[0] if sources else 0} source(s)",
    )
    if integrity_check(conn):
        found.add(OK, "lexical index", "its BM25 statistics agree with the chunks")
    else:
        found.add(PROBLEM, "lexical index", "its BM25 statistics disagree with the chunks", "report it; re-index everything")
    missing = conn.execute(
        "SELECT count(*) FROM document AS d WHERE NOT EXISTS (SELECT 1 FROM blob AS b WHERE b.id = d.id)"
    ).fetchone()
    if missing and missing[0]:
        found.add(
            PROBLEM, "sources", f"{missing[0]} document(s) have no encrypted source "
            "(they keep serving their index, but cannot be re-indexed)",
            "restore the database from a backup, or remove those documents (kbtui rm)",
        )
    if key is None:
        return
    damaged = _unauthenticated_blobs(conn, key)
    if damaged:
        found.add(
            PROBLEM, "sources", f"{damaged} encrypted source(s) fail authentication (damaged, or another key)",
            "restore the database from a backup",
        )
    else:
        blobs = conn.execute("SELECT count(*) FROM blob").fetchone()
        found.add(OK, "sources", f"{blobs[0] if blobs else 0} encrypted source(s) authenticate with the node key")


def _unauthenticated_blobs(conn: psycopg.Connection, key: bytes) -> int:
    """Blobs whose header, segment count or first segment does not check out
    (each blob's first record is decrypted: the key and the id binding are
    proven without reading every byte)."""
    damaged = 0
    with conn.transaction(), conn.cursor(name="doctor_blobs") as cursor:
        cursor.itersize = 64
        cursor.execute(
            "SELECT b.id, b.header, b.segments, (SELECT count(*) FROM blob_segment AS s WHERE s.blob_id = b.id),"
            " (SELECT s.record FROM blob_segment AS s WHERE s.blob_id = b.id AND s.counter = 0) FROM blob AS b"
        )
        for blob_id, header, segments, stored, first in cursor:
            try:
                header = bytes(header)
                if len(header) != HEADER_SIZE or stored != segments or first is None:
                    raise BlobCorrupt("incomplete")
                read_header(header, LEGACY_VERSION)
                SegmentCipher.of(key, header, blob_id).open(0, segments == 1, bytes(first))
            except BlobCorrupt:
                damaged += 1
    return damaged
