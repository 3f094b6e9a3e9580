"""Vectors: float32 BLOBs in SQLite (the source of truth), exact search, and one
hnswlib index per canonical vector identity (a derived cache).

The ANN index lives under ``$KBTUI_HOME/vectors/``. Its labels are chunk ids
(AUTOINCREMENT, never reused). It is saved atomically (temp file, fsync,
rename; a new file per save, then the sidecar that names it) with a watermark
and the file's digest in a small JSON sidecar. On open it is checked against
the database: a digest or parameter mismatch means a rebuild, never a blind
load; otherwise rows committed since the save are added and rows deleted
since are marked deleted. Queries and changes to one index never run
concurrently (one lock per index). Visibility is still decided by SQLite:
every ANN candidate is checked against the same served-document condition as
the exact scan before it is returned.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import secrets
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import hnswlib
import numpy as np

from store.db import database
from store.files import fsync_dir, replace_durably
from store.models import SERVED_DOCUMENT_SQL

log = logging.getLogger(__name__)

INDEX_DIR_NAME = "vectors"
SIDECAR_FORMAT = 1
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 200
# ef for unfiltered and filtered queries: recall@10 >= 0.95 against exact in
# benchmarks/vectors.py (raise it there first if that ever stops holding).
HNSW_EF_SEARCH = 128
# A scope this small is scanned exactly from SQLite: cheaper than walking the
# graph through a selective filter, and filtered HNSW loses recall there.
EXACT_SCAN_MIN_ROWS = 2_000
EXACT_SCAN_FRACTION = 0.01
# Builds and catch-ups up to this many rows happen inline; larger ones run in
# a background thread while queries are answered by the exact scan.
INLINE_BUILD_MAX_ROWS = 2_000
# Rebuild (compact) when this share of the graph's elements is marked deleted.
COMPACT_DELETED_FRACTION = 0.3
COMPACT_MIN_ELEMENTS = 1_000
_PAGE_ROWS = 4096
_SQL_VARIABLES = 500
_EPOCH_KEY = "vector_index_epoch"


def to_blob(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def from_blob(blob: bytes, dim: int) -> np.ndarray:
    vector = np.frombuffer(blob, dtype="<f4")
    if vector.shape[0] != dim:
        raise ValueError("stored vector width does not match its recorded dimension")
    return vector


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` highest scores, best first (ties by position).

    Partitions the negated scores: ``np.argpartition`` is pathologically slow
    when most values equal the ones it is asked to put last.
    """
    n = scores.shape[0]
    if k <= 0 or n == 0:
        return np.zeros(0, np.int64)
    negated = -scores
    if k < n:
        picked = np.argpartition(negated, k - 1)[:k]
    else:
        picked = np.arange(n)
    return picked[np.lexsort((picked, negated[picked]))]


def exact_search(
    query: np.ndarray,
    identity: str,
    collection_id: str,
    *,
    document_id: str | None = None,
    limit: int = 50,
) -> list[tuple[int, float]]:
    """Cosine similarity of ``query`` against every visible vector of ``identity``.

    Only vectors with exactly this identity and the query's width are read,
    so vectors of another model or width can never be compared.
    """
    dim = int(query.shape[0])
    sql = (
        "SELECT v.chunk_id, v.embedding FROM vector AS v "
        "JOIN chunk AS c ON c.id = v.chunk_id JOIN document AS d ON d.id = c.document_id "
        "WHERE v.identity = ? AND v.dim = ? AND c.collection_id = ? AND d.collection_id = ? "
        f"AND {SERVED_DOCUMENT_SQL}"
    )
    params: list[object] = [identity, dim, collection_id, collection_id]
    if document_id is not None:
        sql += " AND c.document_id = ?"
        params.append(document_id)
    rows = database.execute_sql(sql, params).fetchall()
    return _score_rows(rows, query, limit)


def _score_rows(rows: Sequence[tuple[int, bytes]], query: np.ndarray, limit: int) -> list[tuple[int, float]]:
    dim = int(query.shape[0])
    rows = [r for r in rows if len(r[1]) == 4 * dim]
    if not rows:
        return []
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(len(rows), dim)
    scores = matrix @ query.astype(np.float32)
    return [(int(ids[i]), float(scores[i])) for i in top_k(scores, limit)]


