"""kbtui doctor: examine a data directory and say what is wrong and what to do.

It never changes anything: the catalog is read through a read-only
connection (``immutable`` when the ``-wal`` holds nothing and no node runs, so
that not even SQLite's shared-memory file is touched), no key is created, no
file removed, no log written.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import stat
from dataclasses import dataclass, field
from pathlib import Path

from store.ann import EPOCH_KEY, INDEX_DIR_NAME
from store.ann_files import SIDECAR_FORMAT
from store.blobs import MAGIC
from store.datadir import (
    BLOB_DIR_NAME,
    DB_FILE_NAME,
    DOCTOR_HINT,
    FINGERPRINT_FILE_NAME,
    DirectoryFacts,
    blob_names,
    connect_read_only,
    observe,
    prepare_home,
    recorded_key_fingerprint,
    refuse_foreign_catalog,
    sqlite_detail,
)
from store.errors import CatalogProblem, NoKnowledgeBase, StoreError
from store.keys import KEY_FILE_NAME, key_fingerprint, load_or_create_key
from store.migrations import LATEST_VERSION
from store.node_lock import node_running

PROBLEM = "problem"  # the directory must not be used until it is fixed (exit 3)
WARNING = "warning"  # works, but look at it
NOTE = "note"  # fixed by kbtui itself, or only for information
OK = "ok"



@dataclass(frozen=True)
class Finding:
    severity: str
    area: str
    message: str
    action: str = ""


@dataclass
class Examination:
    home: Path
    findings: list[Finding] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return not any(f.severity == PROBLEM for f in self.findings)

    def add(self, severity: str, area: str, message: str, action: str = "") -> None:
        self.findings.append(Finding(severity, area, message, action))


def examine_store(home: Path, database_url: str = "") -> Examination:
    """Check the knowledge base of the node at ``home``: its data directory (the
    SQLite store), or the PostgreSQL store ``database_url`` names."""
    if database_url:
        from store.postgres.doctor import examine_postgres

        return examine_postgres(home, database_url)
    return examine(home)


def examine(home: Path) -> Examination:
    """Check the data directory ``home``; raise :class:`NoKnowledgeBase` when
    there is none (nothing to examine)."""
    found = Examination(home)
    try:
        prepare_home(home, create=False)
    except NoKnowledgeBase:
        raise
    except StoreError as exc:
        found.add(PROBLEM, "data directory", exc.message)
        return found
    snapshot = not node_running(home)  # a running node may checkpoint: then read under SQLite's locks
    facts = observe(home, snapshot=snapshot)
    if facts.fresh:
        raise NoKnowledgeBase(f"no knowledge base in {home} yet (no key, no catalog, no sources)")
    _check_directory(found, home)
    catalog_whole = _check_key_and_catalog(found, home, facts)
    if facts.catalog.state == "present":
        _check_catalog_contents(found, home, whole=catalog_whole, snapshot=snapshot)
    elif facts.has_blobs:
        found.add(
            NOTE, "sources", f"{sum(1 for _ in blob_names(home))} encrypted source(s) in {BLOB_DIR_NAME}/ "
            "(kept: nothing is swept without a whole catalog)",
        )
    if not snapshot:
        found.add(NOTE, "node", "a node is running for this directory: counts may move while it works")
    return found


def _check_directory(found: Examination, home: Path) -> None:
    mode = stat.S_IMODE(home.stat().st_mode)
    if mode & 0o077:
        found.add(
            WARNING, "permissions", f"the data directory is open to other users (mode {mode:04o}); the "
            "catalog holds chunk text unencrypted", "chmod 700 the data directory unless that is intended",
        )
    else:
        found.add(OK, "data directory", f"owner-only (mode {mode:04o})")
    open_files = [
        path.name for path in (home / DB_FILE_NAME, home / KEY_FILE_NAME, home / FINGERPRINT_FILE_NAME)
        if path.exists() and stat.S_IMODE(path.stat().st_mode) & 0o077
    ]
    if open_files and mode & 0o077:
        found.add(
            WARNING, "permissions", f"readable by other users: {', '.join(open_files)}",
            "chmod 600 them (or chmod 700 the data directory)",
        )


def _check_key_and_catalog(found: Examination, home: Path, facts: DirectoryFacts) -> bool:
    """Key, fingerprint file and catalog identity; True when the catalog is known to be whole."""
    try:
        recorded = recorded_key_fingerprint(facts)
    except StoreError as exc:
        found.add(PROBLEM, "catalog" if isinstance(exc, CatalogProblem) else "node key", _without_hint(exc.message))
        return False
    try:
        key = load_or_create_key(home, data_exists=True)  # reads only: never creates over data
    except StoreError as exc:
        found.add(PROBLEM, "node key", exc.message)
        return False
    if key_fingerprint(key) != recorded:
        found.add(
            PROBLEM, "node key", f"{KEY_FILE_NAME} is not the key this data directory was written with",
            "restore the original key file",
        )
        return False
    found.add(OK, "node key", "present, owner-only, and the one this directory was written with")
    try:
        refuse_foreign_catalog(facts)
    except CatalogProblem as exc:
        found.add(PROBLEM, "catalog", _without_hint(exc.message))
        return False
    if facts.fingerprint is None:
        found.add(
            NOTE, "catalog", f"{FINGERPRINT_FILE_NAME} is not there yet (a directory from an older kbtui)",
            "the next command that writes records it",
        )
    version = facts.catalog.version
    if version < LATEST_VERSION:
        found.add(
            NOTE, "catalog", f"schema version {version}, older than this kbtui's ({LATEST_VERSION})",
            "the next command upgrades it",
        )
    else:
        found.add(OK, "catalog", f"this data directory's own, schema version {version}")
    return True


def _without_hint(message: str) -> str:
    return message.removesuffix(" " + DOCTOR_HINT)


def _check_catalog_contents(found: Examination, home: Path, *, whole: bool, snapshot: bool) -> None:
    try:
        connection = connect_read_only(home / DB_FILE_NAME, snapshot=snapshot)
    except sqlite3.Error as exc:
        found.add(PROBLEM, "catalog", f"{DB_FILE_NAME} cannot be opened ({sqlite_detail(exc)})", "restore it from a backup")
        return
    try:
        integrity = [row[0] for row in connection.execute("PRAGMA quick_check")]
        if integrity != ["ok"]:
            found.add(
                PROBLEM, "catalog", f"{DB_FILE_NAME} is damaged ({len(integrity)} integrity error(s))",
                "restore it from a backup",
            )
            return
        found.add(OK, "catalog", "passes SQLite's integrity check")
        if whole:
            _check_sources(found, home, connection)
            _check_vector_indexes(found, home, connection)
    except sqlite3.Error as exc:
        found.add(PROBLEM, "catalog", f"{DB_FILE_NAME} is damaged ({sqlite_detail(exc)})", "restore it from a backup")
    finally:
        connection.close()


def _check_sources(found: Examination, home: Path, connection: sqlite3.Connection) -> None:
    documents = {row[0] for row in connection.execute("SELECT id FROM document")}
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    removed = set()
    if "removed_document" in tables:
        removed = {row[0] for row in connection.execute("SELECT id FROM removed_document")} - documents
    blobs = set(blob_names(home))
    missing = documents - blobs
    if missing:
        found.add(
            PROBLEM, "sources", f"{len(missing)} document(s) have no encrypted source in {BLOB_DIR_NAME}/ "
            "(they keep serving their index, but cannot be re-indexed)",
            f"restore {BLOB_DIR_NAME}/ from a backup, or remove those documents (kbtui rm)",
        )
    damaged = sorted(blob_id for blob_id in blobs & documents if not _has_blob_header(home / BLOB_DIR_NAME / blob_id))
    if damaged:
        found.add(
            PROBLEM, "sources", f"{len(damaged)} encrypted source(s) have a damaged header",
            f"restore {BLOB_DIR_NAME}/ from a backup",
        )
    if not missing and not damaged:
        found.add(OK, "sources", f"{len(documents)} document(s), each with its encrypted source")
    to_sweep = blobs & removed
    if to_sweep:
        found.add(NOTE, "sources", f"{len(to_sweep)} source(s) of removed documents", "deleted at the next start")
    unknown = blobs - documents - removed
    if unknown:
        found.add(
            WARNING, "sources", f"{len(unknown)} encrypted source(s) are not in the catalog; kbtui keeps "
            "them (it deletes only what its catalog removed)",
            "a few are leftovers of adds cut short by a crash; many mean the catalog is older than "
            f"{BLOB_DIR_NAME}/ (restored from a backup?): restore the newest catalog",
        )
    leftovers = sum(1 for path in (home / BLOB_DIR_NAME).glob(".tmp-*"))
    if leftovers:
        found.add(NOTE, "sources", f"{leftovers} temp file(s) of interrupted writes", "removed at the next start")


def _has_blob_header(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def _check_vector_indexes(found: Examination, home: Path, connection: sqlite3.Connection) -> None:
    """The ANN index files against the catalog. They are a cache: whatever is
    wrong here is rebuilt or caught up at the next search, so these are notes."""
    directory = home / INDEX_DIR_NAME
    sidecars = sorted(directory.glob("*.json")) if directory.is_dir() else []
    row = connection.execute("SELECT value FROM node_meta WHERE key = ?", (EPOCH_KEY,)).fetchone()
    epoch = bytes(row[0]).decode("ascii", "replace") if row else None
    healthy = 0
    for sidecar_path in sidecars:
        problem = _index_problem(directory, sidecar_path, epoch, connection)
        if problem:
            found.add(NOTE, "vector index", f"{sidecar_path.stem}: {problem}", "rebuilt or caught up at the next search")
        else:
            healthy += 1
    if healthy:
        found.add(OK, "vector index", f"{healthy} index file(s) match the catalog")


def _index_problem(directory: Path, sidecar_path: Path, epoch: str | None, connection: sqlite3.Connection) -> str:
    try:
        sidecar = json.loads(sidecar_path.read_text(encoding="utf-8"))
        identity, dim, watermark = str(sidecar["identity"]), int(sidecar["dim"]), int(sidecar["watermark"])
        name, size, digest = str(sidecar["file"]), int(sidecar["size"]), str(sidecar["sha256"])
        if sidecar["format"] != SIDECAR_FORMAT:
            return "written by another kbtui version"
    except (OSError, ValueError, KeyError, TypeError):
        return "its sidecar is unreadable"
    if sidecar.get("epoch") != epoch:
        return "built from another catalog"
    path = directory / Path(name).name
    try:
        if path.stat().st_size != size:
            return "the index file has the wrong size"
        with open(path, "rb") as handle:
            if hashlib.file_digest(handle, "sha256").hexdigest() != digest:
                return "the index file is corrupt"
    except OSError:
        return "the index file is missing"
    rows, top = connection.execute(
        "SELECT count(*), max(chunk_id) FROM vector WHERE identity = ? AND dim = ?", (identity, dim)
    ).fetchone()
    if watermark > (top or 0):
        return "it knows vectors the catalog does not have (the catalog is older than the index?)"
    if (top or 0) > watermark:
        return f"{rows} vector(s) in the catalog, some added after the index was saved"
    return ""


def examination_json(found: Examination) -> dict[str, object]:
    return {
        "home": str(found.home),
        "healthy": found.healthy,
        "findings": [
            {"severity": f.severity, "area": f.area, "message": f.message, "action": f.action or None}
            for f in found.findings
        ],
    }

