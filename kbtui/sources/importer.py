"""Registering a Git working tree, and importing it into a collection incrementally.

Identity is collection + normalised relative path. An import adds new paths,
updates changed ones in place (same document id, new blob, back to Pending),
leaves unchanged ones alone, and - only after a scan that completed - purges
the documents this repository put in the collection whose paths are gone. A
scan that stopped early (budget spent) or failed part-way purges nothing.

Logs carry the repository id, counts and reason codes; never a path.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from kbtui.errors import KbtuiError
from kbtui.printable import printable
from kbtui.sources.git import verify_top_level
from kbtui.sources.rules import SkipReason
from kbtui.sources.scan import (
    AcceptedFile,
    BeforeOpen,
    RepositoryScan,
    ScanLimits,
    SkippedPath,
)
from store import Store
from store import repositories as catalog
from store.file_lock import FileLock
from store.models import NON_TERMINAL
from store.repositories import PathDocument, RegisteredRepository

log = logging.getLogger(__name__)

MAX_NAME_LENGTH = 100

ProgressCallback = Callable[[int, int], None]


class ImportInProgress(KbtuiError):
    pass


class ImportFailed(KbtuiError):
    """The scan stopped part-way; nothing was purged. ``report`` has what was done."""

    def __init__(self, message: str, report: ImportReport) -> None:
        super().__init__(message)
        self.report = report


@dataclass(frozen=True)
class Tally:
    count: int = 0
    bytes: int = 0


@dataclass(frozen=True)
class FileOutcome:
    path: str  # printable: control and BiDi characters escaped
    outcome: str  # added | updated | unchanged | removed | skipped
    reason: str | None
    bytes: int
    document_id: str | None


@dataclass(frozen=True)
class ImportReport:
    repository_id: str
    collection_id: str
    status: str  # completed | incomplete | failed
    listed: int
    added: Tally
    updated: Tally
    unchanged: Tally
    removed: Tally
    skipped: dict[str, Tally]
    files: tuple[FileOutcome, ...]
    # Documents this scan left for the pipeline: added, updated, and unchanged
    # ones an earlier run queued but never finished. Collected during the scan,
    # not read back at the end: a running node may already have taken them.
    pending_document_ids: tuple[str, ...]
    elapsed_s: float

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    def to_json(self) -> dict[str, object]:
        """The stable JSON shape of a report (documented in README.md)."""

        def tally(t: Tally) -> dict[str, int]:
            return {"count": t.count, "bytes": t.bytes}

        return {
            "repository_id": self.repository_id,
            "collection": self.collection_id,
            "status": self.status,
            "listed": self.listed,
            "added": tally(self.added),
            "updated": tally(self.updated),
            "unchanged": tally(self.unchanged),
            "removed": tally(self.removed),
            "skipped": {reason: tally(t) for reason, t in sorted(self.skipped.items())},
            "pending_document_ids": list(self.pending_document_ids),
            "elapsed_s": round(self.elapsed_s, 3),
            "files": [
                {"path": f.path, "outcome": f.outcome, "reason": f.reason, "bytes": f.bytes,
                 "document_id": f.document_id}
                for f in self.files
            ],
        }


@dataclass
class _ReportBuilder:
    repository_id: str
    collection_id: str
    started: float = field(default_factory=time.monotonic)
    listed: int = 0
    files: list[FileOutcome] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    sizes: Counter = field(default_factory=Counter)
    ignored: int = 0
    queued: list[str] = field(default_factory=list)

    def record(self, source_path: str, outcome: str, size: int, *, reason: str | None = None,
               document_id: str | None = None) -> None:
        key = f"skipped:{reason}" if outcome == "skipped" else outcome
        self.counts[key] += 1
        self.sizes[key] += size
        self.files.append(FileOutcome(printable(source_path), outcome, reason, size, document_id))

    def build(self, status: str) -> ImportReport:
        def tally(key: str) -> Tally:
            return Tally(self.counts[key], self.sizes[key])

        skipped = {
            key.split(":", 1)[1]: tally(key) for key in self.counts if key.startswith("skipped:")
        }
        if self.ignored:
            skipped[SkipReason.GITIGNORED.value] = Tally(self.ignored, 0)
        return ImportReport(
            repository_id=self.repository_id,
            collection_id=self.collection_id,
            status=status,
            listed=self.listed,
            added=tally("added"),
            updated=tally("updated"),
            unchanged=tally("unchanged"),
            removed=tally("removed"),
            skipped=skipped,
            files=tuple(self.files),
            pending_document_ids=tuple(self.queued),
            elapsed_s=time.monotonic() - self.started,
        )


# ---------------------------------------------------------------- registration


def check_repository_name(name: str) -> str:
    """A label for the registration: trimmed, short, one printable line."""
    cleaned = name.strip()
    if not cleaned:
        raise KbtuiError("a repository name must not be empty")
    if len(cleaned) > MAX_NAME_LENGTH:
        raise KbtuiError(f"a repository name is at most {MAX_NAME_LENGTH} characters")
    if printable(cleaned) != cleaned:
        raise KbtuiError("a repository name may not contain control or formatting characters")
    return cleaned


def register_repository(store: Store, folder: Path, name: str | None = None) -> RegisteredRepository:
    """Register ``folder`` if git itself says it is a working tree's top level."""
    root = verify_top_level(folder)
    try:
        str(root).encode("utf-8")
    except UnicodeEncodeError:
        raise KbtuiError("the folder's path is not valid UTF-8, so it cannot be registered") from None
    label = check_repository_name(name if name is not None else root.name)
    registered = catalog.register_repository(store, str(root), label)
    log.info("repository %s registered", registered.id)
    return registered