def stored_vectors(chunk_ids: Sequence[int], identity: str, dim: int) -> dict[int, np.ndarray]:
    """The stored vectors of exactly ``identity`` and ``dim`` for ``chunk_ids``
    (chunks without one are absent). No scope: callers pass ids they scoped."""
    return {
        row[0]: np.frombuffer(row[3], dtype="<f4")
        for row in _rows_by_id(list(chunk_ids), identity, dim)
        if len(row[3]) == 4 * dim
    }


def committed_vectors(
    content_hashes: Iterable[str],
    *,
    identity: str,
    dim: int,
    parser_version: int,
    chunker_version: int,
) -> dict[str, np.ndarray]:
    """Vectors already committed for these contextual-content hashes under the
    exact reuse key: same identity and width, and a document indexed with the
    same parser and chunker versions. Rows exist only after an atomic index
    commit, so every row found here is a finished vector."""
    found: dict[str, np.ndarray] = {}
    wanted = list(dict.fromkeys(content_hashes))
    for start in range(0, len(wanted), _SQL_VARIABLES):
        batch = wanted[start : start + _SQL_VARIABLES]
        placeholders = ", ".join("?" for _ in batch)
        # CROSS JOIN fixes the join order: start from the content-hash index.
        # Left to itself the planner scanned every vector of the identity, once
        # per document, which made ingestion quadratic in the corpus size.
        rows = database.execute_sql(
            "SELECT c.content_hash, v.embedding FROM chunk AS c "
            "CROSS JOIN vector AS v ON v.chunk_id = c.id CROSS JOIN document AS d ON d.id = c.document_id "
            f"WHERE c.content_hash IN ({placeholders}) AND v.identity = ? AND v.dim = ? "
            "AND d.parser_version = ? AND d.chunker_version = ?",
            [*batch, identity, dim, parser_version, chunker_version],
        ).fetchall()
        for content_hash, blob in rows:
            if content_hash not in found and len(blob) == 4 * dim:
                found[content_hash] = np.frombuffer(blob, dtype="<f4").copy()
    return found


def visible_chunk_ids(chunk_ids: Sequence[int], identity: str, dim: int, collection_id: str) -> set[int]:
    """Which of ``chunk_ids`` search may serve in ``collection_id`` under this identity."""
    visible: set[int] = set()
    for start in range(0, len(chunk_ids), _SQL_VARIABLES):
        batch = [int(c) for c in chunk_ids[start : start + _SQL_VARIABLES]]
        placeholders = ", ".join("?" for _ in batch)
        rows = database.execute_sql(
            "SELECT c.id FROM chunk AS c JOIN vector AS v ON v.chunk_id = c.id "
            "JOIN document AS d ON d.id = c.document_id "
            f"WHERE c.id IN ({placeholders}) AND v.identity = ? AND v.dim = ? "
            f"AND c.collection_id = ? AND d.collection_id = ? AND {SERVED_DOCUMENT_SQL}",
            [*batch, identity, dim, collection_id, collection_id],
        ).fetchall()
        visible.update(r[0] for r in rows)
    return visible


def database_epoch() -> str:
    """A random token made once per database: an index built from another
    database (a recreated kb.sqlite3 reuses chunk ids) is never trusted."""
    row = database.execute_sql("SELECT value FROM node_meta WHERE key = ?", (_EPOCH_KEY,)).fetchone()
    if row is None:
        with database.atomic():
            database.execute_sql(
                "INSERT OR IGNORE INTO node_meta(key, value) VALUES (?, ?)",
                (_EPOCH_KEY, secrets.token_hex(16).encode("ascii")),
            )
        row = database.execute_sql("SELECT value FROM node_meta WHERE key = ?", (_EPOCH_KEY,)).fetchone()
    return bytes(row[0]).decode("ascii")


@dataclass(frozen=True)
class IndexConsistency:
    """ANN labels against the database rows of one identity ("ANN ids = DB ids")."""

    database_ids: frozenset[int]
    index_ids: frozenset[int]

    @property
    def consistent(self) -> bool:
        return self.database_ids == self.index_ids


@dataclass(frozen=True)
class IndexStats:
    ready: bool
    building: bool  # a background load, build or compaction is running
    elements: int  # graph elements, including those marked deleted
    live: int
    watermark: int  # the highest chunk id the graph has seen


