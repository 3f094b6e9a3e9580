"""The PostgreSQL store as the domain sees it: every interface of
``kbtui.ports`` over one database (``KBTUI_DATABASE_URL=postgresql://...``).

Connections come from a pool. :meth:`PostgresStore.session` gives the calling
thread one pooled connection for the length of a use case (every call in it
runs on that connection); a call outside a session takes a pooled connection
for itself and returns it. A read that is consumed later (a document's
chunks, a blob's segments) holds a connection of its own until it ends, so
an abandoned iterator never leaves a transaction open on a session's
connection. A server condition met by any call (unreachable, too slow, lost
mid-transaction) becomes one line naming the server (:class:`ServerProblem`);
the password is never shown, and psycopg's own log records keep only their
first words (:class:`store.postgres.connection.DriverLogs`).

The node key stays in ``$KBTUI_HOME/node.key``; its fingerprint lives in the
database (every node that opens it must hold the same key) and beside the
key file. ``$KBTUI_HOME`` also keeps the node's lock, its id (``node.id``),
logs and API socket: one pipeline per data directory, as with SQLite, and
any number of data directories (nodes, on any machines) per database,
sharing the work through :mod:`store.postgres.coordination`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import secrets
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Concatenate, Generic, ParamSpec, TypeVar, overload

import numpy as np
import psycopg
from psycopg_pool import ConnectionPool

from store.blobs import open_display_names
from store.datadir import CATALOG_ID_KEY, Fingerprint, prepare_home, write_fingerprint_file
from store.errors import KeyProblem, NoKnowledgeBase
from store.fts import COLUMN_WEIGHTS
from store.keys import KEY_FILE_NAME, key_fingerprint, load_or_create_key
from store.postgres import catalog, chunks, lexical, sources, vectors
from store.postgres.blobs import PostgresBlobStore
from store.postgres.connection import (
    PostgresSettings,
    connect,
    connection_arguments,
    register_types,
    translated_errors,
)
from store.postgres.coordination import PostgresCoordination, node_id_of, reset_own_work
from store.postgres.keys import check_node_key, refuse_other_key, stored_fingerprint
from store.postgres.migrations import LATEST_VERSION, apply_migrations, current_version, newer_schema_problem
from store.records import AddOutcome, ChunkRecord, FileState, RegisteredSource, Status

log = logging.getLogger(__name__)

# Connections one process may hold: a session per busy thread (the pipeline's
# actors, the API's request threads, search) plus readers being consumed.
POOL_MAX_SIZE = 24

_P = ParamSpec("_P")
_R = TypeVar("_R")


class Connections:
    """The store's pool and each thread's session connection."""

    def __init__(self, settings: PostgresSettings, *, max_size: int = POOL_MAX_SIZE) -> None:
        self.settings = settings
        conninfo, keywords = connection_arguments(settings)
        self._pool: ConnectionPool = ConnectionPool(
            conninfo,
            kwargs=keywords,
            min_size=1,
            max_size=max_size,
            open=False,
            configure=register_types,
            # A connection broken by a server restart is replaced before it is handed out.
            check=ConnectionPool.check_connection,
            timeout=settings.connect_timeout_s + 1,
            name="kbtui",
        )
        self._local = threading.local()

    def open(self) -> None:
        with self.translated():
            self._pool.open(wait=True, timeout=self.settings.connect_timeout_s + 1)

    def close(self) -> None:
        self._pool.close()

    def translated(self) -> contextlib.AbstractContextManager[None]:
        return translated_errors(self.settings)

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        if getattr(self._local, "conn", None) is not None:
            yield
            return
        with self.translated():
            conn = self._pool.getconn()
        self._local.conn = conn
        try:
            yield
        finally:
            self._local.conn = None
            self._pool.putconn(conn)

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """The thread's session connection, or a pooled one for this call."""
        held = getattr(self._local, "conn", None)
        with self.translated():
            if held is not None:
                yield held
            else:
                with self._pool.connection() as conn:
                    yield conn

    @contextlib.contextmanager
    def dedicated(self) -> Iterator[psycopg.Connection]:
        """A pooled connection of its own (never the session's), for a read consumed later."""
        with self.translated(), self._pool.connection() as conn:
            yield conn


