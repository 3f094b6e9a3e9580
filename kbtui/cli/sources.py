"""Sources: list them, rescan them, stop watching or remove them; and the scan
report that ``kbtui add``, ``kbtui sync`` and ``kbtui import`` share."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import click
from rich.table import Table

from kbtui.api.shapes import source_json
from kbtui.cli.common import advance, cli, existing_collection, open_node, progress_bar, shown, stdout
from kbtui.collections import canonical_collection_id
from kbtui.errors import KbtuiError, NoKnowledgeBase, NotFound
from kbtui.node import Node, SourceRow, preview_unregistered
from kbtui.printable import human_size, printable
from kbtui.reads import Status
from kbtui.sources.rules import SkipReason, path_skip_reason
from kbtui.sources.sync import OUTCOMES, SourceOfAnotherNode, SyncFailed, SyncReport, inspect_path
from store.errors import StoreError, is_disk_full, storage_problem

# Skips that mean a file could not be read as it should: each is named on
# stderr and makes the command exit 1. Every other skip is a rule working.
TROUBLE = frozenset({
    SkipReason.VANISHED, SkipReason.UNREADABLE, SkipReason.SWAPPED, SkipReason.CHANGED_DURING_READ,
})

_EXPLANATIONS = {
    SkipReason.VCS_METADATA: "it is version-control metadata",
    SkipReason.SENSITIVE: "it looks sensitive (a key, certificate, credentials or .env file); "
                          "--include-sensitive adds such files",
    SkipReason.GENERATED: "it is inside a generated directory (build output, dependencies, caches)",
    SkipReason.UNSUPPORTED_FORMAT: "its format is not supported",
    SkipReason.PSEUDO_FILE: "it is a kernel pseudo-file (as in /proc) that does not report its size",
    SkipReason.UNSAFE_NAME: "its name cannot be used safely",
    SkipReason.NAME_COLLISION: "another file has the same name once normalised",
    SkipReason.SYMLINK: "it is a symbolic link",
    SkipReason.NOT_REGULAR: "it is not a regular file",
    SkipReason.SWAPPED: "it was replaced while being opened",
    SkipReason.VANISHED: "it no longer exists",
    SkipReason.UNREADABLE: "it cannot be read",
    SkipReason.EMPTY: "it is empty",
    SkipReason.TOO_LARGE: "it is larger than the size limit",
    SkipReason.AGGREGATE_LIMIT: "the scan reached its total size limit",
    SkipReason.CHANGED_DURING_READ: "it changed while being read, or does not report its true size",
    SkipReason.BINARY_CONTENT: "its content is not text (binary_content)",
    SkipReason.GITIGNORED: "a .gitignore excludes it",
    SkipReason.TOO_DEEP: "it is nested too deeply",
}


# Why a scan kept documents it could not see (kbtui.sources.scan and sync).
_UNSEEN = {
    "root_missing": "the source's folder no longer exists (not mounted?)",
    "root_replaced": "the source's folder is another directory than the one added (not mounted, or made anew?)",
    "root_empty": "the source's folder is empty although it held documents (not mounted?)",
    "root_unreadable": "the source's folder cannot be opened",
    "folder_unreadable": "a folder on its way cannot be read",
    "other_device": "its folder is now on another file system (not mounted?)",
    SkipReason.UNREADABLE.value: "it cannot be read",
}


def explain_unseen(reason: str) -> str:
    """One content-free phrase for why a document was kept unseen."""
    return _UNSEEN.get(reason, reason)


def explain_skip(reason: str) -> str:
    """One content-free phrase for a skip reason code."""
    try:
        return _EXPLANATIONS[SkipReason(reason)]
    except ValueError:
        return reason


@dataclass(frozen=True)
class SourceTarget:
    path: Path  # as typed (a named symlink is followed when it is registered)
    shown: str  # as typed, for the operator's terminal only
    kind: str


def check_source_paths(paths: Sequence[str], *, include_sensitive: bool) -> list[SourceTarget]:
    """Check every argument before anything is opened; a bad one stops everything.

    Errors name the path as typed (as ``ls`` and ``cp`` do): they go to the
    operator's own terminal only, never to a log.
    """
    home = click.get_current_context().obj.home
    targets = []
    for position, raw in enumerate(paths, start=1):
        if not raw.strip():
            # Path("") is the current directory: never what an empty argument meant.
            raise KbtuiError(f"argument {position}: an empty path")
        path = Path(os.path.expanduser(raw))
        named = printable(raw)
        if not os.path.lexists(path):
            raise NotFound(f"{named}: no such file or directory")
        try:
            spec = inspect_path(path, home=home)
        except KbtuiError as problem:
            raise KbtuiError(f"{named}: {problem.message}") from None
        if spec.kind == "file":
            reason = path_skip_reason(spec.root.name, include_sensitive=include_sensitive)
            if reason is not None:
                raise KbtuiError(f"{named}: not added, {explain_skip(reason)}")
        targets.append(SourceTarget(path, raw, spec.kind))
    return targets


def storage_failure(failure: BaseException, node: Node, *, since: float) -> None:
    """If a scan stopped because the data directory is full (or the database
    stayed locked), raise the one line that says so, as every command does,
    with how many documents the command had stored as Pending by then
    (``since``: when it started): never "nothing was changed" after documents
    were stored. Otherwise return (the caller re-raises or reports)."""
    cause = failure.__cause__ if isinstance(failure, SyncFailed) else failure
    problem = storage_problem(cause) if cause is not None else None
    if problem is None:
        return
    stored = len(node.documents(status=Status.PENDING.value, updated_since=since))
    if not stored:
        raise problem from None
    if cause is not None and is_disk_full(cause):
        raise StoreError(
            f"no space left for the data directory (disk full); {stored} document(s) stored as Pending before "
            "it stopped; they will be indexed when there is space"
        ) from None
    raise StoreError(
        f"the database stayed locked by another kbtui process; {stored} document(s) stored as Pending before "
        "it stopped; a running node or the next command indexes them, and kbtui sync scans the rest"
    ) from None


def report_troubles(report: SyncReport, target: SourceTarget | None) -> int:
    """Name on stderr each file that could not be read as it should; return how many."""
    troubles = [
        f for f in report.files
        if (f.outcome == "skipped" and f.reason in TROUBLE) or (f.outcome == "unreachable" and report.status != "unreachable")
    ]
    for entry in troubles:
        if target is None:
            where = entry.path
        elif target.kind == "file":
            where = target.shown
        else:
            where = os.path.join(target.shown, entry.path)
        if entry.outcome == "unreachable":
            what = f"kept, cannot be seen: {explain_unseen(entry.reason or '')}"
        else:
            what = f"not added, {explain_skip(entry.reason or '')}"
        click.echo(f"kbtui: {printable(where)}: {what}", err=True)
    return len(troubles)


def print_scan(name: str, report: SyncReport, *, list_files: bool) -> None:
    """One line for the scan (``96 added, 6 skipped (...)``), and with ``list_files`` one per file."""
    head = f"{shown(name)} ({report.kind}) -> {report.collection_id}: "
    if report.dry_run:
        head = f"[dim]dry run, nothing written:[/] {head}"
    status = "" if report.completed else f" [bold red]{report.status}[/]"
    stdout.print(head + shown(report.summary()) + status)
    if list_files:
        for entry in report.files:
            if entry.outcome == "unchanged":
                continue
            outcome = entry.outcome if entry.reason is None else f"{entry.outcome}:{entry.reason}"
            moved = f"  (was {shown(entry.previous_path)})" if entry.previous_path else ""
            stdout.print(f"  {outcome:<30} {shown(entry.path)}{moved}", no_wrap=True, overflow="ellipsis")
    if report.status == "incomplete":
        stdout.print("[yellow]stopped at the aggregate byte limit: nothing was removed[/]")
    if report.unreachable.count:
        reasons = sorted({f.reason or "" for f in report.files if f.outcome == "unreachable"})
        why = "; ".join(explain_unseen(reason) for reason in reasons)
        stdout.print(
            f"[yellow]{report.unreachable.count} document(s) kept, their files cannot be seen ({why}); "
            f"they come back when the files do; kbtui sync --prune {shown(name)} removes them[/]"
        )


def preview(
    ctx: click.Context, targets: Sequence[SourceTarget], collection_id: str, *,
    include_sensitive: bool, as_json: bool, list_files: bool,
) -> int:
    """``kbtui add --dry-run``: what adding would do, writing nothing (not even a new data directory)."""
    try:
        node: Node | None = open_node(ctx, read_only=True, open_now=True)
    except NoKnowledgeBase:
        node = None
    reports = []
    for target in targets:
        if node is not None:
            report = node.preview_source(target.path, collection_id, include_sensitive=include_sensitive)
        else:
            report = preview_unregistered(ctx.obj, target.path, collection_id, include_sensitive=include_sensitive)
        reports.append(report)
    if as_json:
        click.echo(json.dumps([r.to_json(with_files=list_files) for r in reports], indent=2))
    else:
        for target, report in zip(targets, reports, strict=True):
            print_scan(target.shown, report, list_files=list_files)
    return 0


def _documents_cell(row: SourceRow) -> str:
    if not row.counts:
        return "0"
    order = {status.value: i for i, status in enumerate(Status)}
    cell = ", ".join(f"{n} {s.lower()}" for s, n in sorted(row.counts.items(), key=lambda item: order.get(item[0], 99)))
    unseen = sum(row.unreachable.values())
    return cell + (f", [bold red]{unseen} unreachable[/]" if unseen else "")


def print_sources(rows: Sequence[SourceRow]) -> None:
    # The path goes under the name: the table stays readable at 80 columns.
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("ID", "NAME / PATH", "KIND", "COLLECTION", "DOCUMENTS", "LAST SCAN", "WATCH"):
        table.add_column(column, no_wrap=column not in ("NAME / PATH", "DOCUMENTS", "LAST SCAN"), overflow="fold")
    for row in rows:
        s = row.source
        last = "never" if s.last_scan_at is None else (
            f"{time.strftime('%m-%d %H:%M', time.localtime(s.last_scan_at))} {s.last_scan_status}"
        )
        if s.unreachable_reason is not None:
            last += f"\n[bold red]unreachable[/]: {s.unreachable_reason}"
        table.add_row(
            s.id[:8], f"{shown(s.name)}\n[dim]{shown(s.root)}[/]", s.kind, s.collection_id,
            _documents_cell(row), last, row.watch,
        )
    stdout.print(table)


# ---------------------------------------------------------------- commands


@cli.group("sources", invoke_without_command=True)
@click.option("-c", "--collection", help="Only sources of this collection.")
@click.option("--json", "as_json", is_flag=True, help="Print sources as JSON.")
@click.pass_context
def sources_group(ctx: click.Context, collection: str | None, as_json: bool) -> int | None:
    """List sources: kind, collection, path, documents by status, last scan, watching.

    WATCH is how a running node keeps a source in sync: events (file
    notifications), polling (a periodic scan, where the filesystem cannot be
    watched), idle (no node is running) or off.
    """
    if ctx.invoked_subcommand is not None:
        return None
    node = open_node(ctx, read_only=True)
    rows = node.sources(existing_collection(node, collection) if collection is not None else None)
    if as_json:
        click.echo(json.dumps([source_json(r) for r in rows], indent=2))
    elif rows:
        print_sources(rows)
    else:
        stdout.print("no sources; kbtui add PATH registers one")
    return 0


@sources_group.command("rm")
@click.argument("source")
@click.option("-c", "--collection", help="The source's collection (when its name is used in several).")
@click.option("--keep-documents", is_flag=True, help="Keep its documents, as documents of no source.")
@click.pass_context
def sources_rm(ctx: click.Context, source: str, collection: str | None, keep_documents: bool) -> int:
    """Remove a source and purge its documents (by id, id prefix or name)."""
    node = open_node(ctx)
    row = node.resolve_source(source, _collection(collection))
    purged = node.remove_source(row.source.id, purge=not keep_documents)
    detail = f"{row.document_count} document(s) kept" if keep_documents else f"{purged} document(s) purged"
    stdout.print(f"removed source {row.source.id[:12]} {shown(row.source.name)} ({detail})")
    return 0


@sources_group.command("watch")
@click.argument("source")
@click.argument("state", type=click.Choice(["on", "off"]), default="on")
@click.option("-c", "--collection", help="The source's collection (when its name is used in several).")
@click.pass_context
def sources_watch(ctx: click.Context, source: str, state: str, collection: str | None) -> int:
    """Turn watching a source on or off (a running node follows within seconds)."""
    node = open_node(ctx)
    row = node.resolve_source(source, _collection(collection))
    updated = node.set_source_watching(row.source.id, state == "on")
    stdout.print(f"source {updated.source.id[:12]} {shown(updated.source.name)}: watching {state}")
    return 0


def _collection(raw: str | None) -> str | None:
    return None if raw is None else canonical_collection_id(raw)


def index_pending(node: Node, document_ids: Sequence[str], *, quiet: bool) -> list[str]:
    """Index documents a scan left Pending (through the pipeline, like
    ``kbtui add``); return the ids that Failed."""
    if not document_ids:
        return []
    node.index_and_follow(document_ids, show_progress=False if quiet else None)
    return [d for d, status in node.statuses(document_ids).items() if status == Status.FAILED.value]


@cli.command("sync")
@click.argument("sources", nargs=-1)
@click.option("-c", "--collection", help="Only sources of this collection.")
@click.option("--dry-run", is_flag=True, help="Scan and say what would happen; write nothing.")
@click.option("--list", "list_files", is_flag=True, help="Name every file the scan added, changed or skipped, and why.")
@click.option("--no-wait", is_flag=True, help="Queue the documents and return at once.")
@click.option("--prune", is_flag=True, help="Also remove the documents whose files cannot be seen (unreachable).")
@click.option("--json", "as_json", is_flag=True, help="Print the scan reports as JSON.")
@click.pass_context
def sync_command(
    ctx: click.Context, sources: tuple[str, ...], collection: str | None, dry_run: bool, list_files: bool,
    no_wait: bool, prune: bool, as_json: bool,
) -> int:
    """Rescan sources (by id, id prefix or name; all of them when none is named).

    Edited files are updated in place, renamed ones moved, deleted ones
    removed (after a scan that completed), new ones added. Documents whose
    files cannot be seen (an unmounted folder, an unreadable one) are kept
    and flagged unreachable; --prune removes them.
    """
    node = open_node(ctx, read_only=dry_run)
    collection_id = _collection(collection)
    rows = [node.resolve_source(s, collection_id) for s in sources] if sources else node.sources(collection_id)
    rows = list({row.source.id: row for row in rows}.values())
    started = time.time()
    reports: list[tuple[SourceRow, SyncReport]] = []
    troubles = 0
    elsewhere = 0  # sources on other nodes' machines (a knowledge base many nodes share)
    failures: list[str] = []
    for row in rows:
        try:
            with progress_bar(disable=as_json) as progress:
                task = progress.add_task("scanning", total=None)
                report = node.sync_source(
                    row.source.id, dry_run=dry_run, prune=prune,
                    on_progress=advance(progress, task),
                )
        except SyncFailed as failure:
            storage_failure(failure, node, since=started)
            report = failure.report
            failures.append(failure.message)
        except SourceOfAnotherNode as problem:
            if not sources:  # "all of them" means this node's: another node scans its own folders
                elsewhere += 1
                continue
            click.echo(f"kbtui: source {row.source.id[:12]}: {problem.message}", err=True)
            failures.append(problem.message)
            continue
        except KbtuiError as problem:
            click.echo(f"kbtui: source {row.source.id[:12]}: {problem.message}", err=True)
            failures.append(problem.message)
            continue
        except Exception as failure:  # a full disk says what was stored; the rest goes on up
            storage_failure(failure, node, since=started)
            raise
        troubles += report_troubles(report, None)
        reports.append((row, report))
    pending = list(dict.fromkeys(d for _, r in reports for d in r.pending_document_ids))
    failed = [] if no_wait or dry_run else index_pending(node, pending, quiet=as_json)
    if as_json:
        click.echo(json.dumps(
            [{**r.to_json(with_files=list_files), "name": row.source.name, "index_failed_document_ids":
              [d for d in failed if d in r.pending_document_ids]} for row, r in reports],
            indent=2,
        ))
    else:
        if not rows:
            stdout.print("no sources; kbtui add PATH registers one")
        for row, report in reports:
            print_scan(row.source.name, report, list_files=list_files)
        if elsewhere:
            stdout.print(f"{elsewhere} source(s) on other nodes' machines left to them (kbtui nodes lists them)")
        if pending and not dry_run:
            indexed = "queued" if no_wait else f"{len(pending) - len(failed)} indexed, {len(failed)} failed"
            stdout.print(indexed)
    incomplete = any(not r.completed for _, r in reports)
    return 1 if failures or troubles or failed or incomplete else 0


def print_report_table(report: SyncReport) -> None:
    """Counts and sizes by outcome, skipped ones by reason (``kbtui import``)."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("OUTCOME", "FILES", "SIZE"):
        table.add_column(column, justify="left" if column == "OUTCOME" else "right")
    for label in OUTCOMES:
        tally = getattr(report, label)
        table.add_row(label, str(tally.count), human_size(tally.bytes))
    table.add_row("skipped", str(report.skipped_count), human_size(sum(t.bytes for t in report.skipped.values())))
    for reason, tally in sorted(report.skipped.items()):
        table.add_row(f"  {reason}", str(tally.count), human_size(tally.bytes))
    stdout.print(table)
