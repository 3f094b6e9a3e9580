"""Documents: add, ls, show, rm, reindex."""

from __future__ import annotations

import json
import sys
import time

import click
from rich.markup import escape
from rich.table import Table

from kbtui.api.shapes import document_json
from kbtui.cli.common import advance, cli, existing_collection, open_node, progress_bar, shown, stdout
from kbtui.cli.output import chosen_format, format_option, iso_time, readable_time, tsv_lines
from kbtui.cli.sources import (
    SourceTarget,
    check_source_paths,
    explain_skip,
    preview,
    print_scan,
    report_troubles,
    storage_failure,
)
from kbtui.collections import canonical_collection_id
from kbtui.errors import KbtuiError
from kbtui.follow import FollowResult
from kbtui.node import DocumentMatch, SourceSync
from kbtui.printable import human_size, printable
from kbtui.reads import DocumentRow, Status, is_interrupted, ocr_summary
from kbtui.reasons import INTERRUPTED, explain_reason


@cli.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("-c", "--collection", help="Collection to add to (default: DEFAULT).")
@click.option("--name", help="A name for the source (one path only; default: the folder's or file's name).")
@click.option("--include-sensitive", is_flag=True,
              help="Also index sensitive files (keys, certificates, .env, credentials); stays with the source.")
