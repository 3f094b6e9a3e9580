"""Search and retrieval evaluation."""

from __future__ import annotations

import collections
import contextlib
import json
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.markup import escape

from kbtui.api.shapes import explain_json, hit_json
from kbtui.cli.common import FiniteFloatRange, cli, existing_collection, open_node, shown, stdout
from kbtui.cli.fast import hidden_note, hits_tsv, quiet_notice, search_json
from kbtui.cli.output import chosen_format, format_option
from kbtui.collections import canonical_collection_id
from kbtui.errors import KbtuiError
from kbtui.retrieval.fusion import FUSION_STRATEGIES
from kbtui.retrieval.results import ALL_COLLECTIONS, EXACT, NONE, RELATED, Hit, MatchSignal
from kbtui.retrieval.snippets import QueryHighlighter, snippet_for

if TYPE_CHECKING:
    from kbtui.node import Node
    from kbtui.retrieval.eval import HybridLoss


def match_json(match: MatchSignal | None) -> dict[str, object] | None:
    """The JSON shape of a response's no-match signal (documented in README.md)."""
    if match is None:
        return None
    return {
        "verdict": match.verdict,
        "lexical": match.lexical,
        "semantic": match.semantic,
        "best_similarity": None if match.best_similarity is None else round(match.best_similarity, 4),
        "similarity_floor": match.similarity_floor,
        "words_together": match.words_together,
    }


# What the operator reads when the search did not simply find its words.
MATCH_NOTICES = {
    RELATED: "no exact matches, showing related passages",
    NONE: "nothing matched",
}


@cli.command()
@click.argument("query")
@click.option("-c", "--collection", help="Collection to search (default: DEFAULT); 'all' searches every collection.")
@click.option("-n", "--limit", type=click.IntRange(1, 200), default=None, help="Number of hits.")
@click.option("-d", "--document", "document", help="Only this document (id or prefix).")
@click.option("--chunks", is_flag=True, help="Every matching chunk (default: each document's best chunk).")
@click.option("--min-score", "min_score", type=FiniteFloatRange(0.0, 1.0), default=None,
              help="Only hits at least this relevant (0..1: similarity in meaning, or share of the query's words).")
@click.option("--neighbors", is_flag=True, help="Also return each hit's neighbouring chunks.")
@click.option("--explain", is_flag=True, help="Show per-arm ranks and scores, the lexical plan and timings.")
@click.option("--json", "as_json", is_flag=True, help="Print hits as JSON.")
@format_option
@click.pass_context
def search(
    ctx: click.Context, query: str, collection: str | None, limit: int | None, document: str | None,
    chunks: bool, min_score: float | None, neighbors: bool, explain: bool, as_json: bool, output_format: str | None,
) -> int:
    """Hybrid search (BM25 + vectors, fused; optionally reranked).

    On a terminal: each hit with its place and a highlighted snippet. In a pipe
    (or --format tsv): a header line and one tab-separated line per hit.
    """
    if document is not None and not document.strip():
        raise KbtuiError("--document: an empty reference; give a document's name, id or id prefix")
    shown_as = chosen_format(output_format, as_json)
    if shown_as == "tsv" and output_format is None and (explain or neighbors):
        shown_as = "table"  # the ranks and neighbours have no columns: they are for reading
    node = open_node(ctx, read_only=True)
    everywhere = collection is not None and collection.strip().lower() == "all"
    if everywhere:
        if document is not None:
            raise click.UsageError("--document needs a collection, not 'all'")
        collection_id = ALL_COLLECTIONS
    else:
        collection_id = existing_collection(node, collection) if collection else canonical_collection_id(None)
    document_id = node.find_document(document, collection_id).document_id if document is not None else None
    response = node.search(
        query, collection_id, limit=limit, document_id=document_id, expand_neighbors=neighbors,
        per_document=not chunks, min_relevance=min_score,
    )
    if shown_as == "json":
        payload: dict[str, object] = {
            "hits": [hit_json(h) for h in response.hits],
            "degraded": response.degraded,
            "elapsed_ms": response.elapsed_ms,
            "match": match_json(response.match),
            "hidden_below_floor": response.hidden,
        }
        if explain:
            payload["explain"] = explain_json(response.explain)
        click.echo(search_json(payload))
        return 0
    if shown_as == "tsv":
        notice = quiet_notice(
            response.degraded, response.match.verdict if response.match is not None else EXACT, response.hidden
        )
        if notice:
            click.echo(f"kbtui: {notice}", err=True)
        unnamed = [h.document_id for h in response.hits if not h.source_path]
        click.echo(hits_tsv([hit_json(h) for h in response.hits], node.display_names(unnamed) if unnamed else {}))
        return 0
    if response.degraded:
        stdout.print(f"[yellow]degraded: {', '.join(response.degraded)}[/]")
    verdict = response.match.verdict if response.match is not None else EXACT
    if verdict in MATCH_NOTICES:
        stdout.print(f"[yellow]{MATCH_NOTICES[verdict]}[/]")
    if explain and response.explain is not None:
        _print_explain(response.explain)
        if response.match is not None:
            _print_match(response.match, response.hidden)
    if verdict != NONE or response.hits:
        print_hits(node, response.hits, query, explain=explain, show_collection=everywhere)
    unit = "chunk" if chunks else "document"
    count = len(response.hits)
    took = f"{count} {unit}{'s' if count != 1 else ''} in {response.elapsed_ms:.0f} ms"
    stdout.print(f"[dim]{took} · {hidden_note(response.hidden)}[/]" if response.hidden else f"[dim]{took}[/]")
    return 0


