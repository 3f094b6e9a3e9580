"""The ``kbtui`` command: the TUI with no arguments, headless subcommands otherwise."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import click
import peewee
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from actors.runtime import NodeAlreadyRunning, Runtime
from actors.status_writer import STATUS_FILE_NAME
from kbtui.collections import canonical_collection_id
from kbtui.config import Config
from kbtui.errors import KbtuiError, NotFound
from kbtui.extract import format_for
from kbtui.follow import follow_documents
from kbtui.logs import configure_logging
from kbtui.node import Node
from kbtui.retrieval.fusion import FUSION_STRATEGIES
from kbtui.retrieval.search import Hit
from kbtui.retrieval.snippets import snippet
from kbtui.tools.knowledge import Source
from kbtui.repository.importer import ImportFailed, ImportReport, import_repository, register_repository
from kbtui.printable import printable
from kbtui.repository.scan import ScanLimits
from store import catalog, repositories
from store.errors import storage_problem
from store.node_lock import node_running
from store.models import Document, Section, StatusHistory
from store.repositories import RegisteredRepository

stdout = Console(highlight=False, soft_wrap=False)
log = logging.getLogger(__name__)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: maps expected errors to one line and an exit code."""
    try:
        code = cli.main(args=argv, prog_name="kbtui", standalone_mode=False)
    except KbtuiError as exc:
        click.echo(f"kbtui: {exc.message}", err=True)
        sys.exit(exc.exit_code)
    except (OSError, peewee.OperationalError) as exc:
        problem = storage_problem(exc)
        if problem is None:
            raise
        click.echo(f"kbtui: {problem.message}", err=True)
        sys.exit(problem.exit_code)
    except click.exceptions.Abort:
        click.echo("kbtui: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    sys.exit(code if isinstance(code, int) else 0)


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", is_flag=True, help="Also print informational log lines to stderr.")
@click.pass_context
def cli(ctx: click.Context, verbose: bool) -> int | None:
    """An offline knowledge base: add documents, search them, from a terminal.

    With no command, opens the terminal UI. Data lives in $KBTUI_HOME
    (default: the platform user-data directory).
    """
    config = Config.load()
    configure_logging(
        config.home,
        to_stderr_level=logging.INFO if verbose else logging.WARNING,
        file_level=logging.getLevelName(os.environ.get("KBTUI_LOG_LEVEL", "INFO").upper()),
    )
    ctx.obj = config
    if ctx.invoked_subcommand is None:
        from kbtui.app import run_app

        return run_app(config)
    return None


def _open_node(ctx: click.Context) -> Node:
    node = Node.open(ctx.obj)
    ctx.call_on_close(node.close)
    return node


def _existing_collection(raw: str | None) -> str | None:
    if raw is None:
        return None
    collection_id = canonical_collection_id(raw)
    if not catalog.collection_exists(collection_id):
        raise NotFound("unknown collection")
    return collection_id


# ---------------------------------------------------------------- add


def collect_files(paths: Iterable[str]) -> list[Path]:
    """Expand arguments into supported files; a bad argument stops everything.

    Errors name the argument's position, never the path: file names are
    private to the operator and may end up in a log.
    """
    files: list[Path] = []
    for position, raw in enumerate(paths, start=1):
        path = Path(raw)
        if not path.exists():
            raise NotFound(f"argument {position}: no such file or directory")
        if path.is_dir():
            found = sorted(
                p for p in path.rglob("*")
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
                and format_for(p.name) is not None
            )
            if not found:
                raise KbtuiError(f"argument {position}: the directory holds no supported files")
            files.extend(found)
        elif path.is_file():
            if format_for(path.name) is None:
                raise KbtuiError(f"argument {position}: unsupported file type '{path.suffix or '(none)'}'")
            files.append(path)
        else:
            raise KbtuiError(f"argument {position}: not a regular file")
    return files


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
    files = collect_files(paths)
    node = _open_node(ctx)
    outcomes = [
        catalog.add_document(
            node.store, collection_id, path,
            display_name=path.name, fmt=format_for(path.name) or "text",
            max_bytes=node.config.max_document_bytes,
        )
        for path in files
    ]
    ids = [o.document_id for o in outcomes]
    result = None if no_wait else index_and_follow(node, ids, quiet=as_json)
    documents = [Document.get_by_id(i) for i in ids]
    if as_json:
        click.echo(json.dumps([
            {**document_json(node, d), "created": o.created} for d, o in zip(documents, outcomes)
        ], indent=2))
    else:
        _print_documents(node, documents)
        created = sum(o.created for o in outcomes)
        stdout.print(f"{created} added, {len(outcomes) - created} already present; " + _outcome_line(documents, result))
    return _exit_code(result)


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


# ---------------------------------------------------------------- ls / show / rm


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


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


@cli.command("ls")
@click.option("-c", "--collection", help="Only this collection.")
@click.option("--status", type=click.Choice(["Pending", "Extracting", "Chunking", "Embedding", "Indexed", "Failed"]))
@click.option("--json", "as_json", is_flag=True, help="Print documents as JSON.")
@click.pass_context
def list_command(ctx: click.Context, collection: str | None, status: str | None, as_json: bool) -> int:
    """List documents and their ingestion status."""
    node = _open_node(ctx)
    documents = catalog.list_documents(_existing_collection(collection), status)
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
    node = _open_node(ctx)
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
    node = _open_node(ctx)
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
    node = _open_node(ctx)
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


# ---------------------------------------------------------------- search


def hit_json(hit) -> dict[str, object]:
    """The stable JSON shape of a search hit (documented in README.md)."""
    return {
        "document_id": hit.document_id,
        "chunk_id": hit.chunk_id,
        "collection": hit.collection_id,
        "heading_path": hit.heading_path,
        "source_path": hit.source_path,
        "page": hit.page,
        "start_offset": hit.start_offset,
        "end_offset": hit.end_offset,
        "kind": hit.kind,
        "language": hit.language,
        "symbol": hit.symbol,
        "score": hit.score,
        "score_kind": hit.score_kind,
        "lexical_rank": hit.lexical_rank,
        "vector_rank": hit.vector_rank,
        "lexical_score": hit.lexical_score,
        "vector_score": hit.vector_score,
        "fusion_rank": hit.fusion_rank,
        "text": hit.text,
        "neighbors": [
            {"chunk_id": n.chunk_id, "ordinal": n.ordinal, "heading_path": n.heading_path, "page": n.page,
             "start_offset": n.start_offset, "end_offset": n.end_offset, "text": n.text}
            for n in getattr(hit, "neighbors", ())
        ],
    }


@cli.command()
@click.argument("query")
@click.option("-c", "--collection", help="Collection to search (default: DEFAULT).")
@click.option("-n", "--limit", type=click.IntRange(1, 200), default=None, help="Number of hits.")
@click.option("-d", "--document", "document", help="Only this document (id or prefix).")
@click.option("--neighbors", is_flag=True, help="Also return each hit's neighbouring chunks.")
@click.option("--explain", is_flag=True, help="Show per-arm ranks and scores, the lexical plan and timings.")
@click.option("--json", "as_json", is_flag=True, help="Print hits as JSON.")
@click.pass_context
def search(
    ctx: click.Context, query: str, collection: str | None, limit: int | None, document: str | None,
    neighbors: bool, explain: bool, as_json: bool,
) -> int:
    """Hybrid search (BM25 + vectors, fused; optionally reranked)."""
    node = _open_node(ctx)
    collection_id = _existing_collection(collection) if collection else canonical_collection_id(None)
    document_id = catalog.resolve_document(document, collection_id).id if document else None
    response = node.search(
        query, collection_id, limit=limit or node.config.search_limit,
        document_id=document_id, expand_neighbors=neighbors,
    )
    if as_json:
        payload: dict[str, object] = {
            "hits": [hit_json(h) for h in response.hits],
            "degraded": response.degraded,
            "elapsed_ms": round(response.elapsed_ms, 2),
        }
        if explain:
            payload["explain"] = explain_json(response.explain)
        click.echo(json.dumps(payload, indent=2))
        return 0
    if response.degraded:
        stdout.print(f"[yellow]degraded: {', '.join(response.degraded)}[/]")
    if explain and response.explain is not None:
        _print_explain(response.explain)
    print_hits(node, collection_id, response.hits, query, explain=explain)
    stdout.print(f"[dim]{len(response.hits)} hits in {response.elapsed_ms:.0f} ms[/]")
    return 0


def print_hits(node: Node, collection_id: str, hits: list[Hit], query: str, *, explain: bool = False) -> None:
    """Hits for the operator: title, origin, score and a highlighted snippet."""
    if not hits:
        stdout.print("no matches")
        return
    # The operator's own terminal may show decrypted names; search results never carry them.
    names = {d.id: catalog.display_name(node.store, d) for d in catalog.list_documents(collection_id)}
    for rank, hit in enumerate(hits, start=1):
        title = hit.heading_path or hit.source_path or names.get(hit.document_id, hit.document_id[:12])
        stdout.print(f"[bold]{rank:>2}. {shown(title)}[/]", no_wrap=True, overflow="ellipsis")
        origin = hit.source_path or names.get(hit.document_id, "")
        page = f" · p.{hit.page}" if hit.page is not None else ""
        stdout.print(
            f"    [dim]{shown(origin)}{page} · {hit.document_id[:12]} · {hit.score_kind} {hit.score:.4f}[/]",
            no_wrap=True, overflow="ellipsis",
        )
        if explain:
            stdout.print(f"    [dim]{escape(_arm_line(hit))}[/]")
        stdout.print("    " + highlighted_snippet(hit.text, query))
        for neighbour in hit.neighbors:
            stdout.print(f"      [dim]± {shown(' '.join(neighbour.text.split())[:120])}[/]", no_wrap=True, overflow="ellipsis")


def shown(text: str) -> str:
    """Document-controlled text as inert Rich markup: no markup, no control characters."""
    return escape(printable(text))


def highlighted_snippet(text: str, query: str) -> str:
    """Rich markup of a short snippet with the query's terms in bold reverse."""
    return "".join(
        f"[bold reverse]{shown(s.text)}[/]" if s.highlighted else shown(s.text) for s in snippet(text, query)
    )


def _arm_line(hit: Hit) -> str:
    def arm(name: str, rank: int | None, score: float | None) -> str:
        return f"{name} -" if rank is None else f"{name} #{rank} ({score:.4f})"

    line = f"{arm('lexical', hit.lexical_rank, hit.lexical_score)} · {arm('vector', hit.vector_rank, hit.vector_score)}"
    if hit.score_kind == "Rerank" and hit.fusion_rank is not None:
        line += f" · fusion #{hit.fusion_rank}"
    return line


def explain_json(explain) -> dict[str, object] | None:
    """The JSON shape of ``--explain``: how the search ran."""
    if explain is None:
        return None
    plan = explain.lexical_plan
    return {
        "mode": explain.mode,
        "fusion": explain.fusion,
        "pool": explain.pool,
        "lexical_candidates": explain.lexical_candidates,
        "vector_candidates": explain.vector_candidates,
        "reranked": explain.reranked,
        "vector_weight": explain.vector_weight,
        "lexical_plan": None if plan is None else {
            "ranked": list(plan.ranked), "repeats": list(plan.repeats), "pruned": list(plan.pruned),
            "recency": list(plan.recency), "missing": list(plan.missing),
        },
        "timings_ms": explain.timings_ms,
    }


def _print_explain(explain) -> None:
    plan = explain.lexical_plan
    weight = f" (vector weight {explain.vector_weight:.2f})" if explain.vector_weight is not None else ""
    stdout.print(
        f"[dim]fusion {explain.fusion}{weight}, pool {explain.pool}: {explain.lexical_candidates} lexical + "
        f"{explain.vector_candidates} vector candidates{', reranked' if explain.reranked else ''}[/]"
    )
    if plan is not None:
        ranked = [w if n == 1 else f"{w}×{n}" for w, n in zip(plan.ranked, plan.repeats)]
        parts = [f"ranked {', '.join(ranked) or '-'}"]
        if plan.pruned:
            parts.append(f"left out {', '.join(plan.pruned)}")
        if plan.recency:
            parts.append(f"only very common words: newest chunks holding {', '.join(plan.recency)}")
        if plan.missing:
            parts.append(f"not found {', '.join(plan.missing)}")
        stdout.print(f"[dim]lexical: {shown('; '.join(parts))}[/]")
    stdout.print("[dim]" + ", ".join(f"{k.removesuffix('_ms')} {v:.1f} ms" for k, v in explain.timings_ms.items()) + "[/]")


# ---------------------------------------------------------------- eval


@cli.command("eval")
@click.option("--beir", "beir_dir", required=True, type=click.Path(exists=True, file_okay=False),
              help="A BEIR-layout directory: corpus.jsonl, queries.jsonl, qrels/test.tsv.")
@click.option("--provider", type=click.Choice(["local", "ollama", "hash"]), default=None,
              help="Embedding provider (default: the configured one).")
@click.option("--fusion", "fusions", multiple=True, type=click.Choice([*FUSION_STRATEGIES, "all"]),
              help="Fusion for the hybrid rows; repeat or say 'all' (default: the configured one).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON record per mode.")
@click.option("--home", "eval_home", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep the evaluation knowledge base in this directory (never your own); a later run "
                   "with the same collection and settings reuses its indexed documents.")
@click.pass_context
def eval_command(
    ctx: click.Context, beir_dir: str, provider: str | None, fusions: tuple[str, ...], as_json: bool,
    eval_home: Path | None,
) -> int:
    """Measure retrieval on a BEIR collection: nDCG@10, Recall@100, MRR, latency.

    Ingests the collection through the real pipeline into a temporary
    knowledge base (your own is not touched), ranks documents by their best
    chunk, and reports lexical-only, vector-only and hybrid search.
    """
    import contextlib
    import dataclasses
    import tempfile

    from kbtui.retrieval.eval import load_beir, run_beir

    collection = load_beir(Path(beir_dir))
    chosen = list(FUSION_STRATEGIES) if "all" in fusions else list(dict.fromkeys(fusions)) or [ctx.obj.search_fusion]
    chosen_provider = provider or ctx.obj.embedding_provider
    if eval_home is not None:
        _claim_eval_home(eval_home, Path(ctx.obj.home), collection.name, chosen_provider)
    with contextlib.ExitStack() as stack:
        home = eval_home or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kbtui-eval-home-")))
        config = dataclasses.replace(ctx.obj, home=home, embedding_provider=chosen_provider)
        node = Node.open(config)
        try:
            run = run_beir(node, collection, fusions=chosen, show_progress=not as_json and sys.stderr.isatty())
        finally:
            node.close()
    if as_json:
        click.echo(json.dumps([r.to_json() for r in run.reports], indent=2))
        return 0 if not run.failed else 1
    stdout.print(
        f"[bold]{escape(collection.name)}[/]: {len(collection.documents)} documents "
        f"({run.indexed} indexed, {run.failed} failed in {run.ingest_s:.0f} s), "
        f"{len(collection.queries)} queries, provider {config.embedding_provider}"
    )
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("MODE", "nDCG@10", "RECALL@100", "MRR", "P@10", "P50 MS", "P95 MS"):
        table.add_column(column, justify="left" if column == "MODE" else "right")
    for r in run.reports:
        label = f"hybrid ({r.fusion})" if r.mode == "hybrid" else r.mode
        table.add_row(label, f"{r.ndcg_at_10:.3f}", f"{r.recall_at_100:.3f}", f"{r.mrr:.3f}",
                      f"{r.precision_at_10:.3f}", f"{r.p50_ms:.1f}", f"{r.p95_ms:.1f}")
    stdout.print(table)
    return 0 if not run.failed else 1


EVAL_HOME_MARKER = "kbtui-eval.json"


def _claim_eval_home(home: Path, own_home: Path, collection: str, provider: str) -> None:
    """Use ``home`` for ``kbtui eval --home`` only if it is empty or was made
    by eval for the same collection and provider (documents indexed with
    another provider would be searched with the wrong vectors)."""
    if home.resolve() == own_home.resolve():
        raise click.UsageError("--home must not be your own knowledge base")
    marker = home / EVAL_HOME_MARKER
    wanted = {"collection": collection, "provider": provider}
    if marker.exists():
        try:
            made = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            made = None
        if made != wanted:
            raise click.UsageError(f"{home} was made for another collection or provider; use a new directory")
        return
    if home.exists() and any(home.iterdir()):
        raise click.UsageError(f"{home} is not empty and was not made by kbtui eval")
    home.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(wanted), encoding="utf-8")