@click.option("--dry-run", is_flag=True, help="Scan and say what would happen; write nothing.")
@click.option("--list", "list_files", is_flag=True, help="Name every file the scan added, changed or skipped, and why.")
@click.option("--no-wait", is_flag=True, help="Queue the documents and return at once.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.pass_context
def add(
    ctx: click.Context, paths: tuple[str, ...], collection: str | None, name: str | None, include_sensitive: bool,
    dry_run: bool, list_files: bool, no_wait: bool, as_json: bool,
) -> int:
    """Add folders, files or Git repositories as sources, and index them
    (``-`` adds standard input, de-duplicated by content).

    Each path becomes a source of the collection (or is found registered
    there) and is scanned: new files are added, edited ones updated in
    place, renamed ones moved, deleted ones removed. A running node (kbtui
    serve, the TUI) then keeps watching it. Every skipped file is counted by
    reason (--list names each). Runs the pipeline in this process when no
    node runs for the data directory, and follows the documents to Indexed
    or Failed, unless --no-wait.
    """
    collection_id = canonical_collection_id(collection)
    if "-" in paths:
        if len(paths) > 1 or dry_run or include_sensitive:
            raise KbtuiError("- (standard input) is added on its own, without --dry-run or --include-sensitive")
        return _add_upload(ctx, collection_id, name or "stdin", no_wait=no_wait, as_json=as_json)
    if name is not None and len(paths) > 1:
        raise KbtuiError("--name names one source: give one path with it")
    targets = check_source_paths(paths, include_sensitive=include_sensitive)
    if dry_run:
        return preview(ctx, targets, collection_id, include_sensitive=include_sensitive, as_json=as_json,
                       list_files=list_files)
    node = open_node(ctx)
    started = time.time()
    outcomes: list[tuple[SourceTarget, SourceSync]] = []
    refused = 0
    for target in targets:
        if target.kind == "file":
            plan = node.preview_source(target.path, collection_id, include_sensitive=include_sensitive)
            if plan.skipped and not (plan.added.count or plan.updated.count or plan.unchanged.count or plan.renamed.count):
                reason = next(iter(plan.skipped))
                click.echo(f"kbtui: {printable(target.shown)}: not added, {explain_skip(reason)}", err=True)
                refused += 1
                continue
        try:
            with progress_bar(disable=as_json) as progress:
                task = progress.add_task("scanning", total=None)
                synced = node.add_source(
                    target.path, collection_id, name=name, include_sensitive=include_sensitive,
                    on_progress=advance(progress, task),
                )
        except Exception as failure:  # a full disk says what was stored; the rest goes on up
            storage_failure(failure, node, since=started)
            raise
        outcomes.append((target, synced))
        refused += report_troubles(synced.report, target)
    ids = list(dict.fromkeys(d for _, synced in outcomes for d in synced.report.pending_document_ids))
    result = None if no_wait or not ids else node.index_and_follow(ids, show_progress=False if as_json else None)
    touched = {
        f.document_id: f.outcome for _, synced in outcomes for f in synced.report.files
        if f.document_id and f.outcome in ("added", "updated", "renamed", "unchanged")
    }
    rows = {row.document_id: row for row in node.documents(document_ids=list(touched))}
    if as_json:
        click.echo(json.dumps([
            {**document_json(row), "created": touched[document_id] == "added", "outcome": touched[document_id]}
            for document_id, row in rows.items()
        ], indent=2))
    else:
        changed = [rows[d] for d in ids if d in rows]
        if changed:
            _print_documents(changed, node_running=True)
        for _, synced in outcomes:
            print_scan(synced.row.source.name, synced.report, list_files=list_files)
        if ids:
            stdout.print(_outcome_line(len(ids), result))
    incomplete = any(not synced.report.completed for _, synced in outcomes)
    return 1 if refused or incomplete else _exit_code(result)


def _add_upload(ctx: click.Context, collection_id: str, name: str, *, no_wait: bool, as_json: bool) -> int:
    """``kbtui add -``: the bytes on standard input, de-duplicated by content (no path, no source)."""
    limit = ctx.obj.max_document_bytes
    data = sys.stdin.buffer.read(limit + 1)
    if len(data) > limit:
        raise KbtuiError("standard input holds more than max_document_bytes")
    node = open_node(ctx)
    outcome = node.add_upload(data, collection_id, display_name=name)
    ids = [outcome.document_id]
    result = None if no_wait else node.index_and_follow(ids, show_progress=False if as_json else None)
    rows = node.documents(document_ids=ids)
    if as_json:
        click.echo(json.dumps([{**document_json(row), "created": outcome.created} for row in rows], indent=2))
    else:
        _print_documents(rows, node_running=True)
        stdout.print(("1 added" if outcome.created else "already present") + "; " + _outcome_line(1, result))
    return _exit_code(result)


def _outcome_line(queued: int, result: FollowResult | None) -> str:
    if result is None:
        return f"{queued} queued; a running node (kbtui serve or the TUI) indexes them"
    line = f"{result.counts.get('Indexed', 0)} indexed, {result.failed} failed"
    if result.stalled:
        line += f", {result.unfinished} still queued (the pipeline stopped making progress; see kbtui status)"
    return line


def _exit_code(result: FollowResult | None) -> int:
    if result is None:
        return 0
    return 1 if result.failed or result.stalled else 0


LIST_COLUMNS = ("document_id", "collection", "status", "failure_reason", "chunks", "size_bytes", "updated", "name")
# Fixed widths of the table's columns (the name takes the rest): stable at 80 columns.
_ID_WIDTH, _STATUS_WIDTH, _CHUNKS_WIDTH, _SIZE_WIDTH, _UPDATED_WIDTH = 12, 11, 6, 9, 11


def _status_word(row: DocumentRow, node_running: bool) -> str:
    return "interrupted" if is_interrupted(row.status, node_running) else row.status


def _print_documents(documents: list[DocumentRow], *, node_running: bool, output_format: str = "table") -> None:
    if output_format == "tsv":
        click.echo(tsv_lines(LIST_COLUMNS, (
            (d.document_id, d.collection_id, _status_word(d, node_running), d.reason, d.chunk_count, d.size_bytes,
             iso_time(d.updated_at), printable(d.name))
            for d in documents
        )))
        return
    # The collection column only when it tells something: keeps names readable at 80 columns.
    show_collection = len({d.collection_id for d in documents}) > 1
    table = Table(box=None, header_style="bold", pad_edge=False, expand=True)
    table.add_column("ID", width=_ID_WIDTH, no_wrap=True)
    table.add_column("NAME", ratio=1, min_width=8, no_wrap=True, overflow="ellipsis")
    if show_collection:
        table.add_column("COLLECTION", max_width=12, no_wrap=True, overflow="ellipsis")
    table.add_column("STATUS", width=_STATUS_WIDTH, no_wrap=True)
    table.add_column("CHUNKS", width=_CHUNKS_WIDTH, no_wrap=True, justify="right")
    table.add_column("SIZE", width=_SIZE_WIDTH, no_wrap=True, justify="right")
    table.add_column("UPDATED", width=_UPDATED_WIDTH, no_wrap=True)
    for d in documents:
        row = [d.document_id[:12], shown(d.name)]
        if show_collection:
            row.append(d.collection_id)
        row += [_status_word(d, node_running), str(d.chunk_count), human_size(d.size_bytes),
                time.strftime("%m-%d %H:%M", time.localtime(d.updated_at))]
        table.add_row(*row)
    stdout.print(table)
    # Below the table, so a long reason never squeezes the names.
    failed = [d for d in documents if d.status == Status.FAILED.value]
    for d in failed:
        stdout.print(f"[red]failed[/] {shown(d.source_path or d.name)} ({d.document_id[:12]}) {d.reason or '-'}: "
                     f"{escape(explain_reason(d.reason))}")
    if any(is_interrupted(d.status, node_running) for d in documents):
        stdout.print(f"[yellow]interrupted[/]: left mid-stage by a node that stopped; {INTERRUPTED.split(' — ')[1]}")


@cli.command("ls")
@click.option("-c", "--collection", help="Only this collection.")
@click.option("--status", type=click.Choice([s.value for s in Status], case_sensitive=False),
              help="Only documents in this status (any case).")
@format_option
@click.option("--json", "as_json", is_flag=True, help="Print documents as JSON (same as --format json).")
@click.option("--ocr-low", is_flag=True, help="Only documents with a page OCR read under [ocr] low_confidence.")
@click.pass_context
def list_command(ctx: click.Context, collection: str | None, status: str | None, output_format: str | None,
                 as_json: bool, ocr_low: bool) -> int:
    """List documents and their ingestion status.

    On a terminal, a table that fits the width; in a pipe (or --format tsv),
    one tab-separated line per document with the whole id and name.
    """
    node = open_node(ctx, read_only=True)
    status = next((s.value for s in Status if status and s.value.lower() == status.lower()), None)
    collection_id = existing_collection(node, collection) if collection else None
    if ocr_low:
        low = node.ocr_low_document_ids(collection_id)
        documents = node.documents(collection_id, status, document_ids=low) if low else []
    else:
        documents = node.documents(collection_id, status)
    running = node.pipeline_running()
    chosen = chosen_format(output_format, as_json)
    if chosen == "json":
        click.echo(json.dumps([{**document_json(d), "interrupted": is_interrupted(d.status, running)}
                               for d in documents], indent=2))
    elif documents or chosen == "tsv":
        _print_documents(documents, node_running=running, output_format=chosen)
    else:
        stdout.print("no documents")
    return 0


def _say_match(match: DocumentMatch) -> str:
    return "" if match.matched_by == "id" else f" (matched by {match.matched_by})"


@cli.command()
@click.argument("document")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def show(ctx: click.Context, document: str, as_json: bool) -> int:
    """Show one document: metadata, status history and sections.

    DOCUMENT is its whole name, its id, or an id prefix of 4+ characters.
    """
    node = open_node(ctx, read_only=True)
    match = node.find_document(document)
    detail = node.detail(match.document_id)
    if detail is None:
        raise KbtuiError("the document was deleted meanwhile")
    running = node.pipeline_running()
    low_confidence = ctx.obj.ocr.low_confidence
    if as_json:
        payload = document_json(detail.row)
        payload["interrupted"] = is_interrupted(detail.row.status, running)
        payload["history"] = [{"status": h.status, "reason": h.reason, "at": h.at} for h in detail.history]
        payload["sections"] = [{"heading_path": s.heading_path, "page": s.page} for s in detail.sections]
        payload["ocr_pages"] = [
            {"page": p.page, "confidence": p.confidence, "words": p.words, "reason": p.reason,
             "low_confidence": p.low(low_confidence)}
            for p in detail.ocr_pages
        ]
        payload["source_problem"] = detail.source_problem
        click.echo(json.dumps(payload, indent=2))
        return 0
    if match.matched_by != "id":
        click.echo(f"document {match.document_id}{_say_match(match)}", err=True)
    now = time.time()
    for key, value in document_json(detail.row).items():
        if key.endswith("_at") and (value is None or isinstance(value, float | int)):
            text = readable_time(value, now)
        elif key == "size_bytes" and isinstance(value, int):
            text = f"{value} ({human_size(value)})"
        elif key == "status" and is_interrupted(detail.row.status, running):
            text = f"{value} ({INTERRUPTED})"
        elif value is None:
            text = "-"
        else:
            text = shown(str(value))
        stdout.print(f"[bold]{key:>16}[/] {text}")
        if key == "failure_reason" and isinstance(value, str) and value:
            stdout.print(f"{'':>16} [dim]{escape(explain_reason(value))}[/]")
    if detail.source_problem:
        stdout.print(f"[bold]{'source':>16}[/] [bold red]{detail.source_problem}[/]")
        stdout.print(f"{'':>16} [dim]{escape(explain_reason(detail.source_problem))}[/]")
    stdout.print("\n[bold]history[/]")
    for h in detail.history:
        reason = f" {h.reason}" if h.reason else ""
        stdout.print(f"  {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(h.at))} {h.status}{reason}")
    stdout.print(f"\n[bold]sections[/] ({len(detail.sections)})")
    for s in detail.sections[:50]:
        stdout.print(f"  {shown(s.heading_path) or '(untitled)'}")
    if detail.ocr_pages:
        stdout.print(f"\n[bold]OCR'd pages[/] ({len(detail.ocr_pages)}): {escape(ocr_summary(detail.ocr_pages, low_confidence))}")
        for page in detail.ocr_pages:
            stdout.print(f"  {escape(page.describe(low_confidence))}")
    return 0


@cli.command()
@click.argument("documents", nargs=-1, required=True)
@click.pass_context
def rm(ctx: click.Context, documents: tuple[str, ...]) -> int:
    """Delete documents: their rows, index entries and encrypted source.

    Each DOCUMENT is a whole name, an id, or an id prefix of 4+ characters;
    nothing is deleted unless every one names exactly one document.
    """
    node = open_node(ctx)
    matches = list({m.document_id: m for m in (node.find_document(ref) for ref in documents)}.values())
    names = node.display_names([m.document_id for m in matches])
    for match in matches:
        node.purge(match.document_id)
        stdout.print(f"removed {match.document_id} {shown(names.get(match.document_id, ''))}{_say_match(match)}")
    return 0


@cli.command()
@click.argument("documents", nargs=-1)
@click.option("--all", "all_documents", is_flag=True, help="Re-index every document.")
@click.option("--no-wait", is_flag=True, help="Queue the documents and return at once.")
@click.pass_context
def reindex(ctx: click.Context, documents: tuple[str, ...], all_documents: bool, no_wait: bool) -> int:
    """Run ingestion again (e.g. after changing the embedding model).

    Documents keep serving their current index until the new one commits.
    """
    if not documents and not all_documents:
        raise KbtuiError("name documents to re-index, or pass --all")
    node = open_node(ctx)
    targets = None if all_documents else [node.find_document(r).document_id for r in documents]
    report = node.reindex(targets)
    for document_id, problem in report.damaged:
        click.echo(f"kbtui: document {document_id}: {problem}; its index is kept as it was", err=True)
    for document_id in report.not_found:
        click.echo(f"kbtui: document {document_id}: not found (removed meanwhile?)", err=True)
    ids = list(report.queued)
    result = None if no_wait or not ids else node.index_and_follow(ids)
    damaged = f", {len(report.damaged)} left alone (damaged source)" if report.damaged else ""
    gone = f", {len(report.not_found)} not found" if report.not_found else ""
    stdout.print(_outcome_line(len(ids), result) + damaged + gone)
    return 1 if report.damaged or report.not_found else _exit_code(result)
