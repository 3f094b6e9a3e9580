"""Sources (folders, single files, Git repositories) and the documents they own,
on PostgreSQL: :mod:`store.sources` with the connection first.

The same rules: a source belongs to one collection; within it a document is
identified by its relative path; the root path, the name and the last scan's
report are sealed with the node key, and ``root_digest`` (a keyed hash, the
same as SQLite's) finds a root again without storing it in the clear.
"""

from __future__ import annotations

import io
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import psycopg

from store.blobs import open_name, seal_name
from store.errors import NotFound, SourceAlreadyRegistered, StoreError
from store.postgres import catalog
from store.postgres.blobs import PostgresBlobStore
from store.postgres.lexical import indexed_columns
from store.records import FileState, PathDocument, RegisteredSource, Status
from store.source_keys import SOURCE_KINDS, name_context, report_context, root_context, root_digest

_SOURCE_COLUMNS = (
    "id, kind, collection_id, name, root_path, include_sensitive, watching, watch_state, created_at,"
    " last_scan_at, last_scan_status, last_commit, root_device, root_inode, unreachable_reason, unreachable_since,"
    " owner_node"
)


def _registered(node_key: bytes, row: Sequence[Any]) -> RegisteredSource:
    (source_id, kind, collection_id, name, root, include_sensitive, watching, watch_state, created_at,
     last_scan_at, last_scan_status, last_commit, root_device, root_inode, unreachable_reason, unreachable_since,
     owner_node) = row
    return RegisteredSource(
        id=source_id,
        kind=kind,
        collection_id=collection_id,
        name=open_name(node_key, name_context(source_id), bytes(name)),
        root=open_name(node_key, root_context(source_id), bytes(root)),
        include_sensitive=bool(include_sensitive),
        watching=bool(watching),
        watch_state=watch_state,
        created_at=created_at,
        last_scan_at=last_scan_at,
        last_scan_status=last_scan_status,
        last_commit=last_commit,
        root_identity=(int(root_device), int(root_inode)) if root_device is not None else None,
        unreachable_reason=unreachable_reason,
        unreachable_since=unreachable_since,
        owner_node=owner_node,
    )


def _select(conn: psycopg.Connection, node_key: bytes, where: str = "", params: Sequence[object] = ()) -> list[RegisteredSource]:
    rows = conn.execute(
        f"SELECT {_SOURCE_COLUMNS} FROM source {where} ORDER BY created_at, id", params
    ).fetchall()
    return [_registered(node_key, row) for row in rows]


# ---------------------------------------------------------------- registrations


def register_source(
    conn: psycopg.Connection, node_key: bytes, *, kind: str, root: str, collection_id: str, name: str,
    include_sensitive: bool = False, root_identity: tuple[int, int] | None = None, owner_node: str | None = None,
) -> RegisteredSource:
    """Record an already verified root as a source of ``collection_id``, owned
    by ``owner_node`` (the node on whose machine it lives); raises
    :class:`SourceAlreadyRegistered` when the root is already a source of that
    collection, or the name is taken there."""
    if kind not in SOURCE_KINDS:
        raise ValueError(f"unknown source kind {kind!r}")
    if any(s.name == name for s in list_sources(conn, node_key, collection_id)):
        raise SourceAlreadyRegistered("a source with that name is already registered in the collection")
    source_id = uuid.uuid4().hex
    try:
        with conn.transaction():
            catalog.ensure_collection(conn, collection_id)
            conn.execute(
                "INSERT INTO source(id, kind, collection_id, name, root_path, root_digest, include_sensitive,"
                " created_at, root_device, root_inode, owner_node) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    source_id, kind, collection_id, seal_name(node_key, name_context(source_id), name),
                    seal_name(node_key, root_context(source_id), root), root_digest(node_key, root),
                    int(include_sensitive), time.time(),
                    root_identity[0] if root_identity else None, root_identity[1] if root_identity else None,
                    owner_node,
                ),
            )
    except psycopg.errors.UniqueViolation:
        raise SourceAlreadyRegistered("that path is already a source of the collection") from None
    return get_source(conn, node_key, source_id)


def get_source(conn: psycopg.Connection, node_key: bytes, source_id: str) -> RegisteredSource:
    found = _select(conn, node_key, "WHERE id = %s", (source_id,))
    if not found:
        raise NotFound("no such source")
    return found[0]