class _Connected(Generic[_P, _R]):
    """A store function ``fn(conn, *args)`` as a method of an adapter: each call
    runs on the thread's connection (``mypy`` checks the resulting signature
    against the port)."""

    def __init__(self, fn: Callable[Concatenate[psycopg.Connection, _P], _R]) -> None:
        self._fn = fn

    @overload
    def __get__(self, adapter: None, owner: type) -> _Connected[_P, _R]: ...

    @overload
    def __get__(self, adapter: _Adapter, owner: type) -> Callable[_P, _R]: ...

    def __get__(self, adapter: _Adapter | None, owner: type) -> Any:
        if adapter is None:
            return self
        fn = self._fn
        connections = adapter.store.connections

        @functools.wraps(fn)
        def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            with connections.connection() as conn:
                return fn(conn, *args, **kwargs)

        return call


class _Keyed(Generic[_P, _R]):
    """As :class:`_Connected`, for ``fn(conn, node_key, *args)``."""

    def __init__(self, fn: Callable[Concatenate[psycopg.Connection, bytes, _P], _R]) -> None:
        self._fn = fn

    @overload
    def __get__(self, adapter: None, owner: type) -> _Keyed[_P, _R]: ...

    @overload
    def __get__(self, adapter: _Adapter, owner: type) -> Callable[_P, _R]: ...

    def __get__(self, adapter: _Adapter | None, owner: type) -> Any:
        if adapter is None:
            return self
        fn = self._fn
        store = adapter.store

        @functools.wraps(fn)
        def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            with store.connections.connection() as conn:
                return fn(conn, store.node_key, *args, **kwargs)

        return call


class _Adapter:
    def __init__(self, store: PostgresStore) -> None:
        self.store = store