class _Labels:
    """Which collection and document each live label belongs to.

    Dense arrays indexed by chunk id (-1 = not live): chunk ids are
    AUTOINCREMENT, so they stay compact and a filter is one array lookup.
    """

    def __init__(self) -> None:
        self.collection = np.full(1024, -1, np.int32)
        self.document = np.full(1024, -1, np.int32)
        self.collection_codes: dict[str, int] = {}
        self.document_codes: dict[str, int] = {}
        self.scope_counts: dict[int, int] = {}
        self.live = 0

    def _grow(self, top: int) -> None:
        size = self.collection.shape[0]
        if top < size:
            return
        while size <= top:
            size *= 2
        for name in ("collection", "document"):
            old = getattr(self, name)
            grown = np.full(size, -1, np.int32)
            grown[: old.shape[0]] = old
            setattr(self, name, grown)

    def add(self, label: int, collection_id: str, document_id: str) -> None:
        self._grow(label)
        if self.collection[label] >= 0:
            return
        code = self.collection_codes.setdefault(collection_id, len(self.collection_codes))
        self.collection[label] = code
        self.document[label] = self.document_codes.setdefault(document_id, len(self.document_codes))
        self.scope_counts[code] = self.scope_counts.get(code, 0) + 1
        self.live += 1

    def remove(self, label: int) -> bool:
        if label < 0 or label >= self.collection.shape[0] or self.collection[label] < 0:
            return False
        code = int(self.collection[label])
        self.scope_counts[code] -= 1
        self.collection[label] = -1
        self.document[label] = -1
        self.live -= 1
        return True

    def is_live(self, label: int) -> bool:
        return 0 <= label < self.collection.shape[0] and self.collection[label] >= 0

    def scope_count(self, collection_id: str) -> int:
        code = self.collection_codes.get(collection_id)
        return 0 if code is None else self.scope_counts.get(code, 0)

    def labels_of_document(self, document_id: str, *, up_to: int) -> np.ndarray:
        code = self.document_codes.get(document_id)
        if code is None:
            return np.zeros(0, np.int64)
        return np.flatnonzero(self.document[: up_to + 1] == code)

    def live_labels(self) -> np.ndarray:
        return np.flatnonzero(self.collection >= 0)

    def labels_in_scope(self, collection_id: str) -> np.ndarray:
        code = self.collection_codes.get(collection_id)
        return np.zeros(0, np.int64) if code is None else np.flatnonzero(self.collection == code)

    def scope_mask(self, collection_id: str) -> bytes:
        code = self.collection_codes.get(collection_id, -2)
        return (self.collection == code).tobytes()


class _Graph:
    """One loaded hnswlib index and its label bookkeeping (guarded by the owner's lock)."""

    def __init__(self, dim: int, capacity: int | None) -> None:
        """A new empty graph for ``capacity`` elements, or (None) one to load into."""
        self.index = hnswlib.Index(space="ip", dim=dim)
        if capacity is not None:
            self.index.init_index(max_elements=max(capacity, 1024), ef_construction=HNSW_EF_CONSTRUCTION, M=HNSW_M)
        self.index.set_num_threads(_threads())
        self.labels = _Labels()
        self.watermark = 0  # highest chunk id ever added
        self.elements = 0  # graph elements, live or marked deleted
        self.changed = False

    def add(self, rows: Sequence[tuple[int, str, str, bytes]], dim: int) -> None:
        rows = [r for r in rows if len(r[3]) == 4 * dim and not self.labels.is_live(r[0])]
        if not rows:
            return
        needed = self.elements + len(rows)
        if needed > self.index.get_max_elements():
            self.index.resize_index(max(needed, self.index.get_max_elements() * 2))
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        data = np.frombuffer(b"".join(r[3] for r in rows), dtype="<f4").reshape(len(rows), dim)
        self.index.add_items(data, ids)
        for chunk_id, collection_id, document_id, _ in rows:
            self.labels.add(chunk_id, collection_id, document_id)
        self.elements += len(rows)
        self.watermark = max(self.watermark, int(ids.max()))
        self.changed = True

    def remove(self, label: int) -> None:
        if self.labels.remove(label):
            self.index.mark_deleted(label)
            self.changed = True

    @property
    def deleted_fraction(self) -> float:
        return 0.0 if self.elements == 0 else 1.0 - self.labels.live / self.elements


