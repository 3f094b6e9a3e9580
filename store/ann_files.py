"""The ANN index of one identity on disk: an hnswlib file per save, and a JSON
sidecar that names the current one.

A save writes a new file (temp, fsync, rename), then the sidecar with that
file's size and digest, the graph parameters, the database epoch and the
watermark, then removes the file it replaced. A load trusts a file only when
all of those check out; anything else means "rebuild from the database",
never a blind load. Saves and loads hold the index's lock file, so no process
reads a file another is still writing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from store.ann_graph import HNSW_EF_CONSTRUCTION, HNSW_M, Graph, graph_threads
from store.file_lock import FileLock
from store.files import fsync_dir, replace_durably

log = logging.getLogger(__name__)

SIDECAR_FORMAT = 1


@dataclass(frozen=True)
class LoadedGraph:
    """A graph read back from its file, before it is reconciled with the database."""

    graph: Graph
    elements: int  # as saved, live or marked deleted
    watermark: int  # the highest chunk id the saved graph had seen


class IndexFiles:
    """The files of one identity's index under the index directory."""

    def __init__(self, directory: Path, identity: str, dim: int, *, read_only: bool = False) -> None:
        self.identity = identity
        self.dim = dim
        # Read-only (a process that only reads, perhaps on a read-only mount):
        # load, never save or remove a file, never create the lock file.
        self.read_only = read_only
        self._directory = directory
        self._slug = hashlib.sha256(f"{identity}|{dim}".encode()).hexdigest()[:20]
        self._sidecar = directory / f"{self._slug}.json"
        self._lockfile = directory / f"{self._slug}.lock"

    def exist(self) -> bool:
        """Whether a saved index (its sidecar) is on disk."""
        return self._sidecar.exists()

    def saved_watermark(self) -> int | None:
        """The watermark the sidecar claims (cheap, unverified), or None."""
        try:
            return int(json.loads(self._sidecar.read_text(encoding="utf-8"))["watermark"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save(self, graph: Graph, *, epoch: str) -> None:
        """Write ``graph``: new file, fsync, rename; then the sidecar that
        names it; then remove the file it replaced. Nothing when read-only."""
        if self.read_only:
            return
        self._directory.mkdir(parents=True, exist_ok=True)
        with FileLock.acquire(self._lockfile):
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
                    "epoch": epoch,
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

    def load(self, *, epoch: str) -> LoadedGraph | None:
        """The saved graph if its sidecar, size, digest and parameters all
        check out (and it was built from the database of ``epoch``); None
        means rebuild."""
        if not self._sidecar.exists():
            return None
        lock = FileLock.shared_if_exists(self._lockfile) if self.read_only else FileLock.acquire(self._lockfile)
        with contextlib.nullcontext() if lock is None else lock:
            try:
                sidecar = json.loads(self._sidecar.read_text(encoding="utf-8"))
                expected = (SIDECAR_FORMAT, self.identity, self.dim, epoch, HNSW_M, HNSW_EF_CONSTRUCTION)
                found = tuple(sidecar[k] for k in ("format", "identity", "dim", "epoch", "M", "ef_construction"))
                name = str(sidecar["file"])
                if found != expected or Path(name).name != name or not name.startswith(self._slug):
                    log.info("vector index sidecar does not match; rebuilding")
                    return None
                path = self._directory / name
                # Under the lock no save is in progress: other files are leftovers of a killed one.
                if not self.read_only:
                    self._remove_stale_files(keep=name)
                if path.stat().st_size != int(sidecar["size"]):
                    log.warning("vector index file has the wrong size; rebuilding")
                    return None
                with open(path, "rb") as handle:
                    if hashlib.file_digest(handle, "sha256").hexdigest() != sidecar["sha256"]:
                        log.warning("vector index file is corrupt; rebuilding")
                        return None
                graph = Graph(self.dim, None)
                graph.index.load_index(str(path), max_elements=int(sidecar["elements"]) + 1024)
                graph.index.set_num_threads(graph_threads())
                return LoadedGraph(graph, int(sidecar["elements"]), int(sidecar["watermark"]))
            except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
                log.warning("vector index could not be loaded (%s); rebuilding", type(exc).__name__)
                return None

    def _remove_stale_files(self, *, keep: str) -> None:
        for path in [*self._directory.glob(f"{self._slug}.*.hnsw*"), *self._directory.glob(f"{self._slug}.json.tmp")]:
            if path.name != keep:
                path.unlink(missing_ok=True)
        fsync_dir(self._directory)


def _write_json_durably(path: Path, payload: dict[str, object]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(payload, handle)
        handle.flush()
        os.fsync(handle.fileno())
    replace_durably(tmp, path)
