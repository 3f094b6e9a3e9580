"""Restoring a backup (:mod:`store.backup`) into an empty data directory.

Only a directory that holds no catalog and no sources is restored into: a
restore never overwrites anything. The backup is verified whole against the
key first. The files go in the order that keeps the directory safe to open
at every moment: the key, the blobs, the catalog, then ``node.fingerprint``;
until the catalog is there every command refuses the directory (sources but
no catalog), and nothing ever sweeps. ``restore.partial`` marks a restore under
way, so a re-run after a kill completes it. The ANN caches are rebuilt last.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from store.ann import VectorIndexes
from store.backup import (
    COPY_THREADS,
    BlobEntry,
    Manifest,
    Progress,
    check_key,
    read_key_file,
    read_manifest,
    verify_backup,
)
from store.datadir import (
    BLOB_DIR_NAME,
    DB_FILE_NAME,
    Fingerprint,
    observe,
    prepare_home,
    write_fingerprint_file,
)
from store.errors import BackupProblem, DataDirectoryProblem, KeyProblem
from store.files import copy_durably, create_once, fsync_dir
from store.keys import KEY_FILE_NAME, load_or_create_key
from store.migrations import LATEST_VERSION, newer_schema_problem
from store.node_lock import node_running
from store.opening import open_store

RESTORE_MARKER_NAME = "restore.partial"


@dataclass(frozen=True)
class RestoreReport:
    documents: int
    blobs: int
    key_from: str  # "the data directory", "--key" or "the backup"
    vector_indexes: int
    resumed: bool
    seconds: float
    vector_index_seconds: float  # of ``seconds``: rebuilding the vector indexes


def restore_backup(
    home: Path, backup: Path, *, key_file: Path | None = None, on_progress: Progress | None = None
) -> RestoreReport:
    """Restore ``backup`` into the data directory ``home`` (see the module)."""
    started = time.perf_counter()
    progress = on_progress or (lambda *_: None)
    manifest = read_manifest(backup, None)
    if manifest.schema_version > LATEST_VERSION:
        raise newer_schema_problem(manifest.schema_version)
    key, key_from = _restore_key(home, backup, manifest, key_file)
    check_key(manifest, key)
    resumed = _check_target(home, manifest)
    progress("verifying", 0, 1)
    report = verify_backup(backup, key, on_progress=lambda _stage, done, total: progress("verifying", done, total))
    if not report.ok:
        raise BackupProblem(
            f"the backup fails verification ({len(report.problems)} problem(s); first: {report.problems[0]}); "
            "nothing was restored"
        )
    prepare_home(home, create=True)
    marker = home / RESTORE_MARKER_NAME
    if not resumed:
        create_once(marker, manifest.catalog_id.encode("ascii"))
    if not (home / KEY_FILE_NAME).exists():
        create_once(home / KEY_FILE_NAME, key)
    if not (home / DB_FILE_NAME).exists() or (home / DB_FILE_NAME).stat().st_size == 0:
        _install_blobs(home, backup, manifest, progress)
        with open(backup / manifest.catalog.file, "rb") as source:
            copied = copy_durably(source, home, DB_FILE_NAME)
        os.chmod(copied.path, 0o600)
        fsync_dir(home)
    write_fingerprint_file(home, Fingerprint(bytes.fromhex(manifest.key_fingerprint), manifest.catalog_id))
    marker.unlink()
    fsync_dir(home)
    files_done = time.perf_counter()
    indexes = rebuild_vector_indexes(home, lambda done, total: progress("vector indexes", done, total))
    ended = time.perf_counter()
    return RestoreReport(
        documents=manifest.counts.get("documents", 0), blobs=len(manifest.blobs), key_from=key_from,
        vector_indexes=indexes, resumed=resumed, seconds=ended - started, vector_index_seconds=ended - files_done,
    )


def _restore_key(home: Path, backup: Path, manifest: Manifest, key_file: Path | None) -> tuple[bytes, str]:
    """The key to restore with: ``--key``, else the data directory's, else the backup's."""
    here = load_or_create_key(home, data_exists=True) if (home / KEY_FILE_NAME).exists() else None
    given = read_key_file(key_file) if key_file is not None else None
    if here is not None and given is not None and here != given:
        raise KeyProblem(f"--key is not the key already in the data directory ({KEY_FILE_NAME}); nothing was changed")
    if given is not None:
        return given, "--key"
    if here is not None:
        return here, "the data directory"
    if manifest.key is not None:
        return read_key_file(backup / manifest.key.file), "the backup"
    raise KeyProblem(
        "the backup holds no key (it was taken without --with-key): give the node key with --key FILE; "
        "nothing was changed"
    )


def _check_target(home: Path, manifest: Manifest) -> bool:
    """Refuse a data directory that holds a catalog or sources (or runs a node);
    True when it holds this backup's own unfinished restore. Creates nothing."""
    if not home.exists():
        return False
    prepare_home(home, create=False)  # refuses a file, or a directory others can write
    if node_running(home):
        raise DataDirectoryProblem("a node is running for the data directory; stop it, and restore into an empty one")
    marker = home / RESTORE_MARKER_NAME
    if marker.exists():
        if marker.read_bytes().decode("ascii", "replace") != manifest.catalog_id:
            raise DataDirectoryProblem(
                f"the data directory holds an unfinished restore of another backup ({RESTORE_MARKER_NAME}); "
                "finish that one, or restore into a new directory"
            )
        return True
    facts = observe(home)
    if facts.catalog.state not in ("missing", "empty") or facts.orphaned_wal or facts.has_blobs:
        raise DataDirectoryProblem(
            f"the data directory {home} holds a catalog or sources; restore only into one that holds "
            "neither (point KBTUI_HOME at a new directory); nothing was changed"
        )
    if facts.fingerprint_damaged or (facts.fingerprint is not None and facts.fingerprint.catalog_id != manifest.catalog_id):
        raise DataDirectoryProblem(
            "the data directory's node.fingerprint names another catalog; restore into a new directory"
        )
    return False


def _install_blobs(home: Path, backup: Path, manifest: Manifest, progress: Progress) -> None:
    directory = home / BLOB_DIR_NAME
    directory.mkdir(mode=0o700, exist_ok=True)

    def install(entry: BlobEntry) -> None:
        target = directory / entry.id
        if not (target.exists() and target.stat().st_size == entry.size):
            with open(backup / entry.file, "rb") as source:
                # The node's own modification time: the next incremental backup
                # into the same backup then finds every blob there already.
                copy_durably(source, directory, entry.id, mtime_ns=entry.source_mtime_ns)

    with ThreadPoolExecutor(COPY_THREADS, thread_name_prefix="kbtui-restore") as pool:
        for done, _ in enumerate(pool.map(install, manifest.blobs), 1):
            progress("sources", done, len(manifest.blobs))
    fsync_dir(directory)


def rebuild_vector_indexes(home: Path, on_progress: Callable[[int, int], object] | None = None) -> int:
    """Build and save the ANN index of every vector identity in the catalog; how many."""
    store = open_store(home)
    try:
        identities = store.db.execute_sql("SELECT DISTINCT identity, dim FROM vector ORDER BY identity").fetchall()
        indexes = VectorIndexes(home)
        if on_progress is not None:
            on_progress(0, len(identities))
        for done, (identity, dim) in enumerate(identities, 1):
            index = indexes.index_for(identity, dim)
            if not index.ensure_open():
                index.wait_ready()
            if on_progress is not None:
                on_progress(done, len(identities))
        indexes.close()  # saves them
    finally:
        store.close()
    return len(identities)