class IdentityIndex:
    """The ANN index of one canonical identity: load, build, catch up, query, save."""

    def __init__(self, directory: Path, identity: str, dim: int, settings: IndexSettings) -> None:
        self.identity = identity
        self.dim = dim
        self.settings = settings
        slug = hashlib.sha256(f"{identity}|{dim}".encode()).hexdigest()[:20]
        self._directory = directory
        self._slug = slug
        self._sidecar = directory / f"{slug}.json"
        self._lockfile = directory / f"{slug}.lock"
        self._lock = threading.RLock()
        self._graph: _Graph | None = None
        self._building: threading.Thread | None = None
        self._removed_while_building: list[int] = []
        self._closed = False

    # -- opening

    @property
    def ready(self) -> bool:
        return self._graph is not None

    def wait_ready(self, timeout_s: float | None = None) -> bool:
        """Wait for a background load, build or compaction; True when ready."""
        thread = self._building
        if thread is not None:
            thread.join(timeout_s)
        return self.ready

    def ensure_open(self) -> bool:
        """Load or build the index; True when it can answer queries now.

        Work too large to do inline (a big build or catch-up) runs in the
        background and this returns False until it is done; callers scan
        exactly meanwhile.
        """
        with self._lock:
            if self._graph is not None:
                return True
            if self._building is not None or self._closed:
                return False
            if self._estimated_open_rows() <= self.settings.inline_build_max_rows:
                graph = self._prepare(max_build_rows=self.settings.inline_build_max_rows)
                if graph is not None:
                    self._install_locked(graph)
                    return True
            self._start_background_locked(rebuild=False)
            return False

    def _estimated_open_rows(self) -> int:
        """Rows to add on open, judged from the sidecar alone (cheap, unverified)."""
        try:
            sidecar = json.loads(self._sidecar.read_text(encoding="utf-8"))
            watermark = int(sidecar["watermark"])
        except (OSError, ValueError, KeyError, TypeError):
            return _row_count(self.identity, self.dim)
        return _row_count(self.identity, self.dim, after=watermark)

    def _prepare(self, *, max_build_rows: int | None = None, rebuild: bool = False) -> _Graph | None:
        """A private, caught-up graph (loaded or built); None if a build would
        exceed ``max_build_rows``. Runs without the lock: the graph is not shared yet."""
        graph = None if rebuild else self._load()
        if graph is None:
            if max_build_rows is not None and _row_count(self.identity, self.dim) > max_build_rows:
                return None
            graph = self._build()
        if graph is not None:
            self._catch_up(graph)
        return graph

    def _install_locked(self, graph: _Graph) -> None:
        for label in self._removed_while_building:
            graph.remove(label)
        self._removed_while_building = []
        self._graph = graph
        self._catch_up(graph)  # rows committed while it was being prepared

    def _start_background_locked(self, *, rebuild: bool) -> None:
        if self._building is not None or self._closed:
            return
        self._removed_while_building = []
        self._building = threading.Thread(
            target=self._prepare_in_background, args=(rebuild,), name="vector-index", daemon=True
        )
        self._building.start()

    def _prepare_in_background(self, rebuild: bool) -> None:
        try:
            graph = self._prepare(rebuild=rebuild)
        except Exception as exc:  # noqa: BLE001 - queries keep using the exact scan
            log.error("vector index preparation failed (%s)", type(exc).__name__)
            graph = None
        try:
            with self._lock:
                installed = graph is not None and not self._closed
                if installed:
                    self._install_locked(graph)
                self._building = None
                if installed:
                    self._compact_if_sparse_locked()  # deletes may have piled up meanwhile
            if installed:
                self.save()  # a long build is worth keeping even if the process dies later
        except OSError as exc:
            log.warning("vector index save failed (%s)", type(exc).__name__)
        finally:
            database.close()  # this thread's connection

    # -- changes

    def catch_up(self) -> None:
        """Add every row committed since the watermark; drop the rows they replaced."""
        with self._lock:
            if self._graph is not None:
                self._catch_up(self._graph)
                self._compact_if_sparse_locked()

    def _catch_up(self, graph: _Graph) -> None:
        start = graph.watermark
        while not self._closed:
            rows = _rows_after(graph.watermark, self.identity, self.dim)
            if not rows:
                break
            # A commit replaces all of a document's chunks: its older labels are gone.
            for document_id in {r[2] for r in rows}:
                for label in graph.labels.labels_of_document(document_id, up_to=start):
                    graph.remove(int(label))
            graph.add(rows, self.dim)
            graph.watermark = max(graph.watermark, rows[-1][0])

    def _compact_if_sparse_locked(self) -> None:
        graph = self._graph
        if (
            graph is not None
            and graph.deleted_fraction > COMPACT_DELETED_FRACTION
            and graph.elements >= COMPACT_MIN_ELEMENTS
        ):
            self._start_background_locked(rebuild=True)

    def remove(self, chunk_ids: Iterable[int]) -> None:
        with self._lock:
            ids = [int(c) for c in chunk_ids]
            if self._building is not None:
                self._removed_while_building.extend(ids)
            if self._graph is not None:
                for label in ids:
                    self._graph.remove(label)
                self._compact_if_sparse_locked()

    # -- queries

    def search(self, query: np.ndarray, collection_id: str, limit: int) -> list[tuple[int, float]] | None:
        """Nearest visible chunks in the collection; None when the index is not
        ready yet (the caller scans exactly from SQLite)."""
        if not self.ensure_open():
            return None
        with self._lock:
            graph = self._graph
            if graph is None:
                return None
            if _max_database_id(self.identity, self.dim) > graph.watermark:
                self._catch_up(graph)
            in_scope = graph.labels.scope_count(collection_id)
            if in_scope == 0:
                return []
            query = np.ascontiguousarray(query, dtype=np.float32)
            exact_below = max(self.settings.exact_scan_min_rows, self.settings.exact_scan_fraction * graph.labels.live)
            if in_scope <= exact_below:
                return self._scan_scope(graph, query, collection_id, limit)
            return self._walk_graph(graph, query, collection_id, in_scope, limit)

    def _scan_scope(self, graph: _Graph, query: np.ndarray, collection_id: str, limit: int) -> list[tuple[int, float]]:
        """Exact scan of just the collection's rows, read by id from SQLite."""
        labels = graph.labels.labels_in_scope(collection_id)
        rows: list[tuple[int, bytes]] = []
        for start in range(0, labels.size, _SQL_VARIABLES):
            batch = [int(x) for x in labels[start : start + _SQL_VARIABLES]]
            placeholders = ", ".join("?" for _ in batch)
            rows.extend(
                database.execute_sql(
                    "SELECT v.chunk_id, v.embedding FROM vector AS v JOIN chunk AS c ON c.id = v.chunk_id "
                    f"JOIN document AS d ON d.id = c.document_id WHERE v.chunk_id IN ({placeholders}) "
                    "AND v.identity = ? AND v.dim = ? AND c.collection_id = ? AND d.collection_id = ? "
                    f"AND {SERVED_DOCUMENT_SQL}",
                    [*batch, self.identity, self.dim, collection_id, collection_id],
                ).fetchall()
            )
        return _score_rows(rows, query, limit)

    def _walk_graph(
        self, graph: _Graph, query: np.ndarray, collection_id: str, in_scope: int, limit: int
    ) -> list[tuple[int, float]]:
        scoped = in_scope < graph.labels.live
        mask = graph.labels.scope_mask(collection_id) if scoped else b""
        wanted = min(in_scope, max(2 * limit, limit + 16))
        while True:
            graph.index.set_ef(max(self.settings.ef_search, wanted))
            try:
                labels, distances = graph.index.knn_query(
                    query.reshape(1, -1),
                    k=wanted,
                    num_threads=1,
                    filter=(lambda label: mask[label] == 1) if scoped else None,
                )
            except RuntimeError:
                # The graph could not reach that many in scope: scan them exactly.
                return self._scan_scope(graph, query, collection_id, limit)
            candidates = [(int(label), 1.0 - float(d)) for label, d in zip(labels[0], distances[0])]
            visible = visible_chunk_ids([c for c, _ in candidates], self.identity, self.dim, collection_id)
            hits = [(c, s) for c, s in candidates if c in visible]
            if len(hits) >= limit or wanted >= in_scope:
                return hits[:limit]
            wanted = min(in_scope, wanted * 4)

    def stats(self) -> IndexStats:
        with self._lock:
            graph = self._graph
            return IndexStats(
                ready=graph is not None,
                building=self._building is not None,
                elements=0 if graph is None else graph.elements,
                live=0 if graph is None else graph.labels.live,
                watermark=0 if graph is None else graph.watermark,
            )

    def consistency(self) -> IndexConsistency:
        with self._lock:
            labels = frozenset() if self._graph is None else frozenset(int(x) for x in self._graph.labels.live_labels())
        return IndexConsistency(frozenset(int(x) for x in _database_ids(self.identity, self.dim)), labels)

    # -- persistence

    def save(self) -> bool:
        """Write the index if it changed: new file, fsync, rename; then the
        sidecar that names it; then remove the file it replaced."""
        with self._lock:
            graph = self._graph
            if graph is None or not graph.changed:
                return False
            self._directory.mkdir(parents=True, exist_ok=True)
            with _file_lock(self._lockfile):
                final = self._directory / f"{self._slug}.{secrets.token_hex(6)}.hnsw"
                tmp = self._directory / f"{final.name}.tmp"
                graph.index.save_index(str(tmp))
                os.chmod(tmp, 0o600)  # vectors say something about the text they came from
                with open(tmp, "rb+") as handle:
                    os.fsync(handle.fileno())
                    handle.seek(0)
                    digest = hashlib.file_digest(handle, "sha256").hexdigest()
                size = tmp.stat().st_size
                replace_durably(tmp, final)
                _write_json_durably(
                    self._sidecar,
                    {
                        "format": SIDECAR_FORMAT,
                        "identity": self.identity,
                        "dim": self.dim,
                        "epoch": database_epoch(),
                        "M": HNSW_M,
                        "ef_construction": HNSW_EF_CONSTRUCTION,
                        "file": final.name,
                        "size": size,
                        "sha256": digest,
                        "elements": graph.elements,
                        "live": graph.labels.live,
                        "watermark": graph.watermark,
                    },
                )
                self._remove_stale_files(keep=final.name)
            graph.changed = False
            return True

    def _load(self) -> _Graph | None:
        """The saved index if its sidecar, size, digest and parameters all check
        out, reconciled with the database; None means rebuild."""
        if not self._sidecar.exists():
            return None
        with _file_lock(self._lockfile):
            try:
                sidecar = json.loads(self._sidecar.read_text(encoding="utf-8"))
                expected = (SIDECAR_FORMAT, self.identity, self.dim, database_epoch(), HNSW_M, HNSW_EF_CONSTRUCTION)
                found = tuple(sidecar[k] for k in ("format", "identity", "dim", "epoch", "M", "ef_construction"))
                name = str(sidecar["file"])
                if found != expected or Path(name).name != name or not name.startswith(self._slug):
                    log.info("vector index sidecar does not match; rebuilding")
                    return None
                path = self._directory / name
                # Under the lock no save is in progress: other files are leftovers of a killed one.
                self._remove_stale_files(keep=name)
                if path.stat().st_size != int(sidecar["size"]):
                    log.warning("vector index file has the wrong size; rebuilding")
                    return None
                with open(path, "rb") as handle:
                    if hashlib.file_digest(handle, "sha256").hexdigest() != sidecar["sha256"]:
                        log.warning("vector index file is corrupt; rebuilding")
                        return None
                graph = _Graph(self.dim, None)
                graph.index.load_index(str(path), max_elements=int(sidecar["elements"]) + 1024)
                graph.index.set_num_threads(_threads())
                elements = int(sidecar["elements"])
                watermark = int(sidecar["watermark"])
            except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
                log.warning("vector index could not be loaded (%s); rebuilding", type(exc).__name__)
                return None
        if graph.index.get_current_count() != elements:
            log.warning("vector index element count does not match its sidecar; rebuilding")
            return None
        # Saved labels whose rows still exist become live; the others were
        # deleted since the save (by any process) and are marked deleted.
        saved = set(graph.index.get_ids_list())
        rows = _label_rows(self.identity, self.dim)
        in_database = set()
        missing = []
        for chunk_id, collection_id, document_id in rows:
            in_database.add(chunk_id)
            if chunk_id in saved:
                graph.labels.add(chunk_id, collection_id, document_id)
            elif chunk_id <= watermark:
                missing.append(chunk_id)
        graph.elements = len(saved)
        graph.watermark = watermark
        for label in saved - in_database:
            try:
                graph.index.mark_deleted(label)
                graph.changed = True
            except RuntimeError:
                pass  # already marked deleted when it was saved
        if missing:
            graph.add(_rows_by_id(missing, self.identity, self.dim), self.dim)
        if graph.deleted_fraction > COMPACT_DELETED_FRACTION and graph.elements >= COMPACT_MIN_ELEMENTS:
            return None  # cheaper to rebuild than to carry the dead elements
        return graph

    def _build(self) -> _Graph:
        graph = _Graph(self.dim, int(_row_count(self.identity, self.dim) * 1.1) + 1024)
        while not self._closed:
            rows = _rows_after(graph.watermark, self.identity, self.dim)
            if not rows:
                break
            graph.add(rows, self.dim)
            graph.watermark = max(graph.watermark, rows[-1][0])
        # An empty graph is worth a file only when it replaces a stale one.
        graph.changed = graph.elements > 0 or self._sidecar.exists()
        return graph

    def _remove_stale_files(self, *, keep: str) -> None:
        for path in [*self._directory.glob(f"{self._slug}.*.hnsw*"), *self._directory.glob(f"{self._slug}.json.tmp")]:
            if path.name != keep:
                path.unlink(missing_ok=True)
        fsync_dir(self._directory)

    def discard(self) -> None:
        """Forget the in-memory graph; the next query loads or rebuilds it."""
        with self._lock:
            self._graph = None

    def close(self) -> None:
        """Stop background work (a partial build is discarded, not saved)."""
        with self._lock:
            self._closed = True
        thread = self._building
        if thread is not None:
            thread.join()