class PostgresCatalog(_Adapter):
    collection_exists = _Connected(catalog.collection_exists)
    list_collections = _Connected(catalog.list_collections)
    document = _Connected(catalog.document)
    document_at = _Connected(catalog.document_at)
    resolve_document = _Connected(catalog.resolve_document)
    documents = _Connected(catalog.documents)
    document_ids_with_prefix = _Connected(catalog.document_ids_with_prefix)
    statuses = _Connected(catalog.statuses)
    status_counts = _Connected(catalog.status_counts)
    catalog_stamp = _Connected(catalog.catalog_stamp)
    indexed_chunk_total = _Connected(catalog.indexed_chunk_total)
    history = _Connected(catalog.history)
    purge_document = _Connected(catalog.purge_document)
    sweep_orphan_blobs = _Connected(catalog.sweep_orphan_blobs)
    pending_document_ids = _Connected(catalog.pending_document_ids)
    stale_document_ids = _Connected(catalog.stale_document_ids)
    mark_pending = _Connected(catalog.mark_pending)
    record_extraction = _Connected(catalog.record_extraction)
    ocr_pages = _Connected(catalog.ocr_pages)
    low_confidence_document_ids = _Connected(catalog.low_confidence_document_ids)
    ocr_pages_read_recently = _Connected(catalog.ocr_pages_read_recently)

    def add_document(
        self, collection_id: str, source: Path, *, display_name: str, fmt: str, max_bytes: int | None = None
    ) -> AddOutcome:
        with self.store.connections.connection() as conn:
            return catalog.add_document(
                conn, self.store.blobs, self.store.node_key, collection_id, source, display_name=display_name,
                fmt=fmt, max_bytes=max_bytes,
            )

    def add_upload(self, collection_id: str, data: bytes, *, display_name: str, fmt: str) -> AddOutcome:
        with self.store.connections.connection() as conn:
            return catalog.add_upload(
                conn, self.store.blobs, self.store.node_key, collection_id, data, display_name=display_name, fmt=fmt
            )

    def create_document(
        self, collection_id: str, source: BinaryIO, *, content_hash: str, display_name: str, fmt: str,
        source_path: str | None = None,
    ) -> str:
        with self.store.connections.connection() as conn:
            return catalog.create_document(
                conn, self.store.blobs, self.store.node_key, collection_id, source, content_hash=content_hash,
                display_name=display_name, fmt=fmt, source_path=source_path,
            )

    def set_status(
        self, document_id: str, status: Status, *, reason: str | None = None, progress: float | None = None,
        content_hash: str | None = None,
    ) -> bool:
        with self.store.connections.connection() as conn:
            return catalog.set_status(
                conn, document_id, status, reason=reason, progress=progress, content_hash=content_hash,
                lease_holder=self.store.coordination.pipeline_node(),
            )

    def commit_index(
        self, document_id: str, *, sections: Sequence[Any], chunks: Sequence[Any], vectors: np.ndarray,
        identity: str, parser_version: int, chunker_version: int, content_hash: str | None = None,
    ) -> list[int] | None:
        with self.store.connections.connection() as conn:
            return catalog.commit_index(
                conn, document_id, sections=sections, chunks=chunks, vectors=vectors, identity=identity,
                parser_version=parser_version, chunker_version=chunker_version, content_hash=content_hash,
                lease_holder=self.store.coordination.pipeline_node(),
            )

    def reset_non_terminal(self) -> int:
        with self.store.connections.connection() as conn:
            return reset_own_work(conn, self.store.coordination.node_id)

    def upgrade_legacy_blob(self, document_id: str) -> bool:
        # Blobs in rows keep the unlabelled format: the row that holds a source is
        # beside its document's row, so there is no label to add.
        return False

    def display_names(self, document_ids: Sequence[str]) -> dict[str, str]:
        with self.store.connections.connection() as conn:
            sealed = catalog.sealed_names(conn, document_ids)
        return open_display_names(self.store.node_key, sealed)


class PostgresSources(_Adapter):
    get_source = _Keyed(sources.get_source)
    find_source = _Keyed(sources.find_source)
    sources_at = _Keyed(sources.sources_at)
    list_sources = _Keyed(sources.list_sources)
    resolve_source = _Keyed(sources.resolve_source)
    record_scan = _Keyed(sources.record_scan)
    last_scan_report = _Keyed(sources.last_scan_report)
    move_source_document = _Keyed(sources.move_source_document)
    registration_stamp = _Connected(sources.registration_stamp)
    set_watching = _Connected(sources.set_watching)
    set_include_sensitive = _Connected(sources.set_include_sensitive)
    set_watch_state = _Connected(sources.set_watch_state)
    clear_watch_states = _Connected(sources.clear_watch_states)
    move_to_collection = _Connected(sources.move_to_collection)
    record_reachability = _Connected(sources.record_reachability)
    unreachable_documents = _Connected(sources.unreachable_documents)
    document_counts = _Connected(sources.document_counts)
    documents_of = _Connected(sources.documents_of)
    loose_document_at = _Connected(sources.loose_document_at)
    adopt_document = _Connected(sources.adopt_document)
    record_file_state = _Connected(sources.record_file_state)
    unregister_source = _Connected(sources.unregister_source)

    def register_source(
        self, *, kind: str, root: str, collection_id: str, name: str, include_sensitive: bool = False,
        root_identity: tuple[int, int] | None = None,
    ) -> RegisteredSource:
        """As the port says; the source belongs to this node (its root is on this machine)."""
        with self.store.connections.connection() as conn:
            return sources.register_source(
                conn, self.store.node_key, kind=kind, root=root, collection_id=collection_id, name=name,
                include_sensitive=include_sensitive, root_identity=root_identity,
                owner_node=self.store.coordination.node_id,
            )

    def watched_sources(self) -> list[RegisteredSource]:
        """The watched sources whose roots are on this node's machine (others' are theirs to watch)."""
        with self.store.connections.connection() as conn:
            return sources.watched_sources(conn, self.store.node_key, owner_node=self.store.coordination.node_id)

    def add_source_document(
        self, source_id: str, collection_id: str, *, source_path: str, display_name: str, fmt: str, data: bytes,
        content_hash: str, state: FileState,
    ) -> str:
        with self.store.connections.connection() as conn:
            return sources.add_source_document(
                conn, self.store.blobs, self.store.node_key, source_id, collection_id, source_path=source_path,
                display_name=display_name, fmt=fmt, data=data, content_hash=content_hash, state=state,
            )

    def update_source_document(
        self, document_id: str, *, fmt: str, data: bytes, content_hash: str, state: FileState
    ) -> bool:
        with self.store.connections.connection() as conn:
            return sources.update_source_document(
                conn, self.store.blobs, document_id, fmt=fmt, data=data, content_hash=content_hash, state=state
            )


