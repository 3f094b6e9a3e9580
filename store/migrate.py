"""Copying a knowledge base between the two stores, without embedding anything
again (``kbtui migrate --to postgresql://... | --to sqlite:PATH``).

The source is opened read-only and never changed; the node lock is held so
that no pipeline writes it meanwhile. Rows are copied table by table in id
order, in batches, with their ids: documents with their status history,
sections, chunks (the target's own lexical index is built from them: FTS5
by its triggers, PostgreSQL's ``tsvector`` columns by the same tokenizer as
an index commit), the stored vectors byte for byte, the encrypted sources
(decrypted and sealed again in the target's format with the same node key:
the SQLite files carry a label the PostgreSQL rows do not), registered
sources with their file states, reachability and OCR records. The node key
is the same on both sides: a PostgreSQL target records its fingerprint, a
SQLite target is a new data directory made around a copy of it.

Restart rule, kept simple so that it holds after kill -9 at any point: the
target must be empty, or the unfinished copy of this same source (its
``node_meta`` names the source catalog, written before any row), which is
wiped and copied again. The completion mark is written last, after the
counts and a sample of searches were checked on both sides; a target that
has it is refused.
"""

from __future__ import annotations

import dataclasses
import os
import re
import secrets
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol, cast

import numpy as np

from store.blobs import DocumentLabel, _PlaintextReader, open_name
from store.datadir import CATALOG_ID_KEY
from store.errors import CatalogProblem, StoreError
from store.files import create_once
from store.opening import Store, create_store, open_store
from store.postgres.connection import is_postgres_url, server_name
from store.postgres.lexical import indexed_columns
from store.postgres.storage import PostgresStore, open_postgres_store
from store.postgres.vectors import ensure_vector_index

# (stage, done, total), as the backups report it.
Progress = Callable[[str, int, int], object]

BATCH = 500
# How many chunks the closing check searches for on both sides (by their words and by their vector).
SAMPLE_SEARCHES = 20
SEARCH_LIMIT = 5
# node_meta of the target: the source catalog it is a copy of (written first), and "done" (written last).
MIGRATED_FROM_KEY = "migrated_from"
MIGRATION_DONE_KEY = "migration_done"
SETTINGS_FILE_NAME = "config.toml"


class MigrationRefused(StoreError):
    """The target named cannot take this copy (not a store name, not empty, a finished copy): nothing was changed."""


class MigrationProblem(StoreError):
    """The copy cannot be made or does not match its source (storage condition)."""

    exit_code = 3


@dataclass(frozen=True)
class Table:
    """A table both schemas have, with the columns both have; ``key`` orders and pages the copy."""

    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...] = ("id",)


COLLECTION = Table("collection", ("id", "created_at"))
SOURCE = Table("source", (
    "id", "kind", "collection_id", "name", "root_path", "root_digest", "include_sensitive", "watching", "watch_state",
    "created_at", "last_scan_at", "last_scan_status", "last_scan_report", "last_commit", "root_device", "root_inode",
    "unreachable_reason", "unreachable_since",
))
DOCUMENT = Table("document", (
    "id", "collection_id", "content_hash", "display_name", "format", "source_path", "source_id", "size_bytes", "status",
    "failure_reason", "progress", "parser_version", "chunker_version", "vector_identity", "vector_dim", "chunk_count",
    "created_at", "updated_at", "indexed_at",
))
HISTORY = Table("status_history", ("id", "document_id", "status", "reason", "at"))
SECTION = Table("section", ("id", "document_id", "ordinal", "heading_path", "level", "start_offset", "end_offset", "page"))
CHUNK = Table("chunk", (
    "id", "chunk_uid", "document_id", "section_id", "collection_id", "ordinal", "content", "content_hash",
    "heading_path", "source_path", "symbol", "kind", "language", "page", "start_offset", "end_offset", "token_estimate",
))
SOURCE_FILE = Table(
    "source_file", ("document_id", "size", "mtime_ns", "ctime_ns", "inode", "device", "checked_ns"), ("document_id",)
)
UNREACHABLE = Table("unreachable_document", ("document_id", "source_id", "reason", "since"), ("document_id",))
EXTRACTION = Table("document_extraction", ("document_id", "parser_version", "extracted_at"), ("document_id",))
OCR_PAGE = Table(
    "ocr_page", ("document_id", "page", "confidence", "words", "seconds", "reason"), ("document_id", "page")
)
# In the order foreign keys need. ``removed_document`` stays behind: it only
# lets the orphan sweep delete blobs of removed documents, and those are not copied.
BEFORE_CHUNKS = (COLLECTION, SOURCE, DOCUMENT, HISTORY, SECTION)
AFTER_VECTORS = (SOURCE_FILE, UNREACHABLE, EXTRACTION, OCR_PAGE)
# Tables whose ids PostgreSQL generates itself unless told otherwise.
IDENTITY_TABLES = {"status_history", "section", "chunk"}