@dataclass(frozen=True)
class IndexSettings:
    ef_search: int = HNSW_EF_SEARCH
    exact_scan_min_rows: int = EXACT_SCAN_MIN_ROWS
    exact_scan_fraction: float = EXACT_SCAN_FRACTION
    inline_build_max_rows: int = INLINE_BUILD_MAX_ROWS


class VectorIndexes:
    """Every identity's ANN index under ``$KBTUI_HOME/vectors``; the entry
    point for the semantic arm and for keeping the indexes in step with commits.
    """

    def __init__(self, home: Path, settings: IndexSettings | None = None) -> None:
        self.directory = home / INDEX_DIR_NAME
        self.settings = settings or IndexSettings()
        self._lock = threading.Lock()
        self._indexes: dict[tuple[str, int], IdentityIndex] = {}

    def index_for(self, identity: str, dim: int) -> IdentityIndex:
        with self._lock:
            index = self._indexes.get((identity, dim))
            if index is None:
                index = IdentityIndex(self.directory, identity, dim, self.settings)
                self._indexes[(identity, dim)] = index
            return index

    def search(
        self,
        query: np.ndarray,
        identity: str,
        collection_id: str,
        *,
        document_id: str | None = None,
        limit: int = 50,
    ) -> list[tuple[int, float]]:
        """Cosine-nearest visible chunks of ``identity`` in the collection.

        Only vectors of exactly this identity and the query's width are ever
        compared. A document scope, a small collection, or an index not yet
        ready is answered by an exact scan; otherwise by hnswlib (filtered to
        the collection when it is not the whole index).
        """
        dim = int(query.shape[0])
        if document_id is None:
            index = self.index_for(identity, dim)
            try:
                hits = index.search(query, collection_id, limit)
            except Exception as exc:  # noqa: BLE001 - the index is a cache: fall back, never fail
                log.error("vector index query failed (%s); scanning exactly", type(exc).__name__)
                index.discard()
                hits = None
            if hits is not None:
                return hits
        return exact_search(query, identity, collection_id, document_id=document_id, limit=limit)

    def note_committed(self, chunk_ids: Iterable[int] = ()) -> None:
        """After ``commit_index``: bring every open index up to the database.

        Chunk ids are assigned in commit order (one writer at a time, never
        reused), so catching up from each index's watermark adds exactly the
        new rows, and drops the rows of the same documents that they replaced.
        """
        for index in self._open_indexes():
            try:
                index.catch_up()
            except Exception as exc:  # noqa: BLE001 - the commit stands; the index is rebuilt
                log.error("vector index catch-up failed (%s)", type(exc).__name__)
                index.discard()

    def note_removed(self, chunk_ids: Iterable[int]) -> None:
        """After ``purge_document``: mark its chunk ids deleted in every open index."""
        ids = list(chunk_ids)
        if ids:
            for index in self._open_indexes():
                try:
                    index.remove(ids)
                except Exception as exc:  # noqa: BLE001 - the purge stands; the index is rebuilt
                    log.error("vector index delete failed (%s)", type(exc).__name__)
                    index.discard()

    def save(self) -> None:
        for index in self._open_indexes():
            try:
                index.save()
            except OSError as exc:
                # The database still holds every vector: the next open rebuilds or catches up.
                log.warning("vector index save failed (%s)", type(exc).__name__)

    def close(self) -> None:
        for index in self._open_indexes():
            index.close()
        self.save()

    def _open_indexes(self) -> list[IdentityIndex]:
        with self._lock:
            return list(self._indexes.values())