class PostgresChunks(_Adapter):
    served_chunks = _Connected(chunks.served_chunks)
    section_openers = _Connected(chunks.section_openers)
    neighbours = _Connected(chunks.neighbours)
    served_document = _Connected(chunks.served_document)
    sections = _Connected(chunks.sections)
    chunk_summaries = _Connected(chunks.chunk_summaries)

    def document_chunks(self, document_id: str, collection_id: str) -> Iterator[ChunkRecord]:
        with self.store.connections.dedicated() as conn:
            yield from chunks.document_chunks(conn, document_id, collection_id)


class PostgresLexical(_Adapter):
    COLUMN_WEIGHTS: tuple[float, ...] = COLUMN_WEIGHTS
    # ts_rank_cd per word on each matching heap row: two to three times FTS5's
    # bm25() per row at a million chunks (benchmarks/search.py --store postgresql).
    ROW_COST = 2.0
    indexed_chunk_count = _Connected(lexical.indexed_chunk_count)
    term_row_counts = _Connected(lexical.term_row_counts)
    ranked_matches = _Connected(lexical.ranked_matches)
    newest_matches = _Connected(lexical.newest_matches)
    cjk_ranked_matches = _Connected(lexical.cjk_ranked_matches)
    cjk_substring_matches = _Connected(lexical.cjk_substring_matches)
    bm25_statistics = _Connected(lexical.bm25_statistics)
    row_token_counts = _Connected(lexical.row_token_counts)
    column_texts = _Connected(lexical.column_texts)


class PostgresVectors(_Adapter):
    """pgvector: the HNSW index of each identity lives in the database and
    follows every commit and purge, so the notes a file cache needs are no-ops."""

    search = _Connected(vectors.search)
    stored_vectors = _Connected(vectors.stored_vectors)
    committed_vectors = _Connected(vectors.committed_vectors)

    def note_committed(self, chunk_ids: Any = ()) -> None:
        del chunk_ids

    def note_removed(self, chunk_ids: Any) -> None:
        del chunk_ids

    def save(self) -> None:
        return None

    def close(self) -> None:
        return None


class PostgresStore:
    """An opened PostgreSQL knowledge base (made by :func:`open_postgres_store`)."""

    backend = "postgresql"

    def __init__(
        self, home: Path, settings: PostgresSettings, connections: Connections, node_key: bytes, *, read_only: bool
    ) -> None:
        self.home = home
        self.settings = settings
        self.connections = connections
        self.node_key = node_key
        self.read_only = read_only
        self.blobs = PostgresBlobStore(connections.connection, node_key, reader=connections.dedicated)
        self.catalog = PostgresCatalog(self)
        self.sources = PostgresSources(self)
        self.chunks = PostgresChunks(self)
        self.lexical = PostgresLexical(self)
        self.vectors = PostgresVectors(self)
        self.coordination = PostgresCoordination(connections, settings, node_id_of(home))

    @property
    def server(self) -> str:
        return self.settings.server

    def session(self) -> contextlib.AbstractContextManager[None]:
        """The calling thread's pooled connection, held until the block ends."""
        return self.connections.session()

    def lock_node(self) -> Any:
        """This data directory's ``node.lock`` (None when a node runs here).

        Nodes of other data directories (other machines, the key copied) may
        run beside this one: they share the work through
        :attr:`coordination`, which the pipeline joins once it holds this lock."""
        from store.node_lock import NodeLock

        return NodeLock.try_acquire(self.home)

    def node_running(self) -> bool:
        from store.node_lock import node_running

        return node_running(self.home)

    def close(self) -> None:
        self.connections.close()