# ---------------------------------------------------------------- node


@cli.command()
@click.pass_context
def serve(ctx: click.Context) -> int:
    """Run the node headless: index queued documents until SIGINT/SIGTERM."""
    node = _open_node(ctx)
    configure_logging(node.config.home, to_stderr_level=logging.INFO)
    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())
    with node.pipeline() as runtime:
        log.info("node running (pid %d); stop with Ctrl-C or SIGTERM", os.getpid())
        while not stopping.wait(SERVE_REPORT_INTERVAL_S):
            state = runtime.state()
            counts = catalog.status_counts()
            log.info(
                "queue %d/%d, in flight %d, accepted %d, rejected %d; %s",
                state.queue_depth, state.queue_capacity, state.in_flight, state.accepted, state.rejected,
                ", ".join(f"{k.lower()} {v}" for k, v in sorted(counts.items())) or "no documents",
            )
        log.info("stopping: draining in-flight documents (up to %.0f s)", node.config.shutdown_drain_timeout_s)
    return 0


SERVE_REPORT_INTERVAL_S = 30.0


@cli.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> int:
    """Whether a node runs, its queue, and documents by status."""
    node = _open_node(ctx)
    running = node_running(node.config.home)
    queue = read_node_status(node.config.home) if running else None
    counts = catalog.status_counts()
    if as_json:
        click.echo(json.dumps({"node_running": running, "queue": queue, "documents": counts}, indent=2))
        return 0
    stdout.print(f"node: {'running (pid ' + str(queue['pid']) + ')' if running and queue else 'running' if running else 'not running'}")
    if queue:
        stdout.print(
            f"queue: {queue['queue_depth']}/{queue['queue_capacity']}, in flight {queue['in_flight']}, "
            f"accepted {queue['accepted']}, rejected {queue['rejected']}"
            + (f", paused {queue['paused_for_s']:.0f} s (embedder unavailable)" if queue["paused_for_s"] else "")
        )
    stdout.print("documents: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"))
    return 0