# ---------------------------------------------------------------- import


@contextmanager
def _exclusive_import(home: Path, repository_id: str) -> Iterator[None]:
    """One import per repository at a time, across processes."""
    lock_dir = home / "locks"
    lock_dir.mkdir(mode=0o700, exist_ok=True)
    lock = FileLock.try_acquire(lock_dir / f"repository-{repository_id}.lock")
    if lock is None:
        raise ImportInProgress("another import of this repository is running")
    with lock:
        yield


def _own_data_inside(root: Path, home: Path) -> tuple[str, ...]:
    """The knowledge base's data directory, relative to ``root``, when it lies inside it."""
    try:
        inside = Path(os.path.realpath(home)).relative_to(root)
    except ValueError:
        return ()
    return (inside.as_posix(),) if inside.parts else ()


def import_repository(
    store: Store,
    repository_id: str,
    collection_id: str,
    limits: ScanLimits,
    *,
    purge: Callable[[str], bool],
    before_open: BeforeOpen | None = None,
    on_progress: ProgressCallback | None = None,
) -> ImportReport:
    """Scan a registered repository and bring ``collection_id`` in line with it.

    Writes blobs and Pending rows only; indexing is the caller's next step
    (the report lists the Pending document ids). ``purge`` deletes one
    document (the node's single purge path, which also drops its ANN labels). Raises the validation error
    when the registration no longer holds, :class:`ImportFailed` (with the
    partial report) when the scan stops part-way.
    """
    repository = catalog.get_repository(store, repository_id)
    with _exclusive_import(store.home, repository.id):
        return _Import(store, repository, collection_id, limits, purge, before_open, on_progress).run()


