"""Documents: add, ls, show, rm, reindex."""

from __future__ import annotations

import json
import time

import click
from rich.table import Table

from actors.runtime import NodeAlreadyRunning, Runtime
from kbtui.cli.common import cli, existing_collection, open_node, shown, stdout
from kbtui.collect import AddReport, RefusedFile, add_files, collect_files, describe_refusals
from kbtui.collections import canonical_collection_id
from kbtui.errors import KbtuiError
from kbtui.follow import follow_documents
from kbtui.node import Node
from kbtui.printable import human_size, printable
from store import catalog
from store.models import Document, Section, StatusHistory
from store.node_lock import node_running


@cli.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("-c", "--collection", help="Collection to add to (default: DEFAULT).")
@click.option("--no-wait", is_flag=True, help="Queue the documents and return at once.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.pass_context
def add(ctx: click.Context, paths: tuple[str, ...], collection: str | None, no_wait: bool, as_json: bool) -> int:
    """Add files (or every supported file under a directory) and index them.

    Runs the pipeline in this process when no node runs for the data
    directory; otherwise the running node picks the documents up. Either way
    the command follows them to Indexed or Failed, unless --no-wait.
    """
    collection_id = canonical_collection_id(collection)
    collected = collect_files(paths)
    node = open_node(ctx)
    report = add_files(
        node.store, collection_id, collected.files, max_bytes=node.config.max_document_bytes,
        on_refused=_print_refusal,
    )
    ids = report.document_ids
    result = None if no_wait or not ids else index_and_follow(node, ids, quiet=as_json)
    documents = [Document.get_by_id(i) for i in ids]
    if as_json:
        click.echo(json.dumps([
            {**document_json(node, d), "created": o.created} for d, (_, o) in zip(documents, report.added)
        ], indent=2))
    else:
        summary = _add_summary(report, collected.skipped_symlinks)
        if documents:
            _print_documents(node, documents)
            summary += "; " + _outcome_line(documents, result)
        stdout.print(summary)
    return 1 if report.refused else _exit_code(result)


def _print_refusal(refused: RefusedFile) -> None:
    """One line per refused file on the operator's terminal: the path they typed and a fixed reason."""
    click.echo(f"kbtui: {printable(refused.file.shown)}: not added, {refused.reason.explanation}", err=True)


def _add_summary(report: AddReport, skipped_symlinks: int) -> str:
    line = f"{report.created} added, {report.already_present} already present"
    if report.refused:
        line += ", " + describe_refusals(report.refused_by_reason())
    if skipped_symlinks:
        line += f", {skipped_symlinks} symbolic link(s) skipped"
    return line


def index_and_follow(node: Node, document_ids: list[str], *, quiet: bool = False):
    """Index Pending documents and wait for them.

    When no node runs for the data directory this process runs the pipeline;
    otherwise it follows the running node through the database, and takes
    over if that node stops before our documents are done.
    """
    runtime: Runtime | None = None

    def ensure_pipeline() -> None:
        nonlocal runtime
        if runtime is not None or node_running(node.config.home):
            return
        try:
            runtime = node.pipeline().start()
        except NodeAlreadyRunning:
            return  # another process won the race; follow it
        for document_id in document_ids:
            runtime.admit(document_id)  # Busy is fine: the drain sweep admits it later

    try:
        ensure_pipeline()
        return follow_documents(document_ids, show_progress=False if quiet else None, on_poll=ensure_pipeline)
    finally:
        if runtime is not None:
            runtime.stop()


def _outcome_line(documents: list[Document], result) -> str:
    if result is None:
        return f"{len(documents)} queued; a running node (kbtui serve or the TUI) indexes them"
    line = f"{result.counts.get('Indexed', 0)} indexed, {result.failed} failed"
    if result.stalled:
        line += f", {result.unfinished} still queued (the pipeline stopped making progress; see kbtui status)"
    return line


def _exit_code(result) -> int:
    if result is None:
        return 0
    return 1 if result.failed or result.stalled else 0




def document_json(node: Node, document: Document) -> dict[str, object]:
    """The stable JSON shape of a document (documented in README.md)."""
    return {
        "document_id": document.id,
        "collection": document.collection_id,
        "status": document.status,
        "display_name": catalog.display_name(node.store, document),
        "failure_reason": document.failure_reason,
        "format": document.format,
        "source_path": document.source_path,
        "size_bytes": document.size_bytes,
        "chunk_count": document.chunk_count,
        "progress": document.progress,
        "vector_identity": document.vector_identity,
        "created_at": document.created_at,
        "updated_at": document.updated_at,
        "indexed_at": document.indexed_at,
    }


def _print_documents(node: Node, documents: list[Document]) -> None:
    # The collection column only when it tells something: keeps names readable at 80 columns.
    show_collection = len({d.collection_id for d in documents}) > 1
    columns = ["ID", "NAME"] + (["COLLECTION"] if show_collection else []) + ["STATUS", "CHUNKS", "SIZE", "UPDATED"]
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in columns:
        table.add_column(column, no_wrap=column != "NAME", overflow="fold" if column == "NAME" else "ellipsis")
    for d in documents:
        status = d.status if not d.failure_reason else f"{d.status} ({d.failure_reason})"
        row = [d.id[:12], shown(catalog.display_name(node.store, d))]
        if show_collection:
            row.append(d.collection_id)
        row += [status, str(d.chunk_count), human_size(d.size_bytes), time.strftime("%m-%d %H:%M", time.localtime(d.updated_at))]
        table.add_row(*row)
    stdout.print(table)


@cli.command("ls")
@click.option("-c", "--collection", help="Only this collection.")
@click.option("--status", type=click.Choice(["Pending", "Extracting", "Chunking", "Embedding", "Indexed", "Failed"]))
@click.option("--json", "as_json", is_flag=True, help="Print documents as JSON.")
@click.pass_context
def list_command(ctx: click.Context, collection: str | None, status: str | None, as_json: bool) -> int:
    """List documents and their ingestion status."""
    node = open_node(ctx)
    documents = catalog.list_documents(existing_collection(collection), status)
    if as_json:
        click.echo(json.dumps([document_json(node, d) for d in documents], indent=2))
    elif documents:
        _print_documents(node, documents)
    else:
        stdout.print("no documents")
    return 0


@cli.command()
@click.argument("document")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def show(ctx: click.Context, document: str, as_json: bool) -> int:
    """Show one document: metadata, status history and sections."""
    node = open_node(ctx)
    doc = catalog.resolve_document(document)
    history = list(StatusHistory.select().where(StatusHistory.document == doc.id).order_by(StatusHistory.id))
    sections = list(Section.select().where(Section.document == doc.id).order_by(Section.ordinal))
    if as_json:
        payload = document_json(node, doc)
        payload["history"] = [{"status": h.status, "reason": h.reason, "at": h.at} for h in history]
        payload["sections"] = [{"heading_path": s.heading_path, "page": s.page} for s in sections]
        click.echo(json.dumps(payload, indent=2))
        return 0
    for key, value in document_json(node, doc).items():
        stdout.print(f"[bold]{key:>16}[/] {shown(str(value)) if value is not None else '-'}")
    stdout.print("\n[bold]history[/]")
    for h in history:
        stdout.print(f"  {time.strftime('%H:%M:%S', time.localtime(h.at))} {h.status}{' ' + h.reason if h.reason else ''}")
    stdout.print(f"\n[bold]sections[/] ({len(sections)})")
    for s in sections[:50]:
        stdout.print(f"  {shown(s.heading_path) or '(untitled)'}")
    return 0


@cli.command()
@click.argument("documents", nargs=-1, required=True)
@click.pass_context
def rm(ctx: click.Context, documents: tuple[str, ...]) -> int:
    """Delete documents: their rows, index entries and encrypted source."""
    node = open_node(ctx)
    targets = [catalog.resolve_document(ref) for ref in documents]
    for doc in targets:
        node.purge(doc.id)
        stdout.print(f"removed {doc.id}")
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
    targets = catalog.list_documents() if all_documents else [catalog.resolve_document(r) for r in documents]
    # Authenticate every source first: a damaged blob stops the command before
    # anything already indexed is touched.
    for doc in targets:
        try:
            node.store.blobs.verify(doc.id)
        except KbtuiError as exc:
            raise type(exc)(f"document {doc.id}: {exc.message}") from None
    ids = [d.id for d in targets]
    catalog.mark_pending(ids)
    result = None if no_wait else index_and_follow(node, ids)
    stdout.print(_outcome_line([Document.get_by_id(i) for i in ids], result))
    return _exit_code(result)