def print_hits(node: Node, hits: list[Hit], query: str, *, explain: bool = False, show_collection: bool = False) -> None:
    """Hits for the operator: title, origin, score and a highlighted snippet."""
    if not hits:
        stdout.print("no matches")
        return
    # The operator's own terminal may show decrypted names; search results never carry them.
    names = node.display_names([h.document_id for h in hits])
    highlighter = QueryHighlighter.for_query(query)
    for rank, hit in enumerate(hits, start=1):
        title = hit.heading_path or hit.source_path or names.get(hit.document_id, hit.document_id[:12])
        stdout.print(f"[bold]{rank:>2}. {shown(title)}[/]", no_wrap=True, overflow="ellipsis")
        origin = hit.source_path or names.get(hit.document_id, "")
        page = f" · p.{hit.page}" if hit.page is not None else ""
        where = f"{shown(hit.collection_id)} · " if show_collection else ""
        relevance = f" · relevance {hit.relevance:.2f}" if hit.relevance is not None else ""
        stdout.print(
            f"    [dim]{where}{shown(origin)}{page} · {hit.document_id[:12]} · {hit.score_kind} {hit.score:.4f}"
            f"{relevance}[/]",
            no_wrap=True, overflow="ellipsis",
        )
        if explain:
            stdout.print(f"    [dim]{escape(_arm_line(hit))}[/]")
        stdout.print("    " + highlighted_snippet(hit.text, highlighter))
        if hit.more_in_document:
            stdout.print(f"    [dim]+{hit.more_in_document} more in this document[/]")
        for neighbour in hit.neighbors:
            stdout.print(f"      [dim]± {shown(' '.join(neighbour.text.split())[:120])}[/]", no_wrap=True, overflow="ellipsis")


def highlighted_snippet(text: str, query: str | QueryHighlighter) -> str:
    """Rich markup of a short snippet with the words that matched in bold reverse."""
    highlighter = query if isinstance(query, QueryHighlighter) else QueryHighlighter.for_query(query)
    return "".join(
        f"[bold reverse]{shown(s.text)}[/]" if s.highlighted else shown(s.text) for s in snippet_for(text, highlighter)
    )


def _arm_line(hit: Hit) -> str:
    def arm(name: str, rank: int | None, score: float | None) -> str:
        return f"{name} -" if rank is None else f"{name} #{rank} ({score:.4f})"

    line = f"{arm('lexical', hit.lexical_rank, hit.lexical_score)} · {arm('vector', hit.vector_rank, hit.vector_score)}"
    if hit.score_kind == "Rerank" and hit.fusion_rank is not None:
        line += f" · fusion #{hit.fusion_rank}"
    return line


def _print_match(match: MatchSignal, hidden: int) -> None:
    """The verdict's evidence: the best similarity against the model's floor."""
    if match.similarity_floor is None:
        stdout.print(f"[dim]match: {match.verdict}; no similarity floor is known for this model, nothing hidden[/]")
        return
    best = "-" if match.best_similarity is None else f"{match.best_similarity:.2f}"
    together = "" if match.words_together is None else (
        "; one passage holds every content word" if match.words_together else "; no passage holds every content word"
    )
    stdout.print(
        f"[dim]match: {match.verdict}; best similarity {best}, floor {match.similarity_floor:.2f} (calibrated for this "
        f"model: the best of 99 % of real questions is above it, of 98 % of meaningless ones below)"
        f"{together}; "
        f"{hidden} hit{'s' if hidden != 1 else ''} below it hidden[/]"
    )