def read_node_status(home: Path) -> dict[str, object] | None:
    try:
        return json.loads((home / STATUS_FILE_NAME).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


# ---------------------------------------------------------------- agent tools: mcp / ask


@cli.command("mcp")
@click.pass_context
def mcp_command(ctx: click.Context) -> int:
    """Serve the knowledge tools (read-only) to a local agent over MCP on stdio.

    Results are fenced as untrusted document data. Connect it only to agents
    whose model runs on this machine: whatever the agent's model is, it reads
    what these tools return.
    """
    from kbtui.tools.mcp_server import serve_stdio

    serve_stdio(_open_node(ctx))
    return 0


@cli.command()
@click.argument("question")
@click.option("-c", "--collection", help="Collection to answer from (default: DEFAULT).")
@click.option("-m", "--model", help="Chat model for this question (default: chat_model from config).")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.pass_context
def ask(ctx: click.Context, question: str, collection: str | None, model: str | None, as_json: bool) -> int:
    """Answer a question with a local chat model that searches the knowledge base.

    Exits 1 when no answer was produced (no reachable chat model, or a cloud
    model without allow_cloud_model_access); plain search results are shown instead.
    """
    from kbtui.tools.ask import answer_question, search_instead

    node = _open_node(ctx)
    collection_id = _existing_collection(collection) if collection else canonical_collection_id(None)
    outcome = answer_question(question, collection_id=collection_id, searcher=node, config=node.config, model=model)
    fallback = search_instead(node, question, collection_id, limit=node.config.search_limit) if outcome.offers_search else None
    if as_json:
        click.echo(json.dumps({
            "status": outcome.status,
            "model": outcome.model,
            "answer": outcome.answer if outcome.answered else None,
            "notice": outcome.notice,
            "tool_calls": outcome.tool_calls,
            "cited": [source_json(s) for s in outcome.cited],
            "consulted": [source_json(s) for s in outcome.consulted],
            "search": None if fallback is None else {"hits": [hit_json(h) for h in fallback.hits], "degraded": fallback.degraded},
        }, indent=2))
        return 0 if outcome.answered else 1
    if not outcome.answered:
        click.echo(f"kbtui: {outcome.notice}", err=True)
        stdout.print("[bold]Search results instead:[/]")
        print_hits(node, collection_id, fallback.hits if fallback else [], question)
        return 1
    stdout.print(escape(outcome.answer))  # the model's text; may span lines
    listed = outcome.cited or outcome.consulted
    if listed:
        stdout.print("\n[bold]Sources[/]" if outcome.cited else "\n[bold]Consulted (not cited)[/]")
    for source in listed:
        label = escape(f"[{source.ref or '-'}]")
        where = f" p.{source.page}" if source.page is not None else ""
        section = f" › {source.section}" if source.section and source.section != source.title else ""
        stdout.print(
            f"  {label} {shown(source.title)}{shown(section)}{where} "
            f"[dim]· {source.document_id[:12]}[/]",
            no_wrap=True, overflow="ellipsis",
        )
    return 0


def source_json(source: Source) -> dict[str, object]:
    """The JSON shape of a cited or consulted source."""
    return {
        "ref": source.ref,
        "collection": source.collection_id,
        "document_id": source.document_id,
        "chunk_id": source.chunk_id,
        "title": source.title,
        "section": source.section,
        "source_path": source.source,
        "page": source.page,
    }


# ---------------------------------------------------------------- repositories


@cli.group()
def repo() -> None:
    """Register local Git repositories for `kbtui import`."""


def repository_json(repository: RegisteredRepository) -> dict[str, object]:
    """The stable JSON shape of a registered repository (documented in README.md)."""
    return {
        "repository_id": repository.id,
        "name": repository.name,
        "root": repository.root,
        "created_at": repository.created_at,
        "last_import_at": repository.last_import_at,
        "last_import_status": repository.last_import_status,
        "document_count": repositories.document_count(repository.id),
    }


@repo.command("add")
@click.argument("path")
@click.option("--name", help="A label to refer to it by (default: the folder name).")
@click.option("--json", "as_json", is_flag=True, help="Print the registration as JSON.")
@click.pass_context
def repo_add(ctx: click.Context, path: str, name: str | None, as_json: bool) -> int:
    """Register PATH, which must be the top level of a Git working tree."""
    node = _open_node(ctx)
    registered = register_repository(node.store, Path(path), name)
    if as_json:
        click.echo(json.dumps(repository_json(registered), indent=2))
    else:
        stdout.print(f"registered {registered.id} {shown(registered.name)}")
    return 0


@repo.command("ls")
@click.option("--json", "as_json", is_flag=True, help="Print registrations as JSON.")
@click.pass_context
def repo_ls(ctx: click.Context, as_json: bool) -> int:
    """List registered repositories."""
    node = _open_node(ctx)
    registered = repositories.list_repositories(node.store)
    if as_json:
        click.echo(json.dumps([repository_json(r) for r in registered], indent=2))
        return 0
    if not registered:
        stdout.print("no repositories")
        return 0
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("ID", "NAME", "ROOT", "DOCUMENTS", "LAST IMPORT"):
        table.add_column(column, no_wrap=column not in ("NAME", "ROOT"))
    for r in registered:
        last = "-" if r.last_import_at is None else (
            f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(r.last_import_at))} {r.last_import_status}"
        )
        table.add_row(
            r.id[:12], shown(r.name), shown(r.root),
            str(repositories.document_count(r.id)), last,
        )
    stdout.print(table)
    return 0


