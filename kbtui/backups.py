"""The backup use cases: take and verify a backup, restore one, upgrade old
blobs, rebuild a catalog from the sources alone, and move a knowledge base to
the other store (:mod:`store.backup`, :mod:`store.restore`,
:mod:`store.recover`, :mod:`store.migrate`). ``kbtui.node`` offers them to
the faces, and indexes what a recovery brings back.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from kbtui.config import Config
from kbtui.errors import KeyProblem
from kbtui.settings import CONFIG_FILE_NAME
from store import open_store
from store.backup import BackupReport, Progress, VerifyReport, read_key_file, read_manifest, take_backup, verify_backup
from store.blob_labels import UpgradeReport, upgrade_legacy_blobs
from store.keys import KEY_FILE_NAME
from store.recover import RecoverReport, finish_recovery, read_source_key, recover_catalog
from store.restore import RestoreReport, restore_backup

if TYPE_CHECKING:
    from store.migrate import MigrationReport

__all__ = [
    "BackupReport", "MigrationReport", "Progress", "RecoverReport", "RestoreReport", "UpgradeReport", "VerifyReport", "back_up",
    "finish_recovery", "migrate", "rebuild_catalog", "restore", "upgrade_blobs", "verify",
]


def back_up(
    config: Config, destination: Path, *, incremental: bool = False, with_key: bool = False,
    on_progress: Progress | None = None,
) -> BackupReport:
    """Back up the data directory online (a node may be running and serving)."""
    store = open_store(config.home, read_only=True)  # refuses a wrong key or a catalog not known to be whole
    key = store.node_key
    store.close()
    return take_backup(
        config.home, destination, key, incremental=incremental, with_key=with_key, on_progress=on_progress
    )


def verify(config: Config, backup: Path, *, key_file: Path | None = None, on_progress: Progress | None = None) -> VerifyReport:
    """Check a backup against the key: ``key_file``, else the data directory's,
    else the one the backup holds."""
    return verify_backup(backup, _verifying_key(config, backup, key_file), on_progress=on_progress)


def _verifying_key(config: Config, backup: Path, key_file: Path | None) -> bytes:
    if key_file is not None:
        return read_key_file(key_file)
    if (config.home / KEY_FILE_NAME).exists():
        return read_key_file(config.home / KEY_FILE_NAME)
    manifest = read_manifest(backup, None)
    if manifest.key is not None:
        return read_key_file(backup / manifest.key.file)
    raise KeyProblem("no node key to check the backup with: give it with --key FILE")


def restore(
    config: Config, backup: Path, *, key_file: Path | None = None, on_progress: Progress | None = None
) -> RestoreReport:
    """Restore a backup into the (empty) data directory, verified first."""
    return restore_backup(config.home, backup, key_file=key_file, on_progress=on_progress)


def rebuild_catalog(
    config: Config, source: Path, *, key_file: Path | None = None, on_progress: Progress | None = None
) -> RecoverReport:
    """The store's half of ``kbtui recover``: a new data directory whose catalog
    holds every source of ``source`` that can be brought back, Pending."""
    key = read_source_key(source, key_file)
    return recover_catalog(config.home, source, key, on_progress=on_progress)


def upgrade_blobs(config: Config, *, on_progress: Progress | None = None) -> UpgradeReport:
    """Give every blob the label its catalog row calls for: format-1 blobs, and
    labels a failed relabelling left behind (``kbtui doctor --upgrade-blobs``)."""
    open_store(config.home, read_only=True).close()  # refuses what a writing open would create or mend
    store = open_store(config.home)

    def progress(done: int, total: int) -> None:
        if on_progress is not None:
            on_progress("sources", done, total)

    try:
        return upgrade_legacy_blobs(store, on_progress=progress)
    finally:
        store.close()


def migrate(config: Config, target: str, *, on_progress: Progress | None = None) -> MigrationReport:
    """Copy the knowledge base to the other store (``postgresql://...`` or
    ``sqlite:PATH``) without embedding anything again; the source is not changed."""
    # Loaded here: it brings both stores' drivers, which no other command needs.
    from store.migrate import migrate as migrate_store

    return migrate_store(
        config.home, config.database_url, target, settings=_settings_for_sqlite(config), on_progress=on_progress
    )


_DATABASE_URL_LINE = re.compile(r"\s*database_url\s*=")


def _settings_for_sqlite(config: Config) -> bytes | None:
    """The settings file for a new SQLite data directory: this node's, without
    ``database_url`` (that node runs on SQLite, and the URL may hold a password)."""
    path = config.home / CONFIG_FILE_NAME
    if not path.is_file():
        return None
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    return "".join(line for line in lines if not _DATABASE_URL_LINE.match(line)).encode("utf-8")