# A chunk's stored vector, whichever store it came from.
VectorRow = tuple[int, str, str, str, int, np.ndarray]  # chunk_id, collection_id, document_id, identity, dim, vector


@dataclass(frozen=True)
class MigrationReport:
    target: str  # the server (host:port/database) or the data directory: never a password
    backend: str  # of the target: postgresql | sqlite
    documents: int
    chunks: int
    vectors: int
    blobs: int
    sources: int
    searches_checked: int
    restarted: bool  # an unfinished copy of this source was wiped and made again
    seconds: float


# ---------------------------------------------------------------- the two stores as rows


class Side(Protocol):
    """One store seen as rows: the same SQL on both (written with ``%s`` placeholders)."""

    backend: str
    store: Any

    def query(self, sql: str, params: Sequence[object] = ()) -> list[tuple]: ...

    def insert(self, table: Table, rows: Sequence[tuple]) -> None: ...

    def insert_chunks(self, rows: Sequence[tuple]) -> None: ...

    def vectors_after(self, chunk_id: int, limit: int) -> list[VectorRow]: ...

    def insert_vectors(self, rows: Sequence[VectorRow]) -> None: ...

    def chunk_high_water(self) -> int: ...

    def finish_ids(self, chunk_high_water: int, identities: Iterable[tuple[str, int]]) -> None: ...

    def meta(self, key: str) -> bytes | None: ...

    def put_meta(self, key: str, value: bytes) -> None: ...

    def wipe(self) -> None: ...

    def store_blob(self, document: tuple, plaintext: Iterator[bytes]) -> None: ...


def _insert_sql(table: Table, *, overriding: bool = False) -> str:
    override = " OVERRIDING SYSTEM VALUE" if overriding else ""
    marks = ", ".join(["%s"] * len(table.columns))
    return f"INSERT INTO {table.name} ({', '.join(table.columns)}){override} VALUES ({marks})"


