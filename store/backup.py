"""Backups of a data directory: taken online, checked against the key, restored whole.

A backup is a directory::

    manifest.json               counts, ids and a checksum of every file, with a MAC from the node key
    catalog-<stamp>.sqlite3     the catalog, copied with SQLite's online backup API
    blobs/<id>.<sha256[:16]>    the encrypted sources, copied as they are
    node.key                    only when asked for (--with-key)
    .kbtui-backup               marks a directory kbtui made (and may tidy)

The ANN caches are left out: they are rebuilt from the catalog.

**Consistency.** The catalog is copied in one read transaction (one step of
the backup API), so it is one committed state. The blobs are copied after it,
while the node goes on working; what changed meanwhile is settled in the
copied catalog the way the node itself would settle it: a document whose blob
is gone was deleted after the copy (its row goes too, as a purge would do it),
and a blob whose sealed content hash is not its row's was updated in place
(the row is set Pending on the new bytes, its old index serving, as the update
does); a document caught mid-pipeline is Pending again, as at a node's start.
Blobs written after the catalog copy for documents it does not have are left
out. So a restored backup is a state the node could have stopped in.

**Interruptions.** A file in a backup is never overwritten: blob copies are
named by their checksum and the catalog by the time of the copy, each written
to a temp name, fsynced and renamed. The manifest is renamed into place last;
it names only files that are whole. A first backup is built in
``<DEST>.partial`` and renamed to ``<DEST>`` at the end; an incremental one
adds its new files beside the old ones and removes what the new manifest no
longer names only after it is in place. A backup killed at any point leaves
the previous one usable, and a re-run completes.

Kept apart so another store (PostgreSQL) can supply its own: copying the
catalog (:func:`copy_catalog`) and enumerating and copying the blobs
(:func:`blobs_to_copy`, :func:`copy_blob`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field, replace
from pathlib import Path

from store.blobs import BlobFile
from store.datadir import (
    BLOB_DIR_NAME,
    CATALOG_ID_KEY,
    DB_FILE_NAME,
    FINGERPRINT_KEY,
    blob_names,
    connect_read_only,
    sqlite_detail,
)
from store.db import catalog_uri
from store.errors import BackupProblem, BlobCorrupt, KeyProblem, StoreError
from store.file_lock import FileLock
from store.files import CopiedFile, copy_durably, file_digest, fsync_dir
from store.keys import KEY_BYTES, KEY_FILE_NAME, key_fingerprint

MANIFEST_NAME = "manifest.json"
MARKER_NAME = ".kbtui-backup"
PARTIAL_SUFFIX = ".partial"
BACKUP_FORMAT = 1
# A blob the copied catalog does not know is backed up only when it is older
# than this before the copy: younger ones are adds still in flight (their rows
# come after the copy), older ones are leftovers the node keeps (kbtui doctor counts them).
UNKNOWN_BLOB_MIN_AGE_S = 300.0
COPY_THREADS = 4
_MAC_LABEL = b"kbtui backup manifest v1"

Progress = Callable[[str, int, int], object]  # (stage, done, total)


# ---------------------------------------------------------------- the manifest


@dataclass(frozen=True)
class BlobEntry:
    """One encrypted source in a backup, and the node file it was copied from."""

    id: str
    file: str  # relative to the backup directory
    size: int
    sha256: str
    source_size: int
    source_mtime_ns: int
    content_hash: str | None  # from the sealed label (format 2); None for format 1
    in_catalog: bool


@dataclass(frozen=True)
class FileEntry:
    file: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    catalog_id: str
    key_fingerprint: str  # hex
    schema_version: int
    created_at: float
    catalog: FileEntry
    blobs: tuple[BlobEntry, ...]
    counts: dict[str, int]
    key: FileEntry | None = None

    def body(self) -> dict[str, object]:
        return {
            "format": BACKUP_FORMAT,
            "catalog_id": self.catalog_id,
            "key_fingerprint": self.key_fingerprint,
            "schema_version": self.schema_version,
            "created_at": self.created_at,
            "catalog": vars(self.catalog),
            "key": None if self.key is None else vars(self.key),
            "counts": self.counts,
            "blobs": [vars(entry) for entry in self.blobs],
        }

    def sealed_json(self, node_key: bytes) -> bytes:
        body = self.body()
        return json.dumps({**body, "mac": _mac(node_key, body)}, indent=1, sort_keys=True).encode("ascii")

    @classmethod
    def parse(cls, raw: bytes) -> tuple[Manifest, str]:
        """The manifest and its MAC (checked by :func:`read_manifest`)."""
        try:
            data = json.loads(raw)
            if data.get("format") != BACKUP_FORMAT:
                raise BackupProblem(f"the backup's {MANIFEST_NAME} is of another format; use the kbtui that wrote it")
            manifest = cls(
                catalog_id=str(data["catalog_id"]),
                key_fingerprint=str(data["key_fingerprint"]),
                schema_version=int(data["schema_version"]),
                created_at=float(data["created_at"]),
                catalog=FileEntry(**data["catalog"]),
                blobs=tuple(BlobEntry(**entry) for entry in data["blobs"]),
                counts={str(k): int(v) for k, v in data["counts"].items()},
                key=None if data["key"] is None else FileEntry(**data["key"]),
            )
            return manifest, str(data["mac"])
        except (ValueError, KeyError, TypeError, AttributeError):
            raise BackupProblem(f"the backup's {MANIFEST_NAME} is damaged (it cannot be read)") from None


def _mac(node_key: bytes, body: dict[str, object]) -> str:
    mac_key = hmac.new(node_key, _MAC_LABEL, hashlib.sha256).digest()
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode("ascii")
    return hmac.new(mac_key, canonical, hashlib.sha256).hexdigest()


def read_manifest(backup: Path, node_key: bytes | None) -> Manifest:
    """The backup's manifest; with ``node_key``, checked to be this key's and untampered."""
    try:
        raw = (backup / MANIFEST_NAME).read_bytes()
    except FileNotFoundError:
        if (backup / MARKER_NAME).exists():
            raise BackupProblem(f"{backup} is an unfinished backup (no {MANIFEST_NAME}); run the backup again") from None
        raise BackupProblem(f"{backup} holds no kbtui backup (no {MANIFEST_NAME})") from None
    manifest, mac = Manifest.parse(raw)
    if node_key is not None:
        check_key(manifest, node_key)
        if not hmac.compare_digest(mac, _mac(node_key, manifest.body())):
            raise BackupProblem(f"the backup's {MANIFEST_NAME} was changed after it was written (its MAC does not match)")
    return manifest


def read_key_file(path: Path) -> bytes:
    """A node key from a file given for a backup, a restore or a recovery."""
    try:
        key = path.read_bytes()
    except OSError as exc:
        raise KeyProblem(f"the key file cannot be read ({os.strerror(exc.errno or 0).lower()})") from None
    if len(key) != KEY_BYTES:
        raise KeyProblem("the key file is not a kbtui node key (wrong length)")
    return key


def check_key(manifest: Manifest, node_key: bytes) -> None:
    if not hmac.compare_digest(key_fingerprint(node_key).hex(), manifest.key_fingerprint):
        raise KeyProblem("the node key does not match this backup (it was taken with another key); nothing was changed")


def _write_manifest(directory: Path, manifest: Manifest, node_key: bytes) -> None:
    tmp = directory / f".tmp-{MANIFEST_NAME}"
    with open(tmp, "wb") as out:
        out.write(manifest.sealed_json(node_key))
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, directory / MANIFEST_NAME)
    fsync_dir(directory)


# ---------------------------------------------------------------- copying the catalog


@dataclass(frozen=True)
class CatalogCopy:
    """A consistent copy of the catalog (not yet checksummed: it is settled first)."""

    path: Path
    started_at: float
    catalog_id: str
    key_fingerprint: bytes
    schema_version: int


def copy_catalog(home: Path, directory: Path) -> CatalogCopy:
    """Copy the SQLite catalog into ``directory`` with the online backup API, in
    one step: one read transaction, so one committed state, while the node
    goes on writing (WAL readers do not block writers)."""
    tmp = directory / f".tmp-catalog-{os.getpid()}"
    tmp.unlink(missing_ok=True)
    started_at = time.time()
    source = connect_read_only(home / DB_FILE_NAME)
    try:
        target = sqlite3.connect(tmp)
        try:
            source.backup(target)  # pages=-1: the whole file in one step
            target.execute("PRAGMA journal_mode = DELETE")  # one self-contained file, no -wal beside it
            meta = dict(target.execute(
                "SELECT key, value FROM node_meta WHERE key IN (?, ?)", (CATALOG_ID_KEY, FINGERPRINT_KEY)
            ).fetchall())
            version = target.execute("SELECT MAX(version) FROM schema_version").fetchone()[0]
        finally:
            target.close()
    except sqlite3.Error as exc:
        tmp.unlink(missing_ok=True)
        raise StoreError(f"the catalog could not be copied ({sqlite_detail(exc)}); nothing was changed") from None
    finally:
        source.close()
    return CatalogCopy(
        tmp, started_at, bytes(meta[CATALOG_ID_KEY]).decode("ascii"), bytes(meta[FINGERPRINT_KEY]), int(version)
    )


# ---------------------------------------------------------------- enumerating and copying the blobs


@dataclass(frozen=True)
class BlobPlan:
    """Which blobs a backup copies: the copied catalog's documents (id to
    content hash) and, beside them, old blobs the catalog does not know."""

    documents: dict[str, str]
    unknown: tuple[str, ...]

    @property
    def total(self) -> int:
        return len(self.documents) + len(self.unknown)


def blobs_to_copy(home: Path, catalog: CatalogCopy) -> BlobPlan:
    """The blobs the backup of ``catalog`` holds (see :data:`UNKNOWN_BLOB_MIN_AGE_S`);
    blobs of documents the catalog recorded as removed are left out."""
    with closing(sqlite3.connect(catalog.path)) as connection:
        documents = dict(connection.execute("SELECT id, content_hash FROM document ORDER BY id").fetchall())
        removed = {row[0] for row in connection.execute("SELECT id FROM removed_document")}
    unknown = []
    for name in sorted(set(blob_names(home)) - documents.keys() - removed):
        try:
            if (home / BLOB_DIR_NAME / name).stat().st_mtime < catalog.started_at - UNKNOWN_BLOB_MIN_AGE_S:
                unknown.append(name)
        except FileNotFoundError:
            continue
    return BlobPlan(documents, tuple(unknown))


def copy_blob(
    home: Path, blob_id: str, directory: Path, node_key: bytes, *, previous: BlobEntry | None, in_catalog: bool
) -> tuple[BlobEntry, bool] | None:
    """Copy one encrypted blob as it is into ``directory`` (``blobs/`` of a
    backup): its entry, and whether it was copied now. None when the node no
    longer has it. ``previous`` (the last backup's entry) is reused when the
    node's file has not changed since and the copy is still there: that is
    what makes a backup incremental."""
    try:
        handle = open(home / BLOB_DIR_NAME / blob_id, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return None
    with handle:
        info = os.fstat(handle.fileno())
        if (
            previous is not None
            and (previous.source_size, previous.source_mtime_ns) == (info.st_size, info.st_mtime_ns)
            and _size_or_none(directory.parent / previous.file) == previous.size
        ):
            return replace(previous, in_catalog=in_catalog), False
        copied = copy_durably(handle, directory, lambda sha256: f"{blob_id}.{sha256[:16]}")
    try:
        with BlobFile(copied.path, node_key, blob_id) as blob:
            label = blob.label()
        content_hash = None if label is None else label.content_hash
    except BlobCorrupt:
        content_hash = None  # damaged at the node already: copied as it is, and --verify says so
    entry = BlobEntry(
        id=blob_id, file=f"{BLOB_DIR_NAME}/{copied.path.name}", size=copied.size, sha256=copied.sha256,
        source_size=info.st_size, source_mtime_ns=info.st_mtime_ns, content_hash=content_hash, in_catalog=in_catalog,
    )
    return entry, True


def _size_or_none(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


# ---------------------------------------------------------------- settling the copied catalog


@dataclass(frozen=True)
class Settled:
    """What the backup settled in its catalog copy: documents whose blob went
    away or changed while it ran, and documents caught mid-pipeline."""

    removed: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    requeued: int = 0


_IN_FLIGHT = ("Extracting", "Chunking", "Embedding")


def settle_catalog(path: Path, plan: BlobPlan, copied: dict[str, BlobEntry]) -> Settled:
    """Bring the copied catalog in line with the blobs copied after it, as the
    node would: a document whose blob is gone was deleted, one whose blob
    holds other bytes was updated in place (Pending, its old index serving).
    A document caught mid-pipeline is Pending again, as at a node's start."""
    removed = [doc_id for doc_id in plan.documents if doc_id not in copied]
    updated = [
        doc_id for doc_id, entry in copied.items()
        if entry.in_catalog and entry.content_hash is not None and entry.content_hash != plan.documents[doc_id]
    ]
    now = time.time()
    marks = ", ".join("?" for _ in _IN_FLIGHT)
    with closing(sqlite3.connect(path)) as connection:
        connection.execute("PRAGMA foreign_keys = ON")
        with connection:
            for doc_id in removed:
                # Children go by ON DELETE CASCADE; chunk rows leave the full-text index by their trigger.
                connection.execute("DELETE FROM document WHERE id = ?", (doc_id,))
            for doc_id in updated:
                connection.execute("UPDATE document SET content_hash = ? WHERE id = ?", (copied[doc_id].content_hash, doc_id))
            requeue = [row[0] for row in connection.execute(
                f"SELECT id FROM document WHERE status IN ({marks})", _IN_FLIGHT
            )]
            for doc_id in dict.fromkeys([*updated, *requeue]):
                connection.execute(
                    "UPDATE document SET status = 'Pending', failure_reason = NULL, progress = 0, updated_at = ?"
                    " WHERE id = ?", (now, doc_id),
                )
                connection.execute(
                    "INSERT INTO status_history(document_id, status, reason, at) VALUES (?, 'Pending', NULL, ?)",
                    (doc_id, now),
                )
    return Settled(tuple(removed), tuple(updated), len(requeue))


def _catalog_counts(path: Path, blobs: int) -> dict[str, int]:
    with closing(sqlite3.connect(path)) as connection:
        counts = {f"status:{status}": n for status, n in connection.execute(
            "SELECT status, count(*) FROM document GROUP BY status"
        )}
        counts["documents"] = sum(counts.values())
        counts["chunks"] = connection.execute("SELECT count(*) FROM chunk").fetchone()[0]
        counts["collections"] = connection.execute("SELECT count(*) FROM collection").fetchone()[0]
    counts["blobs"] = blobs
    return counts


# ---------------------------------------------------------------- taking a backup


@dataclass(frozen=True)
class BackupReport:
    destination: Path
    incremental: bool
    documents: int
    blobs: int
    blobs_copied: int
    bytes_copied: int
    catalog_bytes: int
    with_key: bool
    seconds: float
    settled: Settled = field(default_factory=Settled)
    unknown_blobs: int = 0


def take_backup(
    home: Path,
    destination: Path,
    node_key: bytes,
    *,
    incremental: bool = False,
    with_key: bool = False,
    on_progress: Progress | None = None,
) -> BackupReport:
    """Back up the data directory ``home`` (whose key has been checked) into ``destination``.

    Without ``incremental`` the destination must be new (or an empty
    directory). With it, a backup already there is brought up to date,
    copying only the blobs it lacks; none there makes a first one.
    """
    started = time.perf_counter()
    destination = destination.absolute()
    _refuse_inside(destination, home)
    previous = _previous_backup(destination, node_key) if incremental else None
    if previous is None:
        _refuse_existing(destination, incremental=incremental)
        work, lock = _fresh_partial(destination)
    else:
        work, lock = destination, _lock_backup(destination, destination)
    with lock:
        report = _write_backup(home, destination, work, previous, node_key, with_key, on_progress or (lambda *_: None))
    return replace(report, seconds=time.perf_counter() - started)


def _write_backup(
    home: Path, destination: Path, work: Path, previous: Manifest | None, node_key: bytes, with_key: bool,
    progress: Progress,
) -> BackupReport:
    blob_dir = work / BLOB_DIR_NAME
    blob_dir.mkdir(mode=0o700, exist_ok=True)

    progress("catalog", 0, 1)
    catalog = copy_catalog(home, work)
    if previous is not None and previous.catalog_id != catalog.catalog_id:
        catalog.path.unlink()
        raise BackupProblem(f"{destination} holds a backup of another data directory; give a new destination")
    progress("catalog", 1, 1)

    plan = blobs_to_copy(home, catalog)
    earlier = {entry.id: entry for entry in previous.blobs} if previous else {}
    copied: dict[str, BlobEntry] = {}
    fresh = 0
    bytes_copied = 0

    def copy(item: tuple[str, bool]) -> tuple[str, tuple[BlobEntry, bool] | None]:
        blob_id, in_catalog = item
        return blob_id, copy_blob(home, blob_id, blob_dir, node_key, previous=earlier.get(blob_id), in_catalog=in_catalog)

    # A few copies at once: most of a copy's time is its fsync, and the
    # file system commits concurrent ones together.
    with ThreadPoolExecutor(COPY_THREADS, thread_name_prefix="kbtui-backup") as pool:
        for done, (blob_id, outcome) in enumerate(pool.map(copy, _planned(plan)), 1):
            if outcome is not None:
                entry, copied_now = outcome
                copied[blob_id] = entry
                if copied_now:
                    fresh += 1
                    bytes_copied += entry.size
            progress("sources", done, plan.total)
    fsync_dir(blob_dir)

    settled = settle_catalog(catalog.path, plan, copied)
    counts = _catalog_counts(catalog.path, len(copied))
    catalog_file = _name_by_checksum(catalog.path, lambda sha256: f"catalog-{int(catalog.started_at)}-{sha256[:8]}.sqlite3")
    key_entry = _copy_key(home, work) if with_key else None
    manifest = Manifest(
        catalog_id=catalog.catalog_id,
        key_fingerprint=catalog.key_fingerprint.hex(),
        schema_version=catalog.schema_version,
        created_at=catalog.started_at,
        catalog=_file_entry(work, catalog_file),
        blobs=tuple(copied[blob_id] for blob_id in sorted(copied)),
        counts=counts,
        key=key_entry,
    )
    _write_manifest(work, manifest, node_key)
    if previous is None:
        os.rename(work, destination)  # onto a missing or empty directory
        fsync_dir(destination.parent)
    _remove_unnamed(destination, manifest)
    return BackupReport(
        destination=destination, incremental=previous is not None, documents=counts["documents"],
        blobs=len(copied), blobs_copied=fresh, bytes_copied=bytes_copied, catalog_bytes=catalog_file.size,
        with_key=with_key, seconds=0.0, settled=settled,
        unknown_blobs=sum(1 for e in copied.values() if not e.in_catalog),
    )


def _planned(plan: BlobPlan) -> Iterator[tuple[str, bool]]:
    for blob_id in plan.documents:
        yield blob_id, True
    for blob_id in plan.unknown:
        yield blob_id, False


def _name_by_checksum(tmp: Path, name: Callable[[str], str]) -> CopiedFile:
    """Fsync a finished temp file and rename it to ``name(its sha256)`` beside it."""
    size, sha256 = file_digest(tmp)
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    final = tmp.with_name(name(sha256))
    os.replace(tmp, final)
    return CopiedFile(final, size, sha256)


def _file_entry(directory: Path, copied: CopiedFile) -> FileEntry:
    return FileEntry(str(copied.path.relative_to(directory)), copied.size, copied.sha256)


def _copy_key(home: Path, work: Path) -> FileEntry:
    with open(home / KEY_FILE_NAME, "rb") as handle:
        copied = copy_durably(handle, work, KEY_FILE_NAME)
    os.chmod(copied.path, 0o600)
    return _file_entry(work, copied)


def _refuse_inside(destination: Path, home: Path) -> None:
    resolved, data = destination.resolve(), home.resolve()
    if resolved == data or data in resolved.parents:
        raise StoreError("the backup destination is inside the data directory; give one outside it")


def _previous_backup(destination: Path, node_key: bytes) -> Manifest | None:
    if not (destination / MANIFEST_NAME).exists():
        return None
    return read_manifest(destination, node_key)


def _refuse_existing(destination: Path, *, incremental: bool) -> None:
    try:
        entries = os.listdir(destination)
    except FileNotFoundError:
        return
    except NotADirectoryError:
        raise StoreError(f"the backup destination {destination} is a file; give a directory") from None
    if entries:
        hint = "" if incremental else ", or --incremental to bring the backup there up to date"
        raise StoreError(f"the backup destination {destination} is not empty; give a new directory{hint}")


def _fresh_partial(destination: Path) -> tuple[Path, FileLock]:
    """``<DEST>.partial``, new and locked: one left by an interrupted backup is
    removed first (only one kbtui marked as its own, and no backup holds)."""
    work = destination.with_name(destination.name + PARTIAL_SUFFIX)
    if work.exists():
        if not (work / MARKER_NAME).is_file():
            raise StoreError(f"{work} exists and is not an unfinished kbtui backup; move it away")
        with _lock_backup(work, destination):
            shutil.rmtree(work)
    destination.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(work, 0o700)
    except FileExistsError:
        raise _busy(destination) from None
    (work / MARKER_NAME).write_text("an unfinished or finished kbtui backup; see manifest.json\n")
    return work, _lock_backup(work, destination)


def _lock_backup(directory: Path, destination: Path) -> FileLock:
    """Hold the flock on a backup's marker: one backup at a time writes there."""
    held = FileLock.try_acquire(directory / MARKER_NAME)
    if held is None:
        raise _busy(destination)
    return held


def _busy(destination: Path) -> StoreError:
    return StoreError(f"another kbtui backup is writing {destination}; wait for it to finish")


def _remove_unnamed(backup: Path, manifest: Manifest) -> None:
    """Remove the files a committed manifest does not name (replaced copies,
    leftovers of an interrupted run, a key no longer asked for)."""
    named = {manifest.catalog.file, *(entry.file for entry in manifest.blobs)}
    if manifest.key is not None:
        named.add(manifest.key.file)
    for path in [*backup.iterdir(), *(backup / BLOB_DIR_NAME).iterdir()]:
        relative = str(path.relative_to(backup))
        if path.is_file() and relative not in named and path.name not in (MANIFEST_NAME, MARKER_NAME):
            path.unlink()


# ---------------------------------------------------------------- verifying a backup


@dataclass(frozen=True)
class VerifyReport:
    """What :func:`verify_backup` found: every problem, in a content-free line each."""

    manifest: Manifest
    problems: tuple[str, ...]
    files: int
    bytes: int
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_backup(backup: Path, node_key: bytes, *, on_progress: Progress | None = None) -> VerifyReport:
    """Check a backup against ``node_key``: the manifest (this key's, untampered),
    the size and checksum of every file it names, the catalog (SQLite's
    integrity check, its ids, a blob for every document), and every blob
    authenticated with the key (a format-2 blob's content against its sealed hash)."""
    progress = on_progress or (lambda *_: None)
    started = time.perf_counter()
    manifest = read_manifest(backup, node_key)
    problems: list[str] = []
    files = checked_bytes = 0
    catalog_hashes: dict[str, str] | None = None
    if _check_file(backup, manifest.catalog, "the catalog", problems):
        catalog_hashes = _check_catalog(backup / manifest.catalog.file, manifest, problems)
        files, checked_bytes = files + 1, checked_bytes + manifest.catalog.size
    if manifest.key is not None and _check_file(backup, manifest.key, "the key file", problems):
        if key_fingerprint((backup / manifest.key.file).read_bytes()).hex() != manifest.key_fingerprint:
            problems.append("the key file is not the key the backup was taken with")
        files += 1
    for done, entry in enumerate(manifest.blobs, 1):
        progress("sources", done - 1, len(manifest.blobs))
        what = f"source {entry.id}"
        if _check_file(backup, FileEntry(entry.file, entry.size, entry.sha256), what, problems):
            files, checked_bytes = files + 1, checked_bytes + entry.size
            try:
                with BlobFile(backup / entry.file, node_key, entry.id) as blob:
                    blob.authenticate()
                    label = blob.label()
            except BlobCorrupt:
                problems.append(f"{what} fails authentication with this key (damaged or not this document's)")
                continue
            expected = (catalog_hashes or {}).get(entry.id)
            if label is not None and expected is not None and label.content_hash != expected:
                problems.append(f"{what} holds other bytes than the catalog names")
    progress("sources", len(manifest.blobs), len(manifest.blobs))
    if catalog_hashes is not None:
        listed = {entry.id for entry in manifest.blobs}
        problems.extend(f"document {doc_id} has no source in the backup" for doc_id in sorted(catalog_hashes.keys() - listed))
    return VerifyReport(manifest, tuple(problems), files, checked_bytes, time.perf_counter() - started)


def _check_file(backup: Path, entry: FileEntry, what: str, problems: list[str]) -> bool:
    try:
        size, sha256 = file_digest(backup / entry.file)
    except FileNotFoundError:
        problems.append(f"{what} is missing ({entry.file})")
        return False
    if size != entry.size:
        problems.append(f"{what} has {size} bytes instead of {entry.size} (truncated or damaged)")
        return False
    if sha256 != entry.sha256:
        problems.append(f"{what} does not match its checksum (damaged)")
        return False
    return True


def _check_catalog(path: Path, manifest: Manifest, problems: list[str]) -> dict[str, str] | None:
    """SQLite's integrity check and the ids of the copied catalog; its documents' content hashes."""
    try:
        connection = sqlite3.connect(catalog_uri(path, "ro"), uri=True)
    except sqlite3.Error as exc:
        problems.append(f"the catalog cannot be opened ({sqlite_detail(exc)})")
        return None
    try:
        if [row[0] for row in connection.execute("PRAGMA quick_check")] != ["ok"]:
            problems.append("the catalog fails SQLite's integrity check")
            return None
        meta = dict(connection.execute("SELECT key, value FROM node_meta").fetchall())
        if bytes(meta.get(CATALOG_ID_KEY, b"")).decode("ascii", "replace") != manifest.catalog_id:
            problems.append("the catalog is not the one the manifest names")
        if bytes(meta.get(FINGERPRINT_KEY, b"")).hex() != manifest.key_fingerprint:
            problems.append("the catalog was written with another key than the manifest names")
        return dict(connection.execute("SELECT id, content_hash FROM document").fetchall())
    except sqlite3.Error as exc:
        problems.append(f"the catalog is damaged ({sqlite_detail(exc)})")
        return None
    finally:
        connection.close()