def _print_explain(explain) -> None:
    plan = explain.lexical_plan
    weight = f" (vector weight {explain.vector_weight:.2f})" if explain.vector_weight is not None else ""
    stdout.print(
        f"[dim]fusion {explain.fusion}{weight}, pool {explain.pool}: {explain.lexical_candidates} lexical + "
        f"{explain.vector_candidates} vector candidates{', reranked' if explain.reranked else ''}[/]"
    )
    if plan is not None:
        ranked = [w if n == 1 else f"{w}×{n}" for w, n in zip(plan.ranked, plan.repeats, strict=True)]
        parts = [f"ranked {', '.join(ranked) or '-'}"]
        if plan.pruned:
            parts.append(f"left out {', '.join(plan.pruned)}")
        if plan.completed:
            parts.append(f"added to the best rows {', '.join(plan.completed)}")
        if plan.exact is not None:
            parts.append("exact BM25" if plan.exact else "BM25 not proven exact")
        if plan.recency:
            parts.append(f"only very common words: newest chunks holding {', '.join(plan.recency)}")
        if plan.missing:
            parts.append(f"not found {', '.join(plan.missing)}")
        stdout.print(f"[dim]lexical: {shown('; '.join(parts))}[/]")
    stdout.print("[dim]" + ", ".join(f"{k.removesuffix('_ms')} {v:.1f} ms" for k, v in explain.timings_ms.items()) + "[/]")




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
@click.option("--no-answer", "no_answer_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="Questions with no answer in the set, one per line: the share that search "
                                 "calls 'nothing matched' is the OFF-TOPIC column.")
@click.option("--per-query", is_flag=True,
              help="Also list the queries where a hybrid row ranks below its better arm (with --json: "
                   "an object with the modes and those queries).")
@click.option("--database-url", "eval_database", metavar="postgresql://...", default=None,
              help="Evaluate on this PostgreSQL database (an empty one, never your own's) instead of "
                   "SQLite in the evaluation's directory.")
@click.pass_context
def eval_command(
    ctx: click.Context, beir_dir: str, provider: str | None, fusions: tuple[str, ...], as_json: bool,
    eval_home: Path | None, no_answer_file: Path | None, per_query: bool, eval_database: str | None,
) -> int:
    """Measure retrieval on a BEIR collection: nDCG@10, Recall@100, MRR, latency.

    Ingests the collection through the real pipeline into a temporary
    knowledge base (your own is not touched), ranks documents by their best
    chunk, and reports lexical-only, vector-only and hybrid search. It runs
    on SQLite even where KBTUI_DATABASE_URL names your PostgreSQL base;
    --database-url gives it a PostgreSQL database of its own.
    """
    import dataclasses

    from rich.table import Table

    from kbtui.node import Node
    from kbtui.retrieval.eval import hybrid_losses, load_beir, load_questions, run_beir
    from kbtui.retrieval.eval_homes import temporary_eval_home

    collection = load_beir(Path(beir_dir))
    off_topic = load_questions(no_answer_file) if no_answer_file is not None else []
    chosen = list(FUSION_STRATEGIES) if "all" in fusions else list(dict.fromkeys(fusions)) or [ctx.obj.search_fusion]
    chosen_provider = provider or ctx.obj.embedding_provider
    if eval_home is not None:
        _claim_eval_home(eval_home, Path(ctx.obj.home), collection.name, chosen_provider)
    if eval_database and ctx.obj.database_url and eval_database.strip() == ctx.obj.database_url.strip():
        raise click.UsageError("--database-url must not be your own knowledge base's database")
    with contextlib.ExitStack() as stack:
        # The temporary knowledge base holds a key and the corpus's text: it must
        # go on SIGTERM too, not only on Ctrl-C (entered first, so it is left last).
        stack.enter_context(_terminate_as_interrupt())
        home = eval_home or stack.enter_context(temporary_eval_home())
        # Never the operator's database: the evaluation's own, or SQLite in its directory.
        config = dataclasses.replace(
            ctx.obj, home=home, embedding_provider=chosen_provider, database_url=(eval_database or "").strip()
        )
        node = Node.open(config)
        try:
            run = run_beir(
                node, collection, fusions=chosen, show_progress=not as_json and sys.stderr.isatty(), off_topic=off_topic
            )
        finally:
            node.close()
    losses = hybrid_losses(run) if per_query else []
    if as_json:
        modes = [r.to_json() for r in run.reports]
        if per_query:
            click.echo(json.dumps({"modes": modes, "hybrid_losses": [dataclasses.asdict(loss) for loss in losses]},
                                  indent=2))
        else:
            click.echo(json.dumps(modes, indent=2))
        return 0 if not run.failed else 1
    stdout.print(
        f"[bold]{escape(collection.name)}[/]: {len(collection.documents)} documents "
        f"({run.indexed} indexed, {run.failed} failed in {run.ingest_s:.0f} s), "
        f"{len(collection.queries)} queries, provider {config.embedding_provider}, "
        f"store {'postgresql' if config.database_url else 'sqlite'}"
    )
    table = Table(box=None, header_style="bold", pad_edge=False)
    columns = ["MODE", "nDCG@10", "R@100", "MRR", "P@10", "NO-ANS", "KEPT", "P50 MS", "P95 MS"]
    if off_topic:
        columns.insert(7, "OFF-TOPIC")
    for column in columns:
        table.add_column(column, justify="left" if column == "MODE" else "right")
    for r in run.reports:
        label = f"hybrid ({r.fusion})" if r.mode == "hybrid" else r.mode
        cells = [label, f"{r.ndcg_at_10:.3f}", f"{r.recall_at_100:.3f}", f"{r.mrr:.3f}", f"{r.precision_at_10:.3f}",
                 f"{r.no_answer_accuracy:.3f}", f"{r.answerable_kept:.3f}", f"{r.p50_ms:.1f}", f"{r.p95_ms:.1f}"]
        if off_topic:
            cells.insert(7, f"{r.off_topic_none or 0.0:.3f}")
        table.add_row(*cells)
    stdout.print(table)
    stdout.print(
        "[dim]R@100: recall at 100. NO-ANS: share of the queries asked without their relevant documents "
        "that search calls 'nothing matched'; KEPT: share of the real queries it does not"
        + ("; OFF-TOPIC: share of the --no-answer questions it calls 'nothing matched'" if off_topic else "")
        + ".[/]"
    )
    for r in run.reports:
        if r.mode == "hybrid":
            stdout.print(
                f"hybrid ({r.fusion}) as shown: {r.relevant_shown:.3f} of the top ten's relevant documents, "
                f"{r.unrelated_hidden:.3f} of the others hidden as unrelated (below the similarity floor)"
            )
    if per_query:
        _print_hybrid_losses(losses, len(collection.queries))
    return 0 if not run.failed else 1