def find_source(conn: psycopg.Connection, node_key: bytes, root: str, collection_id: str) -> RegisteredSource | None:
    """The source of ``collection_id`` at ``root`` (a real path), if registered."""
    found = _select(
        conn, node_key, "WHERE root_digest = %s AND collection_id = %s", (root_digest(node_key, root), collection_id)
    )
    return found[0] if found else None


def sources_at(conn: psycopg.Connection, node_key: bytes, root: str) -> list[RegisteredSource]:
    """Every source (of any collection) at ``root``."""
    return _select(conn, node_key, "WHERE root_digest = %s", (root_digest(node_key, root),))


def list_sources(conn: psycopg.Connection, node_key: bytes, collection_id: str | None = None) -> list[RegisteredSource]:
    if collection_id is None:
        return _select(conn, node_key)
    return _select(conn, node_key, "WHERE collection_id = %s", (collection_id,))


def resolve_source(
    conn: psycopg.Connection, node_key: bytes, reference: str, collection_id: str | None = None
) -> RegisteredSource:
    """Find a source by id, exact name, or unique id prefix (6+ hex); ``collection_id`` narrows it."""
    wanted = reference.strip()
    candidates = list_sources(conn, node_key, collection_id)
    for candidate in candidates:
        if candidate.id == wanted.lower():
            return candidate
    named = [c for c in candidates if c.name == wanted]
    if len(named) == 1:
        return named[0]
    if len(named) > 1:
        raise NotFound("that name is a source in several collections; give the collection or the id")
    lowered = wanted.lower()
    if len(lowered) >= 6 and all(c in "0123456789abcdef" for c in lowered):
        matches = [s for s in candidates if s.id.startswith(lowered)]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise NotFound("source id prefix is ambiguous; give more characters")
    raise NotFound("no such source")


def watched_sources(conn: psycopg.Connection, node_key: bytes, owner_node: str | None = None) -> list[RegisteredSource]:
    """The sources a running node keeps in sync: watching on, scanned at least
    once, and (with ``owner_node``) on that node's machine."""
    if owner_node is None:
        return _select(conn, node_key, "WHERE watching = 1 AND last_scan_at IS NOT NULL")
    return _select(
        conn, node_key, "WHERE watching = 1 AND last_scan_at IS NOT NULL AND (owner_node IS NULL OR owner_node = %s)",
        (owner_node,),
    )


def registration_stamp(conn: psycopg.Connection) -> tuple[tuple[str, bool, bool], ...]:
    """A cheap fingerprint of what a watcher cares about: (id, watching, scanned once) per source."""
    rows = conn.execute("SELECT id, watching, last_scan_at FROM source ORDER BY id").fetchall()
    return tuple((source_id, bool(watching), scanned is not None) for source_id, watching, scanned in rows)


def set_watching(conn: psycopg.Connection, source_id: str, watching: bool) -> None:
    if not conn.execute("UPDATE source SET watching = %s WHERE id = %s", (int(watching), source_id)).rowcount:
        raise NotFound("no such source")


def set_include_sensitive(conn: psycopg.Connection, source_id: str, include: bool) -> None:
    conn.execute("UPDATE source SET include_sensitive = %s WHERE id = %s", (int(include), source_id))


def set_watch_state(conn: psycopg.Connection, states: Mapping[str, str | None]) -> None:
    """Record how a running node watches each source (None: not watched)."""
    if not states:
        return
    with conn.transaction(), conn.cursor() as cursor:
        cursor.executemany(
            "UPDATE source SET watch_state = %s WHERE id = %s", [(state, source_id) for source_id, state in states.items()]
        )


def clear_watch_states(conn: psycopg.Connection) -> None:
    conn.execute("UPDATE source SET watch_state = NULL WHERE watch_state IS NOT NULL")


def move_to_collection(conn: psycopg.Connection, source_id: str, collection_id: str) -> None:
    """Give a source that owns no documents another collection."""
    with conn.transaction():
        conn.execute("SELECT 1 FROM source WHERE id = %s FOR UPDATE", (source_id,))
        if conn.execute("SELECT 1 FROM document WHERE source_id = %s LIMIT 1", (source_id,)).fetchone():
            raise StoreError("a source that holds documents stays in its collection")
        catalog.ensure_collection(conn, collection_id)
        conn.execute("UPDATE source SET collection_id = %s WHERE id = %s", (collection_id, source_id))


