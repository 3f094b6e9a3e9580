"""kbtui doctor: examine a data directory and say what is wrong and what to do.

It never changes anything: the catalog is read through a read-only
connection (``immutable`` when the ``-wal`` holds nothing and no node runs, so
that not even SQLite's shared-memory file is touched), no key is created, no
file removed, no log written.

By default every document's encrypted source is decrypted and authenticated,
streaming (one segment in memory), under its own document's id: a flipped
byte, a truncated file and another document's blob all fail. Its bytes are
also hashed against the hash the catalog recorded. ``quick`` only checks that
each source is there and starts with a blob header.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from store.ann import EPOCH_KEY, INDEX_DIR_NAME
from store.ann_files import SIDECAR_FORMAT
from store.blobs import MAGIC, BlobStore, open_name
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
from store.errors import BlobCorrupt, CatalogProblem, NoKnowledgeBase, StoreError
from store.keys import KEY_FILE_NAME, key_fingerprint, load_or_create_key
from store.migrations import LATEST_VERSION
from store.node_lock import node_running

PROBLEM = "problem"  # the directory must not be used until it is fixed (exit 3)
WARNING = "warning"  # works, but look at it
NOTE = "note"  # fixed by kbtui itself, or only for information
OK = "ok"

# What a source is found to be (content-free codes).
SOURCE_MISSING = "missing"
SOURCE_BAD_HEADER = "bad_header"
SOURCE_FAILED_AUTHENTICATION = "failed_authentication"  # flipped, truncated, or another document's
SOURCE_UNREADABLE = "unreadable"
SOURCE_OTHER_BYTES = "other_bytes"  # authentic, but not the bytes the catalog recorded

# Called with the bytes of sources authenticated so far and in all.
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Finding:
    severity: str
    area: str
    message: str
    action: str = ""


@dataclass(frozen=True)
class DamagedSource:
    """A document whose encrypted source is not what it must be, named for the operator."""

    document_id: str
    name: str
    problem: str


@dataclass
class Examination:
    home: Path
    findings: list[Finding] = field(default_factory=list)
    damaged: list[DamagedSource] = field(default_factory=list)
    quick: bool = False
    authenticated_bytes: int = 0

    @property
    def healthy(self) -> bool:
        return not any(f.severity == PROBLEM for f in self.findings)

    def add(self, severity: str, area: str, message: str, action: str = "") -> None:
        self.findings.append(Finding(severity, area, message, action))


def examine_store(
    home: Path, database_url: str = "", *, quick: bool = False, progress: Progress | None = None
) -> Examination:
    """Check the knowledge base of the node at ``home``: its data directory (the
    SQLite store), or the PostgreSQL store ``database_url`` names."""
    if database_url:
        from store.postgres.doctor import examine_postgres

        return examine_postgres(home, database_url)
    return examine(home, quick=quick, progress=progress)


def examine(home: Path, *, quick: bool = False, progress: Progress | None = None) -> Examination:
    """Check the data directory ``home``; raise :class:`NoKnowledgeBase` when
    there is none (nothing to examine). Unless ``quick``, every source is
    decrypted and authenticated (``progress`` hears how far)."""
    found = Examination(home, quick=quick)
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
    key = _check_key_and_catalog(found, home, facts)
    if facts.catalog.state == "present":
        _check_catalog_contents(found, home, key, snapshot=snapshot, progress=progress)
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


def _check_key_and_catalog(found: Examination, home: Path, facts: DirectoryFacts) -> bytes | None:
    """Key, fingerprint file and catalog identity; the key when the catalog is known to be whole."""
    try:
        recorded = recorded_key_fingerprint(facts)
    except StoreError as exc:
        found.add(PROBLEM, "catalog" if isinstance(exc, CatalogProblem) else "node key", _without_hint(exc.message))
        return None
    try:
        key = load_or_create_key(home, data_exists=True)  # reads only: never creates over data
    except StoreError as exc:
        found.add(PROBLEM, "node key", exc.message)
        return None
    if key_fingerprint(key) != recorded:
        found.add(
            PROBLEM, "node key", f"{KEY_FILE_NAME} is not the key this data directory was written with",
            "restore the original key file",
        )
        return None
    found.add(OK, "node key", "present, owner-only, and the one this directory was written with")
    try:
        refuse_foreign_catalog(facts, key)
    except CatalogProblem as exc:
        found.add(PROBLEM, "catalog", _without_hint(exc.message))
        return None
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
    return key


def _without_hint(message: str) -> str:
    return message.removesuffix(" " + DOCTOR_HINT)


def _check_catalog_contents(
    found: Examination, home: Path, key: bytes | None, *, snapshot: bool, progress: Progress | None
) -> None:
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
        if key is not None:  # the catalog is whole and the key is its own
            _check_sources(found, home, connection, key, progress)
            _check_vector_indexes(found, home, connection)
    except sqlite3.Error as exc:
        found.add(PROBLEM, "catalog", f"{DB_FILE_NAME} is damaged ({sqlite_detail(exc)})", "restore it from a backup")
    finally:
        connection.close()


def _check_sources(
    found: Examination, home: Path, connection: sqlite3.Connection, key: bytes, progress: Progress | None
) -> None:
    documents = {
        row[0]: (bytes(row[1]), row[2]) for row in connection.execute("SELECT id, display_name, content_hash FROM document")
    }
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    removed = set()
    if "removed_document" in tables:
        removed = {row[0] for row in connection.execute("SELECT id FROM removed_document")} - documents.keys()
    blobs = set(blob_names(home))
    problems = {document_id: SOURCE_MISSING for document_id in documents.keys() - blobs}
    present = sorted(blobs & documents.keys())
    if found.quick:
        problems.update(
            (document_id, SOURCE_BAD_HEADER)
            for document_id in present if not _has_blob_header(home / BLOB_DIR_NAME / document_id)
        )
    elif present:
        problems.update(_authenticate(found, home, key, {d: documents[d][1] for d in present}, progress))
    damaged = [DamagedSource(d, _name(key, d, documents[d][0]), problem) for d, problem in problems.items()]
    found.damaged.extend(sorted(damaged, key=lambda d: (d.name, d.document_id)))
    _report_sources(found, len(documents), problems)
    to_sweep = blobs & removed
    if to_sweep:
        found.add(NOTE, "sources", f"{len(to_sweep)} source(s) of removed documents", "deleted at the next start")
    unknown = blobs - documents.keys() - removed
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


def _authenticate(
    found: Examination, home: Path, key: bytes, expected_hashes: dict[str, str], progress: Progress | None
) -> dict[str, str]:
    """Decrypt every source under its own document's id, hashing what comes out; the problem of each bad one."""
    directory = home / BLOB_DIR_NAME
    sizes = {}
    for document_id in expected_hashes:
        try:
            sizes[document_id] = (directory / document_id).stat().st_size
        except OSError:
            sizes[document_id] = 0
    total, finished = sum(sizes.values()), 0
    blobs = BlobStore(directory, key)  # the directory exists: it holds these sources
    problems: dict[str, str] = {}
    for document_id, expected in expected_hashes.items():
        digest = hashlib.sha256()
        read = 0
        try:
            for part in blobs.iter_plaintext(document_id):
                digest.update(part)
                read += len(part)
                if progress is not None:
                    progress(min(finished + read, total), total)
        except BlobCorrupt:
            problems[document_id] = SOURCE_FAILED_AUTHENTICATION
        except OSError:
            problems[document_id] = SOURCE_UNREADABLE
        else:
            if digest.hexdigest() != expected:
                problems[document_id] = SOURCE_OTHER_BYTES
        found.authenticated_bytes += read
        finished += sizes[document_id]
        if progress is not None:
            progress(finished, total)
    return problems