# How many of the worst hybrid losses --per-query lists on the terminal (--json has them all).
LOSSES_LISTED = 30


def _print_hybrid_losses(losses: list[HybridLoss], queries: int) -> None:
    by_fusion = collections.Counter(loss.fusion for loss in losses)
    counts = ", ".join(f"{count} with {fusion}" for fusion, count in by_fusion.items()) or "none"
    stdout.print(f"queries where hybrid ranks below its better arm (of {queries}): {counts}")
    for loss in losses[:LOSSES_LISTED]:
        stdout.print(
            f"{escape(loss.query_id)}  {loss.fusion}: hybrid {loss.hybrid:.3f}, lexical {loss.lexical:.3f}, "
            f"vector {loss.vector:.3f}"
        )
        stdout.print(f"  [dim]{escape(loss.query)}[/]", overflow="ellipsis", no_wrap=True)
    if len(losses) > LOSSES_LISTED:
        stdout.print(f"[dim]... and {len(losses) - LOSSES_LISTED} more (--json lists them all)[/]")


EVAL_HOME_MARKER = "kbtui-eval.json"
# Bumped when eval stores a set differently (2: each BEIR document at its id as source path).
EVAL_HOME_LAYOUT = 2


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt in the main thread, as SIGINT does, so every
    ``finally`` and context manager on the way out runs (the command exits 130).
    Only the first: a repeated SIGTERM does not cut the clean-up short."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread
        return

    def interrupt(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _claim_eval_home(home: Path, own_home: Path, collection: str, provider: str) -> None:
    """Use ``home`` for ``kbtui eval --home`` only if it is empty or was made
    by eval for the same collection and provider (documents indexed with
    another provider would be searched with the wrong vectors)."""
    if home.resolve() == own_home.resolve():
        raise click.UsageError("--home must not be your own knowledge base")
    marker = home / EVAL_HOME_MARKER
    wanted = {"collection": collection, "provider": provider, "layout": EVAL_HOME_LAYOUT}
    if marker.exists():
        try:
            made = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            made = None
        if made != wanted:
            raise click.UsageError(
                f"{home} was made for another collection or provider (or by an older kbtui); use a new directory"
            )
        return
    if home.exists() and any(home.iterdir()):
        raise click.UsageError(f"{home} is not empty and was not made by kbtui eval")
    home.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(wanted), encoding="utf-8")