def record_scan(
    conn: psycopg.Connection, node_key: bytes, source_id: str, status: str, *, report_json: str | None = None,
    last_commit: str | None = None,
) -> None:
    """Remember when the last scan ran, how it ended, and (sealed) what it changed."""
    report = None if report_json is None else seal_name(node_key, report_context(source_id), report_json)
    conn.execute(
        "UPDATE source SET last_scan_at = %s, last_scan_status = %s,"
        " last_scan_report = coalesce(%s, last_scan_report), last_commit = coalesce(%s, last_commit) WHERE id = %s",
        (time.time(), status, report, last_commit, source_id),
    )


def record_reachability(
    conn: psycopg.Connection, source_id: str, *, reason: str | None, documents: Mapping[str, str] | None,
    root_identity: tuple[int, int] | None = None,
) -> None:
    """What a scan could not see (``store.sources.record_reachability``): the
    source as a whole and the documents it kept without proof that they are
    gone; a flag already raised keeps its first time."""
    now = time.time()
    with conn.transaction():
        row = conn.execute("SELECT unreachable_since FROM source WHERE id = %s FOR UPDATE", (source_id,)).fetchone()
        if row is None:
            return
        since = (row[0] or now) if reason is not None else None
        conn.execute(
            "UPDATE source SET unreachable_reason = %s, unreachable_since = %s,"
            " root_device = coalesce(%s, root_device), root_inode = coalesce(%s, root_inode) WHERE id = %s",
            (reason, since, root_identity[0] if root_identity else None, root_identity[1] if root_identity else None,
             source_id),
        )
        if documents is None:
            return
        flagged: dict[str, float] = dict(
            conn.execute(
                "DELETE FROM unreachable_document WHERE source_id = %s RETURNING document_id, since", (source_id,)
            ).fetchall()
        )
        if documents:
            # Only documents that still exist (a row of a purged document would break the foreign key).
            conn.execute(
                "INSERT INTO unreachable_document(document_id, source_id, reason, since)"
                " SELECT f.document_id, %s, f.reason, f.since FROM unnest(%s::text[], %s::text[], %s::float8[])"
                " AS f(document_id, reason, since) JOIN document AS d ON d.id = f.document_id"
                " ON CONFLICT (document_id) DO UPDATE SET source_id = EXCLUDED.source_id, reason = EXCLUDED.reason,"
                " since = EXCLUDED.since",
                (source_id, list(documents), list(documents.values()), [flagged.get(d, now) for d in documents]),
            )


def unreachable_documents(conn: psycopg.Connection, source_id: str | None = None) -> dict[str, dict[str, str]]:
    """Documents kept although their source could not show them, by source: id -> reason."""
    if source_id is None:
        rows = conn.execute("SELECT source_id, document_id, reason FROM unreachable_document").fetchall()
    else:
        rows = conn.execute(
            "SELECT source_id, document_id, reason FROM unreachable_document WHERE source_id = %s", (source_id,)
        ).fetchall()
    found: dict[str, dict[str, str]] = {}
    for owner, document_id, reason in rows:
        found.setdefault(owner, {})[document_id] = reason
    return found


def last_scan_report(conn: psycopg.Connection, node_key: bytes, source_id: str) -> str | None:
    """The sealed report of the last scan, opened (JSON text), or None."""
    row = conn.execute("SELECT last_scan_report FROM source WHERE id = %s", (source_id,)).fetchone()
    if row is None or row[0] is None:
        return None
    return open_name(node_key, report_context(source_id), bytes(row[0]))


def document_counts(conn: psycopg.Connection, source_id: str | None = None) -> dict[str, dict[str, int]]:
    """Documents by status, per source (of one source when given)."""
    if source_id is None:
        rows = conn.execute(
            "SELECT source_id, status, count(*) FROM document WHERE source_id IS NOT NULL GROUP BY source_id, status"
        ).fetchall()
    else:
        rows = conn.execute(
            "SELECT source_id, status, count(*) FROM document WHERE source_id = %s GROUP BY source_id, status",
            (source_id,),
        ).fetchall()
    counts: dict[str, dict[str, int]] = {}
    for owner, status, count in rows:
        counts.setdefault(owner, {})[status] = int(count)
    return counts


