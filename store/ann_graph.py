"""One loaded hnswlib graph and which collection and document each of its
labels belongs to: the in-memory part of an ANN index (:mod:`store.ann`).

Labels are chunk ids (AUTOINCREMENT, never reused). Nothing here is
thread-safe: the owning index guards every graph with its lock, because
hnswlib is not safe for a query concurrent with an insert.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import hnswlib
import numpy as np

from store.vectors import IndexRow

HNSW_M = 16
HNSW_EF_CONSTRUCTION = 200


class Labels:
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


class Graph:
    """One hnswlib index and its label bookkeeping (guarded by the owner's lock)."""

    def __init__(self, dim: int, capacity: int | None) -> None:
        """A new empty graph for ``capacity`` elements, or (None) one to load into."""
        self.index = hnswlib.Index(space="ip", dim=dim)
        if capacity is not None:
            self.index.init_index(max_elements=max(capacity, 1024), ef_construction=HNSW_EF_CONSTRUCTION, M=HNSW_M)
        self.index.set_num_threads(graph_threads())
        self.labels = Labels()
        self.watermark = 0  # highest chunk id ever added
        self.elements = 0  # graph elements, live or marked deleted
        self.changed = False

    def add(self, rows: Sequence[IndexRow], dim: int) -> None:
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


def graph_threads() -> int:
    """Threads hnswlib may use for adds (queries run on one)."""
    return max(1, min(os.cpu_count() or 1, 4))
