"""kbtui migrate: move the knowledge base to the other store (SQLite <-> PostgreSQL)."""

from __future__ import annotations

import json

import click

from kbtui.cli.backup import stage_progress
from kbtui.cli.common import cli, shown, stdout
from kbtui.config import Config
from kbtui.node import migrate_store


@cli.command()
@click.option("--to", "target", required=True, metavar="postgresql://...|sqlite:PATH",
              help="Where to copy: a PostgreSQL database (empty), or sqlite:PATH, a new data directory.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.pass_context
def migrate(ctx: click.Context, target: str, as_json: bool) -> int:
    """Copy this knowledge base to the other store, embedding nothing again.

    From SQLite (the data directory) to a PostgreSQL database, or from
    PostgreSQL to sqlite:PATH, a new data directory: documents and their
    history, sections, chunks, vectors, the encrypted sources, registered
    sources and repositories, and the settings file (for a new data
    directory; its database_url left out). The source is never changed. At
    the end the row counts and a sample of searches are checked on both
    sides. Interrupted, even by kill -9, it is run again: the unfinished copy
    is wiped and made again. The target must be empty (or that unfinished
    copy); no node may run meanwhile.
    """
    config: Config = ctx.obj
    with stage_progress(disable=as_json) as progress:
        report = migrate_store(config, target, on_progress=progress)
    if as_json:
        click.echo(json.dumps({
            "target": report.target, "backend": report.backend, "documents": report.documents,
            "chunks": report.chunks, "vectors": report.vectors, "sources": report.blobs,
            "registered_sources": report.sources, "searches_checked": report.searches_checked,
            "restarted": report.restarted, "seconds": round(report.seconds, 3),
        }, indent=2))
        return 0
    stdout.print(
        f"copied to {shown(report.target)}: {report.documents} document(s), {report.chunks} chunk(s), "
        f"{report.vectors} vector(s) (none embedded again), {report.blobs} source(s); counts and "
        f"{report.searches_checked} sample searches match; {report.seconds:.1f} s"
        + (" (an unfinished copy was made again)" if report.restarted else "")
    )
    if report.backend == "postgresql":
        stdout.print("to use it: set KBTUI_DATABASE_URL (or database_url in config.toml) to that database's URL")
    else:
        stdout.print(f"to use it: KBTUI_HOME={shown(report.target)} (and no KBTUI_DATABASE_URL)")
    return 0