@repo.command("rm")
@click.argument("repository")
@click.option("--purge", is_flag=True, help="Also delete the documents it imported.")
@click.pass_context
def repo_rm(ctx: click.Context, repository: str, purge: bool) -> int:
    """Forget a registration (its documents stay unless --purge)."""
    node = _open_node(ctx)
    registered = repositories.resolve_repository(node.store, repository)
    kept = repositories.document_count(registered.id)
    purged = repositories.unregister_repository(node.store, registered.id, purge_documents=purge)
    detail = f"{purged} document(s) purged" if purge else f"{kept} document(s) kept"
    stdout.print(f"removed repository {registered.id} ({detail})")
    return 0


def _progress(*, disable: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        console=Console(stderr=True), disable=disable or not sys.stderr.isatty(), transient=True,
    )


def index_pending(node: Node, document_ids: Sequence[str], *, quiet: bool) -> list[str]:
    """Index documents an import left Pending (through the pipeline, like
    ``kbtui add``); return the ids that Failed."""
    if document_ids:
        index_and_follow(node, list(document_ids), quiet=quiet)
    return [d.id for d in Document.select(Document.id).where(
        Document.id.in_(list(document_ids)) & (Document.status == "Failed")
    )]


@cli.command("import")
@click.argument("repository")
@click.option("-c", "--collection", help="Collection to import into (default: DEFAULT).")
@click.option("--list", "list_files", is_flag=True, help="Also list every file and its outcome.")
@click.option("--json", "as_json", is_flag=True, help="Print the import report as JSON.")
@click.pass_context
def import_command(ctx: click.Context, repository: str, collection: str | None, list_files: bool, as_json: bool) -> int:
    """Import a registered repository (by id or name): add, update, remove, skip."""
    collection_id = canonical_collection_id(collection)
    node = _open_node(ctx)
    registered = repositories.resolve_repository(node.store, repository)
    limits = ScanLimits(
        max_file_bytes=min(node.config.repository_max_file_bytes, node.config.max_document_bytes),
        max_total_bytes=node.config.repository_max_total_bytes,
    )
    try:
        with _progress(disable=as_json) as progress:
            task = progress.add_task("scanning", total=None)
            report = import_repository(
                node.store, registered.id, collection_id, limits,
                on_progress=lambda done, total: progress.update(task, completed=done, total=total),
            )
    except ImportFailed as failure:
        _print_import_report(failure.report, [], as_json=as_json, list_files=list_files)
        raise
    failed = index_pending(node, report.pending_document_ids, quiet=as_json)
    _print_import_report(report, failed, as_json=as_json, list_files=list_files)
    return 0 if report.completed and not failed else 1