def _threads() -> int:
    return max(1, min(os.cpu_count() or 1, 4))


def _row_count(identity: str, dim: int, *, after: int = 0) -> int:
    return database.execute_sql(
        "SELECT count(*) FROM vector WHERE identity = ? AND dim = ? AND chunk_id > ?", (identity, dim, after)
    ).fetchone()[0]


def _rows_after(watermark: int, identity: str, dim: int) -> list[tuple[int, str, str, bytes]]:
    return database.execute_sql(
        "SELECT v.chunk_id, c.collection_id, c.document_id, v.embedding FROM vector AS v "
        "JOIN chunk AS c ON c.id = v.chunk_id "
        "WHERE v.chunk_id > ? AND v.identity = ? AND v.dim = ? ORDER BY v.chunk_id LIMIT ?",
        (watermark, identity, dim, _PAGE_ROWS),
    ).fetchall()


def _max_database_id(identity: str, dim: int) -> int:
    row = database.execute_sql(
        "SELECT max(chunk_id) FROM vector WHERE identity = ? AND dim = ?", (identity, dim)
    ).fetchone()
    return int(row[0] or 0)


def _database_ids(identity: str, dim: int) -> np.ndarray:
    rows = database.execute_sql(
        "SELECT chunk_id FROM vector WHERE identity = ? AND dim = ? ORDER BY chunk_id", (identity, dim)
    ).fetchall()
    return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))


