"""Agent tools: the MCP server and Ask."""

from __future__ import annotations

import json

import click
from rich.markup import escape

from kbtui.cli.common import cli, existing_collection, open_node, shown, stdout
from kbtui.cli.search import hit_json, print_hits
from kbtui.collections import canonical_collection_id
from kbtui.tools.knowledge import Source


@cli.command("mcp")
@click.pass_context
def mcp_command(ctx: click.Context) -> int:
    """Serve the knowledge tools (read-only) to a local agent over MCP on stdio.

    Results are fenced as untrusted document data. Connect it only to agents
    whose model runs on this machine: whatever the agent's model is, it reads
    what these tools return.
    """
    from kbtui.tools.mcp_server import serve_stdio

    serve_stdio(open_node(ctx, read_only=True, open_now=True))
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

    node = open_node(ctx, read_only=True)
    collection_id = existing_collection(node, collection) if collection else canonical_collection_id(None)
    outcome = answer_question(question, collection_id=collection_id, knowledge=node, config=node.config, model=model)
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
        print_hits(node, fallback.hits if fallback else [], question)
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