def open_postgres_store(home: Path, url: str, *, read_only: bool = False) -> PostgresStore:
    """Open the PostgreSQL store at ``url`` for the node whose data directory is
    ``home``: the schema brought up to date (a newer one refused), the node key
    checked against the database (the first node records it; another key is
    refused with how to copy the right one), then the pool opened.

    A read-only open never writes (the server refuses it), except to upgrade
    an older schema, once, as the SQLite store does.
    """
    settings = PostgresSettings(url, read_only=read_only)
    server = settings.server
    # No data directory, so no key: the database says whether that means "nothing yet" or "copy the key".
    with contextlib.suppress(NoKnowledgeBase):
        prepare_home(home, create=not read_only)
    key = _checked_schema_and_key(home, settings)
    connections = Connections(settings)
    try:
        connections.open()
    except BaseException:
        connections.close()
        raise
    log.debug("opened the PostgreSQL store at %s", server)
    return PostgresStore(home, settings, connections, key, read_only=read_only)


def _checked_schema_and_key(home: Path, settings: PostgresSettings) -> bytes:
    server = settings.server
    conn = connect(settings)
    try:
        with translated_errors(settings):
            version = current_version(conn)
            if version > LATEST_VERSION:
                raise newer_schema_problem(version, server)
            recorded = stored_fingerprint(conn) if version else None
            if settings.read_only and recorded is None:
                raise NoKnowledgeBase(
                    f"no knowledge base in the PostgreSQL database {server} yet; add documents with kbtui add"
                )
            if recorded is not None and not (home / KEY_FILE_NAME).exists():
                raise KeyProblem(
                    f"the PostgreSQL database {server} was written with a node key this node does not have "
                    f"(no {KEY_FILE_NAME} in {home}); copy {KEY_FILE_NAME} from a node that uses this database "
                    "into this node's data directory (owner-only, chmod 600)"
                )
            key = load_or_create_key(home, data_exists=recorded is not None)
            if version < LATEST_VERSION:
                _upgrade(conn, settings)
            if settings.read_only:
                refuse_other_key(key, recorded, server=server)
            else:
                check_node_key(conn, key, server=server)
                conn.execute(
                    "INSERT INTO node_meta(key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING",
                    (CATALOG_ID_KEY, secrets.token_hex(16).encode("ascii")),
                )
            row = conn.execute("SELECT value FROM node_meta WHERE key = %s", (CATALOG_ID_KEY,)).fetchone()
        if row is not None and home.exists() and not settings.read_only:
            # Beside the key, as the SQLite store keeps it (the first record stands).
            write_fingerprint_file(home, Fingerprint(key_fingerprint(key), bytes(row[0]).decode("ascii")))
        return key
    finally:
        conn.close()


def _upgrade(conn: psycopg.Connection, settings: PostgresSettings) -> None:
    """Apply due migrations; a read-only open does it through a writing connection, once."""
    if not settings.read_only:
        apply_migrations(conn, server=settings.server)
        return
    writer = connect(PostgresSettings(settings.url, read_only=False))
    try:
        apply_migrations(writer, server=settings.server)
    finally:
        writer.close()
    log.info("upgraded the PostgreSQL schema to version %d", LATEST_VERSION)


__all__ = ["PostgresStore", "open_postgres_store"]
