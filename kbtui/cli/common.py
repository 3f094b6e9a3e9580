"""What every command shares: the click group, the opened node, terminal output."""

from __future__ import annotations

import logging
import os
import sys

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)

from kbtui.collections import canonical_collection_id
from kbtui.config import Config
from kbtui.errors import NotFound
from kbtui.logs import configure_logging
from kbtui.node import Node
from kbtui.printable import printable

stdout = Console(highlight=False, soft_wrap=False)
log = logging.getLogger("kbtui.cli")


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
        from kbtui.tui.app import run_app

        return run_app(config)
    return None


def open_node(ctx: click.Context) -> Node:
    node = Node.open(ctx.obj)
    ctx.call_on_close(node.close)
    return node


def existing_collection(node: Node, raw: str | None) -> str | None:
    """The canonical id of a collection that exists (None when not given)."""
    if raw is None:
        return None
    collection_id = canonical_collection_id(raw)
    if not node.collection_exists(collection_id):
        raise NotFound("unknown collection")
    return collection_id


def shown(text: str) -> str:
    """Document-controlled text as inert Rich markup: no markup, no control characters."""
    return escape(printable(text))


def progress_bar(*, disable: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        console=Console(stderr=True), disable=disable or not sys.stderr.isatty(), transient=True,
    )