class SqliteSide:
    backend = "sqlite"

    def __init__(self, store: Store) -> None:
        self.store = store

    def query(self, sql: str, params: Sequence[object] = ()) -> list[tuple]:
        return list(self.store.db.execute_sql(sql.replace("%s", "?"), list(params)).fetchall())

    def _write_many(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        with self.store.db.atomic():
            self.store.db.cursor().executemany(sql.replace("%s", "?"), rows)

    def insert(self, table: Table, rows: Sequence[tuple]) -> None:
        self._write_many(_insert_sql(table), rows)

    def insert_chunks(self, rows: Sequence[tuple]) -> None:
        self.insert(CHUNK, rows)  # the triggers fill chunk_fts and chunk_cjk

    def vectors_after(self, chunk_id: int, limit: int) -> list[VectorRow]:
        rows = self.query(
            "SELECT v.chunk_id, c.collection_id, c.document_id, v.identity, v.dim, v.embedding FROM vector AS v"
            " JOIN chunk AS c ON c.id = v.chunk_id WHERE v.chunk_id > %s ORDER BY v.chunk_id LIMIT %s",
            (chunk_id, limit),
        )
        return [(*row[:5], np.frombuffer(bytes(row[5]), dtype="<f4")) for row in rows]

    def insert_vectors(self, rows: Sequence[VectorRow]) -> None:
        self._write_many(
            "INSERT INTO vector(chunk_id, identity, dim, embedding) VALUES (%s, %s, %s, %s)",
            [(chunk_id, identity, dim, np.asarray(vector, dtype="<f4").tobytes())
             for chunk_id, _c, _d, identity, dim, vector in rows],
        )

    def chunk_high_water(self) -> int:
        row = self.query("SELECT seq FROM sqlite_sequence WHERE name = 'chunk'")
        return int(row[0][0]) if row else 0

    def finish_ids(self, chunk_high_water: int, identities: Iterable[tuple[str, int]]) -> None:
        # Chunk ids are never reused: the copy goes on from the source's high-water mark.
        # (The vector index files are built from the stored vectors on first use.)
        del identities
        with self.store.db.atomic():
            self.store.db.execute_sql(
                "INSERT INTO sqlite_sequence(name, seq) SELECT 'chunk', 0"
                " WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'chunk')"
            )
            self.store.db.execute_sql(
                "UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'chunk'", (chunk_high_water,)
            )

    def meta(self, key: str) -> bytes | None:
        row = self.query("SELECT value FROM node_meta WHERE key = %s", (key,))
        return bytes(row[0][0]) if row else None

    def put_meta(self, key: str, value: bytes) -> None:
        self._write_many("INSERT OR REPLACE INTO node_meta(key, value) VALUES (%s, %s)", [(key, value)])

    def wipe(self) -> None:
        db = self.store.db
        with db.atomic():
            # The document rows take their history, sections, chunks (and their
            # full-text rows), vectors, file states and OCR records with them.
            for statement in ("DELETE FROM document", "DELETE FROM source", "DELETE FROM collection",
                              "DELETE FROM removed_document", "DELETE FROM sqlite_sequence WHERE name = 'chunk'"):
                db.execute_sql(statement)
            # A vector index file saved by the unfinished copy must not be trusted.
            db.execute_sql(
                "UPDATE node_meta SET value = ? WHERE key = 'vector_index_epoch'",
                (secrets.token_hex(16).encode("ascii"),),
            )
        for blob_id in self.store.blobs.blob_ids():
            self.store.blobs.delete(blob_id)

    def store_blob(self, document: tuple, plaintext: Iterator[bytes]) -> None:
        document_id, collection_id, sealed_name, source_path, fmt = document
        label = DocumentLabel(collection_id, open_name(self.store.node_key, document_id, bytes(sealed_name)),
                              source_path, fmt)
        self.store.blobs.seal(document_id, _PlaintextReader(plaintext), label=label)


# The chunk columns a PostgreSQL row is written with, and the array type each is sent as.
_PG_CHUNK_TYPES = (
    "bigint", "text", "text", "bigint", "text", "integer", "text", "text", "text", "text", "text", "text", "text",
    "integer", "integer", "integer", "integer",
)
_PG_INDEXED = (("search_vector", "text"), ("path_tokens", "integer"), ("heading_tokens", "integer"),
               ("symbol_tokens", "integer"), ("body_tokens", "integer"), ("has_cjk", "boolean"))
_PG_INSERT_CHUNKS = (
    f"INSERT INTO chunk({', '.join(CHUNK.columns)}, search_vector, column_tokens, has_cjk) OVERRIDING SYSTEM VALUE "
    f"SELECT {', '.join(CHUNK.columns)}, search_vector::tsvector,"
    " ARRAY[path_tokens, heading_tokens, symbol_tokens, body_tokens], has_cjk FROM unnest("
    + ", ".join(f"%s::{kind}[]" for kind in (*_PG_CHUNK_TYPES, *(k for _, k in _PG_INDEXED)))
    + f") AS rows({', '.join(CHUNK.columns)}, {', '.join(name for name, _ in _PG_INDEXED)})"
)


class PostgresSide:
    backend = "postgresql"

    def __init__(self, store: PostgresStore) -> None:
        self.store = store

    def query(self, sql: str, params: Sequence[object] = ()) -> list[tuple]:
        with self.store.connections.connection() as conn:
            return list(conn.execute(sql, list(params)).fetchall())

    def _write_many(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        with self.store.connections.connection() as conn, conn.transaction(), conn.cursor() as cursor:
            cursor.executemany(sql, rows)

    def insert(self, table: Table, rows: Sequence[tuple]) -> None:
        self._write_many(_insert_sql(table, overriding=table.name in IDENTITY_TABLES), rows)

    def insert_chunks(self, rows: Sequence[tuple]) -> None:
        # One statement per batch: the lexical statistics trigger runs once for it.
        index = CHUNK.columns.index
        columns: list[list[object]] = [[] for _ in range(len(CHUNK.columns) + len(_PG_INDEXED))]
        for row in rows:
            vector, counts, has_cjk = indexed_columns(
                row[index("source_path")], row[index("heading_path")], row[index("symbol")], row[index("content")]
            )
            for column, value in zip(columns, (*row, vector, *counts, has_cjk), strict=True):
                column.append(value)
        with self.store.connections.connection() as conn, conn.transaction():
            conn.execute(_PG_INSERT_CHUNKS, columns)

    def vectors_after(self, chunk_id: int, limit: int) -> list[VectorRow]:
        rows = self.query(
            "SELECT chunk_id, collection_id, document_id, identity, dim, embedding FROM chunk_vector"
            " WHERE chunk_id > %s ORDER BY chunk_id LIMIT %s",
            (chunk_id, limit),
        )
        return [(*row[:5], np.asarray(row[5].to_numpy(), dtype=np.float32)) for row in rows]

    def insert_vectors(self, rows: Sequence[VectorRow]) -> None:
        self._write_many(
            "INSERT INTO chunk_vector(chunk_id, collection_id, document_id, identity, dim, embedding)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            [(chunk_id, collection_id, document_id, identity, dim, np.asarray(vector, dtype=np.float32))
             for chunk_id, collection_id, document_id, identity, dim, vector in rows],
        )

    def chunk_high_water(self) -> int:
        row = self.query("SELECT pg_sequence_last_value(pg_get_serial_sequence('chunk', 'id')::regclass)")
        return int(row[0][0] or 0) if row else 0

    def finish_ids(self, chunk_high_water: int, identities: Iterable[tuple[str, int]]) -> None:
        with self.store.connections.connection() as conn:
            # Rows came with their ids: each sequence goes on after the highest (chunks: the source's mark).
            for table in sorted(IDENTITY_TABLES):
                row = conn.execute(f"SELECT coalesce(max(id), 0) FROM {table}").fetchone()  # noqa: S608 - fixed names
                highest = max(int(row[0]) if row else 0, chunk_high_water if table == "chunk" else 0)
                if highest > 0:
                    conn.execute("SELECT setval(pg_get_serial_sequence(%s, 'id'), %s)", (table, highest))
            # The HNSW index of each identity, built once over all its rows rather than row by row.
            for identity, dim in identities:
                ensure_vector_index(conn, identity, dim)

    def meta(self, key: str) -> bytes | None:
        row = self.query("SELECT value FROM node_meta WHERE key = %s", (key,))
        return bytes(row[0][0]) if row else None

    def put_meta(self, key: str, value: bytes) -> None:
        self._write_many(
            "INSERT INTO node_meta(key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            [(key, value)],
        )

    def wipe(self) -> None:
        with self.store.connections.connection() as conn, conn.transaction():
            # TRUNCATE fires no row triggers: the lexical statistics are reset with the rows they count.
            conn.execute(
                "TRUNCATE collection, source, document, status_history, section, chunk, chunk_vector, source_file,"
                " unreachable_document, document_extraction, ocr_page, removed_document, blob, blob_segment,"
                " lexeme_stat"
            )
            conn.execute("UPDATE lexical_total SET chunks = 0, tokens = 0, cjk_chunks = 0, cjk_chars = 0")

    def store_blob(self, document: tuple, plaintext: Iterator[bytes]) -> None:
        self.store.blobs.seal(document[0], cast(BinaryIO, _PlaintextReader(plaintext)))  # it only reads


def _side(store: Store | PostgresStore) -> Side:
    return PostgresSide(store) if isinstance(store, PostgresStore) else SqliteSide(store)


# ---------------------------------------------------------------- naming and opening the target


@dataclass(frozen=True)
class Target:
    """Where ``--to`` points: a PostgreSQL URL, or a new SQLite data directory."""

    url: str | None = None
    path: Path | None = None

    @property
    def backend(self) -> str:
        return "postgresql" if self.url else "sqlite"

    @property
    def name(self) -> str:
        return server_name(self.url) if self.url else str(self.path)


def parse_target(text: str) -> Target:
    """``postgresql://...`` or ``sqlite:PATH``; anything else is refused (never echoed: it may hold a password)."""
    text = text.strip()
    if is_postgres_url(text):
        return Target(url=text)
    if text.lower().startswith("sqlite:") and text[len("sqlite:"):].strip():
        return Target(path=Path(text[len("sqlite:"):].strip()).expanduser().absolute())
    raise MigrationRefused("--to takes postgresql://USER@HOST/DATABASE or sqlite:PATH (a new data directory)")


def _open_target(target: Target, home: Path, key: bytes) -> Store | PostgresStore:
    if target.url is not None:
        # The node's own data directory keeps the key; the database records its fingerprint
        # (a database written with another key is refused here, with how to copy it).
        return open_postgres_store(home, target.url)
    assert target.path is not None
    path = target.path
    if path == home.absolute():
        raise MigrationRefused("sqlite:PATH must name a new data directory, not this node's own")
    if not path.exists() or (path.is_dir() and not any(path.iterdir())):
        return create_store(path, key)
    store = open_store(path)
    if store.node_key != key:
        store.close()
        raise MigrationRefused(f"the data directory {path} holds another knowledge base (another node key); give a new one")
    return store


# ---------------------------------------------------------------- the copy


def migrate(
    home: Path, database_url: str, target_text: str, *, settings: bytes | None = None,
    on_progress: Progress | None = None,
) -> MigrationReport:
    """Copy the knowledge base of ``home`` (on PostgreSQL when ``database_url``)
    to ``target_text``; ``settings`` is written as a SQLite target's
    ``config.toml`` when it has none."""
    started = time.monotonic()
    target = parse_target(target_text)
    source_backend = "postgresql" if database_url else "sqlite"
    if target.backend == source_backend:
        raise MigrationRefused(
            f"this knowledge base is already on {'PostgreSQL' if database_url else 'SQLite'}: kbtui migrate moves it "
            "to the other store" + ("" if database_url else " (to copy a data directory, use kbtui backup)")
        )
    source = open_postgres_store(home, database_url, read_only=True) if database_url else open_store(home, read_only=True)
    try:
        lock = source.lock_node()
        if lock is None:
            raise MigrationProblem("a node is running on this knowledge base; stop it first (a copy must not change under way)")
        try:
            target_store = _open_target(target, home, source.node_key)
            try:
                report = _copy(_side(source), _side(target_store), target, settings, on_progress or _nothing)
            finally:
                target_store.close()
        finally:
            lock.release()
    finally:
        source.close()
    return dataclasses.replace(report, seconds=time.monotonic() - started)


def _nothing(stage: str, done: int, total: int) -> None:
    del stage, done, total


def _copy(source: Side, target: Side, where: Target, settings: bytes | None, progress: Progress) -> MigrationReport:
    source_id = source.meta(CATALOG_ID_KEY)
    if source_id is None:
        raise CatalogProblem("the knowledge base has no catalog id; run kbtui doctor (nothing was changed)")
    restarted = _claim(target, where, source_id)
    for table in BEFORE_CHUNKS:
        _copy_table(source, target, table, progress)
    _copy_table(source, target, CHUNK, progress, insert=target.insert_chunks)
    identities = _copy_vectors(source, target, progress)
    for table in AFTER_VECTORS:
        _copy_table(source, target, table, progress)
    target.finish_ids(source.chunk_high_water(), identities)
    blobs = _copy_blobs(source, target, progress)
    if settings is not None and where.path is not None:
        create_once(where.path / SETTINGS_FILE_NAME, settings)  # the operator's own file, if any, stands
        os.chmod(where.path / SETTINGS_FILE_NAME, 0o600)
    counts = _checked_counts(source, target, blobs)
    searches = _checked_searches(source, target, progress)
    target.put_meta(MIGRATION_DONE_KEY, str(time.time()).encode("ascii"))  # last: the copy is whole
    return MigrationReport(
        target=where.name, backend=where.backend, documents=counts["document"], chunks=counts["chunk"],
        vectors=counts["vectors"], blobs=blobs, sources=counts["source"], searches_checked=searches,
        restarted=restarted, seconds=0.0,
    )


def _claim(target: Side, where: Target, source_id: bytes) -> bool:
    """Make the target this source's copy: True when an unfinished copy of it was wiped.
    Refuses a finished copy, and a store holding anything else."""
    copied_from = target.meta(MIGRATED_FROM_KEY)
    if target.meta(MIGRATION_DONE_KEY) is not None:
        raise MigrationRefused(f"{where.name} already holds a finished kbtui migrate; give an empty store")
    if copied_from == source_id:
        target.wipe()
        return True
    held = target.query(
        "SELECT (SELECT count(*) FROM document) + (SELECT count(*) FROM source) + (SELECT count(*) FROM collection)"
    )[0][0]
    if held or copied_from is not None or target.store.blobs.blob_ids():
        raise MigrationRefused(f"{where.name} already holds a knowledge base; kbtui migrate copies into an empty store")
    target.put_meta(MIGRATED_FROM_KEY, source_id)  # first: from here on, a re-run may wipe it
    return False


def _pages(side: Side, table: Table) -> Iterator[list[tuple]]:
    """The rows of ``table`` in key order, a batch at a time (the key's values resume each page)."""
    columns = ", ".join(table.columns)
    order = ", ".join(table.key)
    positions = [table.columns.index(k) for k in table.key]
    last: list[object] | None = None
    while True:
        if last is None:
            rows = side.query(f"SELECT {columns} FROM {table.name} ORDER BY {order} LIMIT %s", (BATCH,))  # noqa: S608
        else:
            marks = ", ".join(["%s"] * len(table.key))
            rows = side.query(
                f"SELECT {columns} FROM {table.name} WHERE ({order}) > ({marks}) ORDER BY {order} LIMIT %s",  # noqa: S608
                (*last, BATCH),
            )
        if not rows:
            return
        yield [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row) for row in rows]
        last = [rows[-1][p] for p in positions]