def owned_document_ids(conn: psycopg.Connection, source_id: str) -> list[str]:
    return [row[0] for row in conn.execute("SELECT id FROM document WHERE source_id = %s", (source_id,)).fetchall()]


def forget_source(conn: psycopg.Connection, source_id: str, *, release: bool) -> None:
    """Remove the source's row (and its flags); with ``release`` its remaining
    documents become documents of no source (kept, searchable)."""
    with conn.transaction():
        row = conn.execute("SELECT collection_id FROM source WHERE id = %s FOR UPDATE", (source_id,)).fetchone()
        if row is None:
            raise NotFound("no such source")
        if release:
            _release_documents(conn, source_id, row[0])
        conn.execute("DELETE FROM unreachable_document WHERE source_id = %s", (source_id,))
        conn.execute("DELETE FROM source WHERE id = %s", (source_id,))


def unregister_source(
    conn: psycopg.Connection, source_id: str, *, purge: Callable[[str], bool] | None = None
) -> int:
    """Forget a source; with ``purge`` also delete its documents one at a time
    through that callable (the node's single purge path). Returns how many
    documents were purged (``store.sources.unregister_source``)."""
    owned = owned_document_ids(conn, source_id)
    purged = sum(purge(document_id) for document_id in owned) if purge is not None else 0
    forget_source(conn, source_id, release=purge is None)
    return purged


def _release_documents(conn: psycopg.Connection, source_id: str, collection_id: str) -> None:
    taken = {
        row[0]
        for row in conn.execute(
            "SELECT source_path FROM document WHERE collection_id = %s AND source_id IS NULL AND source_path IS NOT NULL",
            (collection_id,),
        ).fetchall()
    }
    owned = conn.execute("SELECT id, source_path FROM document WHERE source_id = %s", (source_id,)).fetchall()
    for document_id, path in owned:
        if path in taken:
            # Another kept document already holds this path in the collection:
            # this one stays with a path no scan will ever claim.
            path = f"{path}#{document_id[:8]}"
        taken.add(path)
        conn.execute("UPDATE document SET source_id = NULL, source_path = %s WHERE id = %s", (path, document_id))


# ---------------------------------------------------------------- documents of a source


def documents_of(conn: psycopg.Connection, source_id: str) -> dict[str, PathDocument]:
    """Every document of a source by relative path, with the look of its file when read."""
    rows = conn.execute(
        "SELECT d.id, d.source_path, d.content_hash, d.status, d.size_bytes,"
        " f.size, f.mtime_ns, f.ctime_ns, f.inode, f.device, f.checked_ns"
        " FROM document AS d LEFT JOIN source_file AS f ON f.document_id = d.id WHERE d.source_id = %s",
        (source_id,),
    ).fetchall()
    found: dict[str, PathDocument] = {}
    for document_id, path, content_hash, status, size_bytes, *look in rows:
        state = FileState(*(int(v) for v in look)) if look[0] is not None else None
        found[path] = PathDocument(document_id, content_hash, status, int(size_bytes), state)
    return found


def loose_document_at(conn: psycopg.Connection, collection_id: str, source_path: str) -> PathDocument | None:
    """A document of no source at ``source_path`` in the collection (a source may adopt it)."""
    row = conn.execute(
        "SELECT id, content_hash, status, size_bytes FROM document"
        " WHERE collection_id = %s AND source_id IS NULL AND source_path = %s",
        (collection_id, source_path),
    ).fetchone()
    return None if row is None else PathDocument(row[0], row[1], row[2], int(row[3]), None)


def adopt_document(conn: psycopg.Connection, source_id: str, document_id: str) -> None:
    """Make a document of no source this source's (it sits at one of its paths)."""
    conn.execute("UPDATE document SET source_id = %s WHERE id = %s AND source_id IS NULL", (source_id, document_id))