class _Import:
    def __init__(
        self,
        store: Store,
        repository: RegisteredRepository,
        collection_id: str,
        limits: ScanLimits,
        purge: Callable[[str], bool],
        before_open: BeforeOpen | None,
        on_progress: ProgressCallback | None,
    ) -> None:
        self.store = store
        self.purge = purge
        self.repository = repository
        self.collection_id = collection_id
        self.limits = limits
        self.before_open = before_open
        self.on_progress = on_progress
        self.report = _ReportBuilder(repository.id, collection_id)
        self.kept: set[str] = set()

    def run(self) -> ImportReport:
        root = Path(self.repository.root)
        scan = RepositoryScan(
            root, self.limits, excluded=_own_data_inside(root, self.store.home), before_open=self.before_open
        )
        try:
            scan.open()
        except BaseException:
            catalog.record_import(self.repository.id, "failed")
            raise
        with scan:
            try:
                self._take(scan)
            except Exception as exc:
                raise self._failed(exc) from exc
            except BaseException:
                self._finish("failed")
                raise
        if scan.budget_exhausted:
            return self._finish("incomplete")
        try:
            self._purge_gone_paths()
        except Exception as exc:
            raise self._failed(exc, "some documents of removed paths may remain; import again") from exc
        return self._finish("completed")

    def _take(self, scan: RepositoryScan) -> None:
        self.report.listed = scan.listed_count
        self.report.ignored = scan.ignored_count
        by_path = catalog.documents_by_path(self.collection_id)
        for done, outcome in enumerate(scan, start=1):
            if isinstance(outcome, SkippedPath):
                self.report.record(outcome.source_path, "skipped", outcome.size, reason=outcome.reason.value)
            else:
                self._store(outcome, by_path.get(outcome.source_path))
            if self.on_progress is not None:
                self.on_progress(done, scan.listed_count)

    def _store(self, accepted: AcceptedFile, current: PathDocument | None) -> None:
        path, size = accepted.source_path, len(accepted.data)
        if current is not None and current.repository_id not in (None, self.repository.id):
            # Another registered repository already holds this identity.
            self.report.record(path, "skipped", size, reason=SkipReason.PATH_CLAIMED.value)
            return
        self.kept.add(path)
        if current is not None and current.content_hash == accepted.content_hash:
            if current.repository_id is None:
                catalog.claim_document(self.repository.id, current.document_id)
            self.report.record(path, "unchanged", size, document_id=current.document_id)
            if current.status in NON_TERMINAL:
                self.report.queued.append(current.document_id)
            return
        if current is not None and catalog.update_repository_document(
            self.store, self.repository.id, current.document_id,
            fmt=accepted.fmt, data=accepted.data, content_hash=accepted.content_hash,
        ):
            self.report.record(path, "updated", size, document_id=current.document_id)
            self.report.queued.append(current.document_id)
            return
        document_id = catalog.add_repository_document(
            self.store, self.repository.id, self.collection_id,
            source_path=path, display_name=printable(path), fmt=accepted.fmt,
            data=accepted.data, content_hash=accepted.content_hash,
        )
        self.report.record(path, "added", size, document_id=document_id)
        self.report.queued.append(document_id)

    def _purge_gone_paths(self) -> None:
        for path, document in sorted(catalog.documents_by_path(self.collection_id).items()):
            if document.repository_id == self.repository.id and path not in self.kept:
                if self.purge(document.document_id):
                    self.report.record(path, "removed", document.size_bytes, document_id=document.document_id)

    def _failed(self, exc: Exception, consequence: str = "nothing was removed") -> ImportFailed:
        log.error("repository %s import stopped part-way: %s", self.repository.id, type(exc).__name__)
        return ImportFailed(
            f"the import stopped part-way ({type(exc).__name__}); {consequence}", self._finish("failed")
        )

    def _finish(self, status: str) -> ImportReport:
        catalog.record_import(self.repository.id, status)
        report = self.report.build(status)
        log.info(
            "repository %s import %s: listed %d, added %d, updated %d, unchanged %d, removed %d, skipped %s",
            self.repository.id, status, report.listed, report.added.count, report.updated.count,
            report.unchanged.count, report.removed.count,
            {reason: t.count for reason, t in sorted(report.skipped.items())},
        )
        return report
