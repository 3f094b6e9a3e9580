"""``kbtui nodes``: the nodes of the knowledge base, each with its state and work."""

from __future__ import annotations

import json

import click
from rich.table import Table

from kbtui.api.nodes import COLUMNS, node_cells
from kbtui.api.shapes import node_json
from kbtui.cli.common import cli, open_node, shown, stdout


@cli.command("nodes")
@click.option("--json", "as_json", is_flag=True, help="Print the nodes as JSON.")
@click.pass_context
def nodes_command(ctx: click.Context, as_json: bool) -> int:
    """Every node of the knowledge base: id, host, role, state (alive, stopped, or
    lost: it stopped heartbeating without saying so), when it started, its last
    heartbeat, documents in flight, chunks per second over the last minute and
    its embedding model. On SQLite: this data directory's one node."""
    node = open_node(ctx, read_only=True)
    records = node.nodes()
    if as_json:
        click.echo(json.dumps([node_json(r) for r in records], indent=2))
        return 0
    rows = [tuple(shown(cell) for cell in node_cells(record)) for record in records]
    table = Table(box=None, header_style="bold", pad_edge=False, padding=(0, 1, 0, 0))
    for index, column in enumerate(COLUMNS):
        # Every cell on one line; at 80 columns the model identity gives way first, then a long host name.
        full = max([len(column), *(len(row[index]) for row in rows)])
        keep = None if column == "MODEL" else min(full, 12) if column == "HOST" else full
        table.add_column(column, no_wrap=True, overflow="ellipsis", min_width=keep,
                         justify="right" if column in ("IN FLIGHT", "CHUNKS/S") else "left")
    for row in rows:
        table.add_row(*row)
    stdout.print(table)
    return 0
