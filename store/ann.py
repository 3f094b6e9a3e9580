"""One hnswlib index per canonical vector identity: a derived cache of the
vectors in SQLite (:mod:`store.vectors`), kept under ``$KBTUI_HOME/vectors/``.

On open an index is loaded from its files (:mod:`store.ann_files`) and checked
against the database: rows committed since the save are added and rows
deleted since are marked deleted; a file that does not check out is rebuilt.
Large builds run in the background while the exact scan answers. Queries and
changes to one index never run concurrently (one lock per index). Visibility
is still decided by SQLite: every ANN candidate is checked against the same
served-document condition as the exact scan before it is returned.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from store import vectors
from store.ann_files import IndexFiles
from store.ann_graph import Graph
from store.db import database

log = logging.getLogger(__name__)

INDEX_DIR_NAME = "vectors"
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
EPOCH_KEY = "vector_index_epoch"


def database_epoch() -> str:
    """A random token made once per database: an index built from another
    database (a recreated kb.sqlite3 reuses chunk ids) is never trusted."""
    row = database.execute_sql("SELECT value FROM node_meta WHERE key = ?", (EPOCH_KEY,)).fetchone()
    if row is None:
        with database.atomic():
            database.execute_sql(
                "INSERT OR IGNORE INTO node_meta(key, value) VALUES (?, ?)",
                (EPOCH_KEY, secrets.token_hex(16).encode("ascii")),
            )
        row = database.execute_sql("SELECT value FROM node_meta WHERE key = ?", (EPOCH_KEY,)).fetchone()
    return bytes(row[0]).decode("ascii")


@dataclass(frozen=True)
class IndexSettings:
    ef_search: int = HNSW_EF_SEARCH
    exact_scan_min_rows: int = EXACT_SCAN_MIN_ROWS
    exact_scan_fraction: float = EXACT_SCAN_FRACTION
    inline_build_max_rows: int = INLINE_BUILD_MAX_ROWS


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


class IdentityIndex:
    """The ANN index of one canonical identity: load, build, catch up, query, save."""

    def __init__(
        self, directory: Path, identity: str, dim: int, settings: IndexSettings, *, read_only: bool = False
    ) -> None:
        self.identity = identity
        self.dim = dim
        self.settings = settings
        self._files = IndexFiles(directory, identity, dim, read_only=read_only)
        self._lock = threading.RLock()
        self._graph: Graph | None = None
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
        watermark = self._files.saved_watermark()
        if watermark is None:
            return vectors.row_count(self.identity, self.dim)
        return vectors.row_count(self.identity, self.dim, after=watermark)

    def _prepare(self, *, max_build_rows: int | None = None, rebuild: bool = False) -> Graph | None:
        """A private, caught-up graph (loaded or built); None if a build would
        exceed ``max_build_rows``. Runs without the lock: the graph is not shared yet."""
        graph = None if rebuild else self._load()
        if graph is None:
            if max_build_rows is not None and vectors.row_count(self.identity, self.dim) > max_build_rows:
                return None
            graph = self._build()
        if graph is not None:
            self._catch_up(graph)
        return graph

    def _install_locked(self, graph: Graph) -> None:
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
                if graph is not None and installed:
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

    def _load(self) -> Graph | None:
        """The saved graph reconciled with the database; None means rebuild."""
        if not self._files.exist():
            return None
        loaded = self._files.load(epoch=database_epoch())
        if loaded is None:
            return None
        graph = loaded.graph
        if graph.index.get_current_count() != loaded.elements:
            log.warning("vector index element count does not match its sidecar; rebuilding")
            return None
        # Saved labels whose rows still exist become live; the others were
        # deleted since the save (by any process) and are marked deleted.
        saved = set(graph.index.get_ids_list())
        in_database = set()
        missing = []
        for chunk_id, collection_id, document_id in vectors.label_rows(self.identity, self.dim):
            in_database.add(chunk_id)
            if chunk_id in saved:
                graph.labels.add(chunk_id, collection_id, document_id)
            elif chunk_id <= loaded.watermark:
                missing.append(chunk_id)
        graph.elements = len(saved)
        graph.watermark = loaded.watermark
        for label in saved - in_database:
            try:
                graph.index.mark_deleted(label)
                graph.changed = True
            except RuntimeError:
                pass  # already marked deleted when it was saved
        if missing:
            graph.add(vectors.rows_by_id(missing, self.identity, self.dim), self.dim)
        if graph.deleted_fraction > COMPACT_DELETED_FRACTION and graph.elements >= COMPACT_MIN_ELEMENTS:
            return None  # cheaper to rebuild than to carry the dead elements
        return graph

    def _build(self) -> Graph:
        graph = Graph(self.dim, int(vectors.row_count(self.identity, self.dim) * 1.1) + 1024)
        while not self._closed:
            rows = vectors.rows_after(graph.watermark, self.identity, self.dim)
            if not rows:
                break
            graph.add(rows, self.dim)
            graph.watermark = max(graph.watermark, rows[-1][0])
        # An empty graph is worth a file only when it replaces a stale one.
        graph.changed = graph.elements > 0 or self._files.exist()
        return graph

    # -- changes

    def catch_up(self) -> None:
        """Add every row committed since the watermark; drop the rows they replaced."""
        with self._lock:
            if self._graph is not None:
                self._catch_up(self._graph)
                self._compact_if_sparse_locked()

    def _catch_up(self, graph: Graph) -> None:
        start = graph.watermark
        while not self._closed:
            rows = vectors.rows_after(graph.watermark, self.identity, self.dim)
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
            if vectors.max_chunk_id(self.identity, self.dim) > graph.watermark:
                self._catch_up(graph)
            in_scope = graph.labels.scope_count(collection_id)
            if in_scope == 0:
                return []
            query = np.ascontiguousarray(query, dtype=np.float32)
            exact_below = max(self.settings.exact_scan_min_rows, self.settings.exact_scan_fraction * graph.labels.live)
            if in_scope <= exact_below:
                return self._scan_scope(graph, query, collection_id, limit)
            return self._walk_graph(graph, query, collection_id, in_scope, limit)

    def _scan_scope(self, graph: Graph, query: np.ndarray, collection_id: str, limit: int) -> list[tuple[int, float]]:
        """Exact scan of just the collection's rows, read by id from SQLite."""
        labels = graph.labels.labels_in_scope(collection_id)
        rows = vectors.visible_vectors(labels, self.identity, self.dim, collection_id)
        return vectors.score_rows(rows, query, limit)

    def _walk_graph(
        self, graph: Graph, query: np.ndarray, collection_id: str, in_scope: int, limit: int
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
            candidates = [(int(label), 1.0 - float(d)) for label, d in zip(labels[0], distances[0], strict=True)]
            visible = vectors.visible_chunk_ids([c for c, _ in candidates], self.identity, self.dim, collection_id)
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
        return IndexConsistency(frozenset(int(x) for x in vectors.chunk_ids(self.identity, self.dim)), labels)

    # -- persistence and shutdown

    def save(self) -> bool:
        """Write the index if it changed (see :meth:`IndexFiles.save`)."""
        with self._lock:
            graph = self._graph
            if graph is None or not graph.changed or self._files.read_only:
                return False
            self._files.save(graph, epoch=database_epoch())
            graph.changed = False
            return True

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


class VectorIndexes:
    """Every identity's ANN index under ``$KBTUI_HOME/vectors``; the entry
    point for the semantic arm and for keeping the indexes in step with commits.
    """

    def __init__(self, home: Path, settings: IndexSettings | None = None, *, read_only: bool = False) -> None:
        self.directory = home / INDEX_DIR_NAME
        self.settings = settings or IndexSettings()
        self.read_only = read_only  # load and build in memory, never write a file
        self._lock = threading.Lock()
        self._indexes: dict[tuple[str, int], IdentityIndex] = {}

    def index_for(self, identity: str, dim: int) -> IdentityIndex:
        with self._lock:
            index = self._indexes.get((identity, dim))
            if index is None:
                index = IdentityIndex(self.directory, identity, dim, self.settings, read_only=self.read_only)
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
        return vectors.exact_search(query, identity, collection_id, document_id=document_id, limit=limit)

    def stored_vectors(self, chunk_ids: Sequence[int], identity: str, dim: int) -> dict[int, np.ndarray]:
        """The stored vectors of ``chunk_ids`` of exactly ``identity`` and ``dim``."""
        return vectors.stored_vectors(chunk_ids, identity, dim)

    def committed_vectors(
        self, content_hashes: Iterable[str], *, identity: str, dim: int, parser_version: int, chunker_version: int
    ) -> dict[str, np.ndarray]:
        """Committed vectors that may be reused for chunks of these contents (exact match or nothing)."""
        return vectors.committed_vectors(
            content_hashes, identity=identity, dim=dim, parser_version=parser_version, chunker_version=chunker_version
        )

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