def _print_import_report(report: ImportReport, failed: list[str], *, as_json: bool, list_files: bool) -> None:
    if as_json:
        payload = report.to_json()
        payload["index_failed_document_ids"] = failed
        if not list_files:
            payload.pop("files")
        click.echo(json.dumps(payload, indent=2))
        return
    stdout.print(
        f"repository {report.repository_id[:12]} -> collection {report.collection_id}: "
        f"[bold]{report.status}[/] ({report.listed} listed, {report.elapsed_s:.1f} s)"
    )
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("OUTCOME", "FILES", "SIZE"):
        table.add_column(column, justify="left" if column == "OUTCOME" else "right")
    for label, tally in (("added", report.added), ("updated", report.updated),
                         ("unchanged", report.unchanged), ("removed", report.removed)):
        table.add_row(label, str(tally.count), human_size(tally.bytes))
    skipped_count = sum(t.count for t in report.skipped.values())
    table.add_row("skipped", str(skipped_count), human_size(sum(t.bytes for t in report.skipped.values())))
    for reason, tally in sorted(report.skipped.items()):
        table.add_row(f"  {reason}", str(tally.count), human_size(tally.bytes))
    stdout.print(table)
    if list_files:
        for entry in report.files:
            outcome = entry.outcome if entry.reason is None else f"{entry.outcome}:{entry.reason}"
            stdout.print(f"{outcome:<32} {shown(entry.path)}", no_wrap=True, overflow="ellipsis")
    if report.status == "incomplete":
        stdout.print("[yellow]stopped at the aggregate byte limit: nothing was removed[/]")
    indexed = len(report.pending_document_ids) - len(failed)
    stdout.print(f"{indexed} indexed, {len(failed)} failed")


if __name__ == "__main__":  # pragma: no cover
    main()