def _label_rows(identity: str, dim: int) -> list[tuple[int, str, str]]:
    return database.execute_sql(
        "SELECT v.chunk_id, c.collection_id, c.document_id FROM vector AS v JOIN chunk AS c ON c.id = v.chunk_id "
        "WHERE v.identity = ? AND v.dim = ? ORDER BY v.chunk_id",
        (identity, dim),
    ).fetchall()


def _rows_by_id(chunk_ids: Sequence[int], identity: str, dim: int) -> list[tuple[int, str, str, bytes]]:
    rows: list[tuple[int, str, str, bytes]] = []
    for start in range(0, len(chunk_ids), _SQL_VARIABLES):
        batch = list(chunk_ids[start : start + _SQL_VARIABLES])
        placeholders = ", ".join("?" for _ in batch)
        rows.extend(
            database.execute_sql(
                "SELECT v.chunk_id, c.collection_id, c.document_id, v.embedding FROM vector AS v "
                f"JOIN chunk AS c ON c.id = v.chunk_id WHERE v.chunk_id IN ({placeholders}) "
                "AND v.identity = ? AND v.dim = ? ORDER BY v.chunk_id",
                [*batch, identity, dim],
            ).fetchall()
        )
    return rows


def _write_json_durably(path: Path, payload: dict[str, object]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(payload, handle)
        handle.flush()
        os.fsync(handle.fileno())
    replace_durably(tmp, path)


class _file_lock:
    """An exclusive advisory lock between processes sharing one data directory."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def __enter__(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def __exit__(self, *exc_info: object) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
