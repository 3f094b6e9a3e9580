"""Git repositories, the older words for Git sources: ``repo add|ls|rm`` and
``import`` keep working (``kbtui add``, ``sources`` and ``sync`` do it all for
every kind of source)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
from rich.table import Table

from kbtui.api.shapes import repository_json
from kbtui.cli.common import advance, cli, open_node, progress_bar, shown, stdout
from kbtui.cli.output import chosen_format, format_option, iso_time, tsv_lines
from kbtui.cli.sources import index_pending, print_report_table
from kbtui.collections import canonical_collection_id
from kbtui.errors import NotFound
from kbtui.node import Node, SourceRow
from kbtui.printable import printable
from kbtui.sources.sync import SyncFailed, SyncReport


@cli.group()
def repo() -> None:
    """Register local Git repositories for `kbtui import`."""


@repo.command("add")
@click.argument("path")
@click.option("--name", help="A label to refer to it by (default: the folder name).")
@click.option("--json", "as_json", is_flag=True, help="Print the registration as JSON.")
@click.pass_context
def repo_add(ctx: click.Context, path: str, name: str | None, as_json: bool) -> int:
    """Register PATH, which must be the top level of a Git working tree."""
    node = open_node(ctx)
    registered = node.register_repository(Path(path), name)
    if as_json:
        click.echo(json.dumps(repository_json(SourceRow(registered, {}, False)), indent=2))
    else:
        stdout.print(f"registered {registered.id} {shown(registered.name)}")
    return 0


@repo.command("ls")
@format_option
@click.option("--json", "as_json", is_flag=True, help="Print registrations as JSON (same as --format json).")
@click.pass_context
def repo_ls(ctx: click.Context, output_format: str | None, as_json: bool) -> int:
    """List registered repositories (in a pipe or with --format tsv: one tab-separated line each)."""
    node = open_node(ctx, read_only=True)
    registered = node.repositories()
    chosen = chosen_format(output_format, as_json)
    if chosen == "json":
        click.echo(json.dumps([repository_json(r) for r in registered], indent=2))
        return 0
    if chosen == "tsv":
        click.echo(tsv_lines(
            ("repository_id", "name", "root", "documents", "last_import", "last_import_status"),
            ((r.source.id, printable(r.source.name), printable(r.source.root), r.document_count,
              iso_time(r.source.last_scan_at), r.source.last_scan_status) for r in registered),
        ))
        return 0
    if not registered:
        stdout.print("no repositories")
        return 0
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("ID", "NAME", "ROOT", "COLLECTION", "DOCUMENTS", "LAST IMPORT"):
        table.add_column(column, no_wrap=column not in ("NAME", "ROOT"))
    for row in registered:
        r = row.source
        last = "-" if r.last_scan_at is None else (
            f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(r.last_scan_at))} {r.last_scan_status}"
        )
        table.add_row(r.id[:12], shown(r.name), shown(r.root), r.collection_id, str(row.document_count), last)
    stdout.print(table)
    return 0


@repo.command("rm")
@click.argument("repository")
@click.option("--purge", is_flag=True, help="Also delete the documents it imported.")
@click.pass_context
def repo_rm(ctx: click.Context, repository: str, purge: bool) -> int:
    """Forget a registration (its documents stay unless --purge)."""
    node = open_node(ctx)
    row = registered_repository(node, repository)
    purged = node.unregister_repository(row.source.id, purge=purge)
    detail = f"{purged} document(s) purged" if purge else f"{row.document_count} document(s) kept"
    stdout.print(f"removed repository {row.source.id} ({detail})")
    return 0


def registered_repository(node: Node, reference: str) -> SourceRow:
    """The Git source ``reference`` names (name, id or id prefix), or an error
    that says what is wanted and which names are registered."""
    try:
        return node.resolve_repository(reference)
    except NotFound:
        names = [row.source.name for row in node.repositories()]
        known = f"registered: {', '.join(printable(n) for n in names)}" if names else "none is registered yet"
        raise NotFound(
            f"no such repository: give a registered repository's name or id, not a path ({known}); "
            "register a path with kbtui repo add PATH (or kbtui add PATH)"
        ) from None


@cli.command("import")
@click.argument("repository")
@click.option("-c", "--collection", help="Collection to import into (default: DEFAULT).")
@click.option("--list", "list_files", is_flag=True, help="Also list every file and its outcome.")
@click.option("--json", "as_json", is_flag=True, help="Print the import report as JSON.")
@click.pass_context
def import_command(ctx: click.Context, repository: str, collection: str | None, list_files: bool, as_json: bool) -> int:
    """Import a registered repository (by id or name): add, update, remove, skip."""
    collection_id = canonical_collection_id(collection)
    node = open_node(ctx)
    registered = registered_repository(node, repository).source
    try:
        with progress_bar(disable=as_json) as progress:
            task = progress.add_task("scanning", total=None)
            report = node.import_repository(
                registered.id, collection_id,
                on_progress=advance(progress, task),
            )
    except SyncFailed as failure:
        _print_import_report(failure.report, [], as_json=as_json, list_files=list_files)
        raise
    failed = index_pending(node, report.pending_document_ids, quiet=as_json)
    _print_import_report(report, failed, as_json=as_json, list_files=list_files)
    return 0 if report.completed and not failed else 1


def _print_import_report(report: SyncReport, failed: list[str], *, as_json: bool, list_files: bool) -> None:
    if as_json:
        payload = {"repository_id": report.source_id, **report.to_json(with_files=list_files)}
        payload["index_failed_document_ids"] = failed
        click.echo(json.dumps(payload, indent=2))
        return
    stdout.print(
        f"repository {(report.source_id or '')[:12]} -> collection {report.collection_id}: "
        f"[bold]{report.status}[/] ({report.listed} listed, {report.elapsed_s:.1f} s)"
    )
    print_report_table(report)
    if list_files:
        for entry in report.files:
            outcome = entry.outcome if entry.reason is None else f"{entry.outcome}:{entry.reason}"
            stdout.print(f"{outcome:<32} {shown(entry.path)}", no_wrap=True, overflow="ellipsis")
    if report.status == "incomplete":
        stdout.print("[yellow]stopped at the aggregate byte limit: nothing was removed[/]")
    indexed = len(report.pending_document_ids) - len(failed)
    stdout.print(f"{indexed} indexed, {len(failed)} failed")