def add_source_document(
    conn: psycopg.Connection, blobs: PostgresBlobStore, node_key: bytes, source_id: str, collection_id: str, *,
    source_path: str, display_name: str, fmt: str, data: bytes, content_hash: str, state: FileState,
) -> str:
    """Store a new file of a source: its blob, the Pending row and the file's
    look, in one transaction. Returns the new document id."""
    return catalog.create_document(
        conn, blobs, node_key, collection_id, io.BytesIO(data), content_hash=content_hash, display_name=display_name,
        fmt=fmt, source_path=source_path, source_id=source_id,
        also=lambda db, document_id: _write_state(db, document_id, state),
    )


def update_source_document(
    conn: psycopg.Connection, blobs: PostgresBlobStore, document_id: str, *, fmt: str, data: bytes,
    content_hash: str, state: FileState,
) -> bool:
    """Replace a document's source in place and queue it again (Pending); the
    blob and the row change in one transaction. False when the document was
    deleted meanwhile (nothing is written)."""
    with conn.transaction():
        if conn.execute("SELECT 1 FROM document WHERE id = %s FOR UPDATE", (document_id,)).fetchone() is None:
            return False
        sealed = blobs.seal(document_id, io.BytesIO(data), check=catalog.changed_while_read(content_hash), conn=conn)
        now = time.time()
        conn.execute(
            "UPDATE document SET content_hash = %s, size_bytes = %s, format = %s, status = %s, failure_reason = NULL,"
            " progress = 0, updated_at = %s WHERE id = %s",
            (content_hash, sealed.size, fmt, Status.PENDING.value, now, document_id),
        )
        conn.execute(
            "INSERT INTO status_history(document_id, status, at) VALUES (%s, %s, %s)",
            (document_id, Status.PENDING.value, now),
        )
        _write_state(conn, document_id, state)
    return True


def move_source_document(
    conn: psycopg.Connection, node_key: bytes, document_id: str, *, source_path: str, state: FileState
) -> bool:
    """A rename: the same bytes now live at ``source_path``. The document, its
    chunks, vectors and status stay; its path (row, chunks and their lexical
    index) and display name follow. False when the document no longer exists."""
    with conn.transaction():
        if conn.execute("SELECT 1 FROM document WHERE id = %s FOR UPDATE", (document_id,)).fetchone() is None:
            return False
        rows = conn.execute(
            "SELECT id, heading_path, symbol, content FROM chunk WHERE document_id = %s", (document_id,)
        ).fetchall()
        if rows:
            ids, vectors, path_tokens = [], [], []
            for chunk_id, heading_path, symbol, content in rows:
                vector, counts, _ = indexed_columns(source_path, heading_path, symbol, content)
                ids.append(chunk_id)
                vectors.append(vector)
                path_tokens.append(counts[0])
            # One statement: the statistics trigger runs once for the whole move.
            conn.execute(
                "UPDATE chunk AS c SET source_path = %s, search_vector = m.vector::tsvector,"
                " column_tokens[1] = m.path_tokens FROM unnest(%s::bigint[], %s::text[], %s::integer[])"
                " AS m(id, vector, path_tokens) WHERE c.id = m.id",
                (source_path, ids, vectors, path_tokens),
            )
        conn.execute(
            "UPDATE document SET source_path = %s, display_name = %s, updated_at = %s WHERE id = %s",
            (source_path, seal_name(node_key, document_id, source_path), time.time(), document_id),
        )
        _write_state(conn, document_id, state)
    return True


def record_file_state(conn: psycopg.Connection, document_id: str, state: FileState) -> None:
    """Remember the look of a file whose bytes were found unchanged."""
    with conn.transaction():
        if conn.execute("SELECT 1 FROM document WHERE id = %s", (document_id,)).fetchone() is not None:
            _write_state(conn, document_id, state)


def _write_state(conn: psycopg.Connection, document_id: str, state: FileState) -> None:
    conn.execute(
        "INSERT INTO source_file(document_id, size, mtime_ns, ctime_ns, inode, device, checked_ns)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (document_id) DO UPDATE SET size = EXCLUDED.size,"
        " mtime_ns = EXCLUDED.mtime_ns, ctime_ns = EXCLUDED.ctime_ns, inode = EXCLUDED.inode,"
        " device = EXCLUDED.device, checked_ns = EXCLUDED.checked_ns",
        (document_id, state.size, state.mtime_ns, state.ctime_ns, state.inode, state.device, state.checked_ns),
    )
