"""What every command shares: the click group, the opened node, terminal output."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
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
    ctx.meta[_STDERR_LEVEL] = logging.INFO if verbose else logging.WARNING
    # Nothing is opened or created here (this runs before a subcommand's
    # --help, and before kbtui doctor): the log file comes with open_node.
    _log_to(config, ctx.meta[_STDERR_LEVEL], to_file=False)
    ctx.obj = config
    if ctx.invoked_subcommand is None:
        from kbtui.tui.app import run_app

        return run_app(config)
    return None


_STDERR_LEVEL = "kbtui.stderr_level"

def open_node(ctx: click.Context, *, read_only: bool = False) -> Node:
    """Open the node for this command. A command that only reads opens it
    ``read_only``: it works on a read-only data directory and while another
    process holds the write lock, and never creates the data directory."""
    node = Node.open(ctx.obj, read_only=read_only)
    ctx.call_on_close(node.close)
    # The data directory exists now (a writing open may just have made it).
    _log_to(node.config, ctx.meta.get(_STDERR_LEVEL, logging.WARNING), to_file=True)
    return node


def _log_to(config: Config, stderr_level: int, *, to_file: bool) -> None:
    configure_logging(
        config.home,
        to_stderr_level=stderr_level,
        to_file=to_file,
        file_level=logging.getLevelName(os.environ.get("KBTUI_LOG_LEVEL", "INFO").upper()),
    )


def existing_collection(node: Node, raw: str) -> str:
    """The canonical id of ``raw``, a collection that must exist."""
    collection_id = canonical_collection_id(raw)
    if not node.collection_exists(collection_id):
        known = node.collections()
        raise NotFound("unknown collection; " + (f"known: {', '.join(known)}" if known else "there are none yet"))
    return collection_id


def shown(text: str) -> str:
    """Document-controlled text as inert Rich markup: no markup, no control characters."""
    return escape(printable(text))


def advance(progress: Progress, task: TaskID) -> Callable[[int, int], None]:
    """A progress callback (done, total) for one task of ``progress``."""
    return lambda done, total: progress.update(task, completed=done, total=total)


def progress_bar(*, disable: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        console=Console(stderr=True), disable=disable or not sys.stderr.isatty(), transient=True,
    )