def _count(side: Side, table: str) -> int:
    return int(side.query(f"SELECT count(*) FROM {table}")[0][0])  # noqa: S608 - fixed names


def _copy_table(
    source: Side, target: Side, table: Table, progress: Progress, *, insert: Callable[[Sequence[tuple]], None] | None = None
) -> None:
    stage = {"document": "documents", "chunk": "chunks"}.get(table.name, "catalog")
    total, done = _count(source, table.name), 0
    if stage != "catalog":
        progress(stage, 0, total)
    for rows in _pages(source, table):
        (insert or (lambda batch: target.insert(table, batch)))(rows)
        done += len(rows)
        if stage != "catalog":
            progress(stage, done, total)


def _copy_vectors(source: Side, target: Side, progress: Progress) -> set[tuple[str, int]]:
    """Every stored vector, as it is (nothing is embedded again); the identities met."""
    total = _count(source, "vector" if source.backend == "sqlite" else "chunk_vector")
    done, last, identities = 0, 0, set()
    progress("vectors", 0, total)
    while rows := source.vectors_after(last, BATCH):
        target.insert_vectors(rows)
        identities |= {(identity, int(dim)) for _c, _cl, _d, identity, dim, _v in rows}
        done += len(rows)
        last = rows[-1][0]
        progress("vectors", done, total)
    return identities


