"""Backups: backup (and --verify), restore, recover; and doctor's --upgrade-blobs."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TypeVar

import click

from kbtui.cli.common import cli, progress_bar, shown, stdout
from kbtui.config import Config
from kbtui.errors import BackupProblem
from kbtui.node import back_up, recover_data_directory, restore_backup, upgrade_blobs, verify_backup
from kbtui.printable import human_size

# A verification or recovery lists at most this many lines (the count says the rest).
LISTED = 20
# A backup (and its verification) yields the CPU to the node it runs beside: on
# a busy machine the node's search p95 stayed within 2x of idle with it, and
# went to 4x without (benchmarks/backup.py).
BACKGROUND_NICENESS = 10

T = TypeVar("T")


def yielding_the_cpu(work: Callable[[], T]) -> T:
    """Run ``work`` in a thread of lower CPU priority (Linux nices each thread,
    and the threads it starts inherit it); this thread keeps its own."""
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        if sys.platform.startswith("linux"):
            thread = threading.get_native_id()
            with suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, thread, os.getpriority(os.PRIO_PROCESS, thread) + BACKGROUND_NICENESS)
        try:
            outcome.append(work())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            failure.append(exc)

    worker = threading.Thread(target=run, name="kbtui-backup", daemon=True)  # Ctrl-C ends the process
    worker.start()
    worker.join()
    if failure:
        raise failure[0]
    return outcome[0]


@contextmanager
def stage_progress(*, disable: bool) -> Iterator[Callable[[str, int, int], None]]:
    """A progress callback (stage, done, total) drawing one bar per stage on stderr."""
    with progress_bar(disable=disable) as bars:
        tasks = {}

        def report(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bars.add_task(stage, total=total)
            bars.update(tasks[stage], completed=done, total=total)

        yield report


@cli.command()
@click.argument("destination", type=click.Path(path_type=Path))
@click.option("--verify", "verify_only", is_flag=True,
              help="Check the backup at DESTINATION instead: manifest, every checksum, every source against the key.")
@click.option("--incremental", is_flag=True, help="Bring the backup at DESTINATION up to date: copy only the sources it lacks.")
@click.option("--with-key", is_flag=True, help="Also put node.key in the backup (by default it is left out: keep it apart).")
@click.option("--key", "key_file", type=click.Path(path_type=Path, dir_okay=False),
              help="With --verify: the node key file (default: the data directory's, else the backup's).")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.pass_context
def backup(
    ctx: click.Context, destination: Path, verify_only: bool, incremental: bool, with_key: bool,
    key_file: Path | None, as_json: bool,
) -> int:
    """Back up the data directory into DESTINATION, online (a node may be running).

    The catalog is copied with SQLite's backup API, the sources as they are
    (still encrypted), with a manifest of counts and checksums; the vector
    indexes are left out (rebuilt on restore). DESTINATION must be new or
    empty, unless --incremental. Written under DESTINATION.partial and renamed
    at the end: an interrupted backup leaves nothing that looks whole.
    """
    config: Config = ctx.obj
    if verify_only:
        if incremental or with_key:
            raise click.UsageError("--verify checks a backup: it takes no --incremental or --with-key")
        return _verify(config, destination, key_file, as_json=as_json)
    if key_file is not None:
        raise click.UsageError("--key is for --verify (a backup uses the data directory's own key)")
    with stage_progress(disable=as_json) as progress:
        report = yielding_the_cpu(
            lambda: back_up(config, destination, incremental=incremental, with_key=with_key, on_progress=progress)
        )
    if as_json:
        click.echo(json.dumps({
            "destination": str(report.destination), "incremental": report.incremental,
            "documents": report.documents, "sources": report.blobs, "sources_copied": report.blobs_copied,
            "bytes_copied": report.bytes_copied, "catalog_bytes": report.catalog_bytes, "with_key": report.with_key,
            "settled": {"removed": len(report.settled.removed), "updated": len(report.settled.updated)},
            "unknown_sources": report.unknown_blobs, "seconds": round(report.seconds, 3),
        }, indent=2))
        return 0
    kind = "incremental backup" if report.incremental else "backup"
    stdout.print(
        f"{kind} written to {shown(str(report.destination))}: {report.documents} document(s), "
        f"{report.blobs} source(s) ({report.blobs_copied} copied, {human_size(report.bytes_copied)}), "
        f"catalog {human_size(report.catalog_bytes)}; {report.seconds:.1f} s"
    )
    settled = report.settled
    if settled.removed or settled.updated:
        stdout.print(
            f"changed while it ran: {len(settled.removed)} removed, {len(settled.updated)} updated "
            "(kept as the node itself settles them: updated ones are queued again)"
        )
    if report.unknown_blobs:
        stdout.print(f"also {report.unknown_blobs} source(s) the catalog does not know (kept, as in the data directory)")
    stdout.print(
        "the key is in the backup (node.key): keep the backup as safe as the key" if report.with_key else
        "the key is not in the backup: keep node.key apart from it (without it the sources cannot be read)"
    )
    return 0


def _verify(config: Config, backup_dir: Path, key_file: Path | None, *, as_json: bool) -> int:
    with stage_progress(disable=as_json) as progress:
        report = yielding_the_cpu(lambda: verify_backup(config, backup_dir, key_file=key_file, on_progress=progress))
    if as_json:
        click.echo(json.dumps({
            "backup": str(backup_dir), "ok": report.ok, "files": report.files, "bytes": report.bytes,
            "documents": report.manifest.counts.get("documents", 0), "problems": list(report.problems),
            "seconds": round(report.seconds, 3),
        }, indent=2))
    else:
        for problem in report.problems[:LISTED]:
            stdout.print(f"[bold red]PROBLEM[/] {shown(problem)}")
        if len(report.problems) > LISTED:
            stdout.print(f"... and {len(report.problems) - LISTED} more")
        if report.ok:
            stdout.print(
                f"backup verified: {report.files} file(s), {human_size(report.bytes)}, "
                f"{report.manifest.counts.get('documents', 0)} document(s); every source authenticates with the key"
            )
        else:
            stdout.print(f"{len(report.problems)} problem(s): this backup cannot be restored as it is")
    return 0 if report.ok else BackupProblem.exit_code


@cli.command()
@click.argument("backup_dir", metavar="BACKUP", type=click.Path(path_type=Path, file_okay=False))
@click.option("--key", "key_file", type=click.Path(path_type=Path, dir_okay=False),
              help="The node key file (default: the one already in the data directory, else the backup's).")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.pass_context
def restore(ctx: click.Context, backup_dir: Path, key_file: Path | None, as_json: bool) -> int:
    """Restore BACKUP into the data directory, which must hold no catalog and no sources.

    Verifies the whole backup against the key first (a key that does not
    match is refused), then puts back the key (when not there), the
    sources and the catalog, and rebuilds the vector indexes. Search then
    answers as it did when the backup was taken.
    """
    config: Config = ctx.obj
    with stage_progress(disable=as_json) as progress:
        report = restore_backup(config, backup_dir, key_file=key_file, on_progress=progress)
    if as_json:
        click.echo(json.dumps({
            "home": str(config.home), "documents": report.documents, "sources": report.blobs,
            "key_from": report.key_from, "vector_indexes": report.vector_indexes, "resumed": report.resumed,
            "seconds": round(report.seconds, 3), "vector_index_seconds": round(report.vector_index_seconds, 3),
        }, indent=2))
        return 0
    stdout.print(
        f"restored into {shown(str(config.home))}: {report.documents} document(s), {report.blobs} source(s), "
        f"key from {report.key_from}, {report.vector_indexes} vector index(es) rebuilt; {report.seconds:.1f} s"
        + (" (an interrupted restore, completed)" if report.resumed else "")
    )
    return 0


@cli.command()
@click.argument("source", type=click.Path(path_type=Path, file_okay=False))
@click.option("--key", "key_file", type=click.Path(path_type=Path, dir_okay=False),
              help="The node key file (default: SOURCE/node.key).")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.pass_context
def recover(ctx: click.Context, source: Path, key_file: Path | None, as_json: bool) -> int:
    """Rebuild a knowledge base from the encrypted sources and the key alone.

    SOURCE is a data directory whose catalog is lost (or its blobs/). Into
    the data directory (a new one), every source that authenticates comes
    back as a document with its collection, name and path, and is extracted
    and embedded again. Sources that cannot be brought back are listed and
    left where they are; nothing in SOURCE is changed. Safe to interrupt:
    run it again to go on.
    """
    config: Config = ctx.obj
    with stage_progress(disable=as_json) as progress:
        recovery = recover_data_directory(
            config, source, key_file=key_file, on_progress=progress, show_progress=False if as_json else None
        )
    report, statuses = recovery.report, recovery.statuses
    by_status: dict[str, int] = {}
    for status in statuses.values():
        by_status[status] = by_status.get(status, 0) + 1
    if as_json:
        click.echo(json.dumps({
            "home": str(config.home), "documents": len(report.documents), "statuses": by_status,
            "complete": recovery.complete, "resumed": report.resumed,
            "not_recovered": [{"source": u.blob_id, "reason": u.reason} for u in report.unrecovered],
        }, indent=2))
    else:
        counts = ", ".join(f"{status} {n}" for status, n in sorted(by_status.items())) or "none"
        stdout.print(f"recovered {len(report.documents)} document(s) into {shown(str(config.home))}: {counts}")
        if report.unrecovered:
            stdout.print(f"{len(report.unrecovered)} source(s) not recovered (left as they are):")
            for item in report.unrecovered[:LISTED]:
                stdout.print(f"  {item.blob_id}: {item.reason}")
            if len(report.unrecovered) > LISTED:
                stdout.print(f"  ... and {len(report.unrecovered) - LISTED} more (--json lists all)")
        if not recovery.complete:
            stdout.print("some documents are still queued: run kbtui recover again (or kbtui serve) to finish")
    return 0 if recovery.complete else 1


def run_blob_upgrade(config: Config, *, as_json: bool) -> dict[str, object]:
    """``kbtui doctor --upgrade-blobs``: give every old-format source its sealed
    label (what kbtui recover needs); prints a line unless ``as_json``, which gets the result."""
    with stage_progress(disable=as_json) as progress:
        report = upgrade_blobs(config, on_progress=progress)
    if not as_json:
        stdout.print(
            f"sources upgraded: {report.upgraded}, already current: {report.current}"
            + (f", changed meanwhile (run again): {report.skipped}" if report.skipped else "")
            + (f", [bold red]damaged[/]: {len(report.damaged)} (left as they are)" if report.damaged else "")
        )
    return {"upgraded": report.upgraded, "current": report.current, "skipped": report.skipped,
            "damaged": list(report.damaged)}