_PROBLEM_TEXT = {
    SOURCE_MISSING: f"have no encrypted source in {BLOB_DIR_NAME}/",
    SOURCE_BAD_HEADER: "have an encrypted source with a damaged header",
    SOURCE_FAILED_AUTHENTICATION: "have an encrypted source that fails authentication (damaged, truncated, "
    "or another document's)",
    SOURCE_UNREADABLE: "have an encrypted source that cannot be read",
    SOURCE_OTHER_BYTES: "have an authentic encrypted source that holds other bytes than the catalog recorded "
    "(an update cut short, or an older copy restored)",
}
_WHAT_TO_DO = (
    f"restore {BLOB_DIR_NAME}/ from a backup; or add each file again from its original and remove the "
    "damaged document (kbtui rm ID). Their index keeps serving meanwhile, but they cannot be re-indexed"
)
_OTHER_BYTES_TO_DO = "kbtui sync reads a source's file again; kbtui reindex ID indexes the bytes stored"


def _report_sources(found: Examination, documents: int, problems: dict[str, str]) -> None:
    for problem, text in _PROBLEM_TEXT.items():
        count = sum(1 for p in problems.values() if p == problem)
        if problem == SOURCE_OTHER_BYTES and count:
            found.add(WARNING, "sources", f"{count} document(s) {text}", _OTHER_BYTES_TO_DO)
        elif count:
            found.add(PROBLEM, "sources", f"{count} document(s) {text}", _WHAT_TO_DO)
    if not problems:
        checked = "present with a blob header (quick check)" if found.quick else "authenticated"
        found.add(OK, "sources", f"{documents} document(s), each with its encrypted source, {checked}")


def _name(key: bytes, document_id: str, sealed: bytes) -> str:
    try:
        return open_name(key, document_id, sealed)
    except BlobCorrupt:
        return f"(unreadable name) {document_id[:12]}"


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
        "quick": found.quick,
        "authenticated_bytes": found.authenticated_bytes,
        "findings": [
            {"severity": f.severity, "area": f.area, "message": f.message, "action": f.action or None}
            for f in found.findings
        ],
        "damaged_sources": [
            {"document_id": d.document_id, "name": d.name, "problem": d.problem} for d in found.damaged
        ],
    }