def _copy_blobs(source: Side, target: Side, progress: Progress) -> int:
    """The encrypted source of every document that has one; how many were copied."""
    held = source.store.blobs.blob_ids()
    documents = Table("document", ("id", "collection_id", "display_name", "source_path", "format"))
    total = sum(1 for rows in _pages(source, Table("document", ("id",))) for row in rows if row[0] in held)
    done = 0
    progress("sources", 0, total)
    for rows in _pages(source, documents):
        for document in rows:
            if document[0] in held:
                target.store_blob(document, source.store.blobs.iter_plaintext(document[0]))
                done += 1
                progress("sources", done, total)
    return done


# ---------------------------------------------------------------- the closing check


COUNTED = (COLLECTION, SOURCE, DOCUMENT, HISTORY, SECTION, CHUNK, SOURCE_FILE, UNREACHABLE, EXTRACTION, OCR_PAGE)


def _checked_counts(source: Side, target: Side, blobs: int) -> dict[str, int]:
    """Every table's row count on both sides; :class:`MigrationProblem` on a difference."""
    counts = {}
    for table in COUNTED:
        here, there = _count(source, table.name), _count(target, table.name)
        if here != there:
            raise MigrationProblem(
                f"the copy has {there} {table.name} row(s) where the source has {here}; "
                "it was left unfinished: run kbtui migrate again"
            )
        counts[table.name] = here
    vectors = [_count(side, "vector" if side.backend == "sqlite" else "chunk_vector") for side in (source, target)]
    if vectors[0] != vectors[1]:
        raise MigrationProblem(
            f"the copy has {vectors[1]} vector(s) where the source has {vectors[0]}; "
            "it was left unfinished: run kbtui migrate again"
        )
    if len(target.store.blobs.blob_ids()) != blobs:
        raise MigrationProblem("the copy's encrypted sources are not all there; it was left unfinished: run kbtui migrate again")
    counts["vectors"] = vectors[0]
    return counts


