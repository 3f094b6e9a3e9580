"""What an ``add`` of paths means, and adding those files one by one.

Two phases with different failure rules:

* :func:`collect_files` turns the arguments into files. A bad argument
  (missing, empty, unsupported) stops everything before anything is stored.
* :func:`add_files` stores each file. From here on a file is on its own: one
  that vanished, is not a regular file (a FIFO, a directory swapped in), is a
  symlink swapped in, cannot be read, is over the size limit or changed while
  being read is refused with a fixed reason, and the rest carry on.

Errors and reasons never carry a path: file names are private to the operator
and may end up in a log. The report keeps the path the operator typed, for
their own terminal only.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kbtui.errors import KbtuiError, NotFound
from kbtui.extract import format_for
from store import Store, catalog
from store.files import Refusal, SourceRefused


@dataclass(frozen=True)
class FileToAdd:
    path: Path  # what is opened (a named symlink already resolved: the operator chose it)
    shown: str  # the path as the operator typed it, for their terminal only
    display_name: str
    fmt: str


@dataclass(frozen=True)
class CollectedFiles:
    files: list[FileToAdd]
    # Symlinks met while walking a directory: not followed, never added (as in
    # a repository import); a symlink named as an argument is followed.
    skipped_symlinks: int = 0


@dataclass(frozen=True)
class RefusedFile:
    file: FileToAdd
    reason: Refusal


@dataclass(frozen=True)
class AddReport:
    """What :func:`add_files` did, file by file."""

    added: list[tuple[FileToAdd, catalog.AddOutcome]] = field(default_factory=list)
    refused: list[RefusedFile] = field(default_factory=list)
    skipped_symlinks: int = 0  # met while walking a directory (see CollectedFiles)

    @property
    def document_ids(self) -> list[str]:
        return [outcome.document_id for _, outcome in self.added]

    @property
    def created(self) -> int:
        return sum(outcome.created for _, outcome in self.added)

    @property
    def already_present(self) -> int:
        return len(self.added) - self.created

    def refused_by_reason(self) -> dict[str, int]:
        return dict(Counter(refused.reason.value for refused in self.refused))

    def summary(self) -> str:
        """``"3 added, 1 already present, 2 not added (1 vanished, 1 not_regular)"``: counts, no names."""
        line = f"{self.created} added, {self.already_present} already present"
        if self.refused:
            line += ", " + describe_refusals(self.refused_by_reason())
        if self.skipped_symlinks:
            line += f", {self.skipped_symlinks} symbolic link(s) skipped"
        return line


def collect_files(paths: Iterable[str]) -> CollectedFiles:
    """Expand arguments into supported files; a bad argument stops everything.

    Errors name the argument's position, never the path: file names are
    private to the operator and may end up in a log.
    """
    files: list[FileToAdd] = []
    skipped_symlinks = 0
    for position, raw in enumerate(paths, start=1):
        if not raw.strip():
            # Path("") is the current directory: never what an empty argument meant.
            raise KbtuiError(f"argument {position}: an empty path")
        path = Path(raw)
        if not path.exists():
            raise NotFound(f"argument {position}: no such file or directory")
        if path.is_dir():
            found, links = _walk(path)
            skipped_symlinks += links
            if not found and not links:
                raise KbtuiError(f"argument {position}: the directory holds no supported files")
            files.extend(found)
        elif path.is_file():
            if format_for(path.name) is None:
                raise KbtuiError(f"argument {position}: unsupported file type '{path.suffix or '(none)'}'")
            files.append(FileToAdd(Path(os.path.realpath(path)), raw, path.name, format_for(path.name) or "text"))
        else:
            raise KbtuiError(f"argument {position}: not a regular file")
    return CollectedFiles(files, skipped_symlinks)


def _walk(directory: Path) -> tuple[list[FileToAdd], int]:
    """Supported files under ``directory``, hidden ones left out; symlinks counted, not followed."""
    found: list[FileToAdd] = []
    links = 0
    for path in sorted(directory.rglob("*")):
        if any(part.startswith(".") for part in path.relative_to(directory).parts):
            continue
        fmt = format_for(path.name)
        if fmt is None:
            continue
        if path.is_symlink():
            links += path.is_file()
        elif path.is_file():
            found.append(FileToAdd(path, str(path), path.name, fmt))
    return found, links


def add_files(
    store: Store,
    collection_id: str,
    files: Iterable[FileToAdd],
    *,
    max_bytes: int | None,
    on_refused: Callable[[RefusedFile], None] | None = None,
    skipped_symlinks: int = 0,
) -> AddReport:
    """Store each file as a Pending document; a file that cannot be stored is refused alone.

    ``on_refused`` hears of each refusal as it happens. Storage failures (a
    full disk, a locked database) are not the file's fault: they propagate.
    """
    report = AddReport(skipped_symlinks=skipped_symlinks)
    for file in files:
        try:
            outcome = catalog.add_document(
                store, collection_id, file.path, display_name=file.display_name, fmt=file.fmt, max_bytes=max_bytes,
            )
        except SourceRefused as refused:
            refusal = RefusedFile(file, refused.reason)
            report.refused.append(refusal)
            if on_refused is not None:
                on_refused(refusal)
            continue
        report.added.append((file, outcome))
    return report


def describe_refusals(counts: dict[str, int]) -> str:
    """``"2 not added (1 vanished, 1 not_regular)"``: counts by reason code, no names."""
    total = sum(counts.values())
    detail = ", ".join(f"{count} {reason}" for reason, count in sorted(counts.items()))
    return f"{total} not added ({detail})"