_WORD = re.compile(r"\w{4,}")


def _checked_searches(source: Side, target: Side, progress: Progress) -> int:
    """A sample of chunks spread over the base, each searched for on both sides by
    its longest words (the lexical index) and by its stored vector (the vector
    index): the top hits must be the same (or tie). Returns how many searches ran."""
    bounds = source.query(
        "SELECT min(c.id), max(c.id) FROM chunk AS c JOIN document AS d ON d.id = c.document_id"
        " WHERE d.status <> 'Failed'"
    )[0]
    if bounds[0] is None:
        return 0
    low, high = int(bounds[0]), int(bounds[1])
    step = max(1, (high - low + 1) // SAMPLE_SEARCHES)
    ran, differ = 0, 0
    progress("checking searches", 0, SAMPLE_SEARCHES * 2)
    for start in range(low, high + 1, step)[:SAMPLE_SEARCHES]:
        found = source.query(
            "SELECT c.id, c.collection_id, c.content FROM chunk AS c JOIN document AS d ON d.id = c.document_id"
            " WHERE c.id >= %s AND d.status <> 'Failed' ORDER BY c.id LIMIT 1",
            (start,),
        )
        if not found:
            continue
        chunk_id, collection_id, content = found[0]
        words = sorted(set(_WORD.findall(content.lower())), key=lambda w: (-len(w), w))[:4]
        if words:
            ran += 1
            differ += not _same_top(
                *(side.store.lexical.ranked_matches(words, collection_id, limit=SEARCH_LIMIT) for side in (source, target))
            )
        stored = source.vectors_after(chunk_id - 1, 1)
        if stored and stored[0][0] == chunk_id:
            _c, _cl, _d, identity, _dim, vector = stored[0]
            ran += 1
            differ += not _same_top(
                *(side.store.vectors.search(vector, identity, collection_id, limit=SEARCH_LIMIT) for side in (source, target))
            )
        progress("checking searches", ran, SAMPLE_SEARCHES * 2)
    if differ:
        raise MigrationProblem(
            f"{differ} of {ran} sample searches found other top hits in the copy than in the source; "
            "it was left unfinished: run kbtui migrate again"
        )
    return ran


def _same_top(one: list[tuple[int, float]], other: list[tuple[int, float]]) -> bool:
    """Whether two result lists agree on their best hit: the same chunk, or one tied with it
    (the stores' scores may differ in the last digits, and ties may fall either way)."""
    if not one or not other:
        return not one and not other

    def near_best(hits: list[tuple[int, float]]) -> set[int]:
        best = hits[0][1]
        return {chunk_id for chunk_id, score in hits if score >= best - 1e-3 * max(1.0, abs(best))}

    return other[0][0] in near_best(one) or one[0][0] in near_best(other)


__all__ = ["MigrationProblem", "MigrationRefused", "MigrationReport", "Target", "migrate", "parse_target"]
