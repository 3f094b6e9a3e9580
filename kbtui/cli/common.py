"""What every command shares: the click group, the opened node, terminal output."""

from __future__ import annotations

import importlib
import logging
import math
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import click
from rich.console import Console
from rich.markup import escape

from kbtui.collections import canonical_collection_id
from kbtui.config import Config
from kbtui.errors import NotFound
from kbtui.logs import configure_logging
from kbtui.printable import printable

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from kbtui.node import Node

stdout = Console(highlight=False, soft_wrap=False)
log = logging.getLogger("kbtui.cli")


class OutputClosed(Exception):
    """The reader of the output closed it (``kbtui ls | head -1``). Not an OSError:
    click would turn that into exit code 1, which means a document failed."""


class FiniteFloatRange(click.FloatRange):
    """A number in a range; NaN and the infinities are refused (NaN compares
    false with any bound, so click's own range lets it through)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class Commands(click.Group):
    """Subcommands load with their module when one is used (the modules are
    listed in ``kbtui.cli.COMMAND_MODULES``): a command pays only for its own imports."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as gone:
            raise OutputClosed from gone

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            from kbtui.cli import COMMAND_MODULES

            owners = [m for m, names in COMMAND_MODULES.items() if cmd_name in names] or list(COMMAND_MODULES)
            for module in owners:
                importlib.import_module(f"kbtui.cli.{module}")
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        from kbtui.cli import COMMAND_MODULES

        for module in COMMAND_MODULES:
            importlib.import_module(f"kbtui.cli.{module}")
        return super().list_commands(ctx)


@click.group(cls=Commands, invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", is_flag=True, help="Also print informational log lines to stderr.")
@click.option("--ascii", "ascii_only", is_flag=True,
              help="Terminal UI: draw with ASCII only (the default where the locale is not UTF-8 or TERM is linux).")
@click.option("--version", "show_version", is_flag=True, is_eager=True,
              help="Show the version, the catalog schema version and the embedding model's identity.")
@click.pass_context
def cli(ctx: click.Context, verbose: bool, ascii_only: bool, show_version: bool) -> int | None:
    """An offline knowledge base: add documents, search them, from a terminal.

    With no command, opens the terminal UI. Data lives in $KBTUI_HOME
    (default: the platform user-data directory).
    """
    config = Config.load()
    if show_version:
        from kbtui.node import version_facts

        facts = version_facts(config)
        click.echo(f"kbtui {facts.version}\ncatalog schema {facts.schema_version}\n"
                   f"embedding model {facts.model_identity}")
        ctx.exit(0)
    ctx.meta[_STDERR_LEVEL] = logging.INFO if verbose else logging.WARNING
    # Nothing is opened or created here (this runs before a subcommand's
    # --help, and before kbtui doctor): the log file comes with open_node.
    _log_to(config, ctx.meta[_STDERR_LEVEL], to_file=False)
    ctx.obj = config
    if ctx.invoked_subcommand is None:
        from kbtui.tui.app import run_app

        return run_app(config, ascii_only=ascii_only or None)
    return None


_STDERR_LEVEL = "kbtui.stderr_level"


def open_node(ctx: click.Context, *, read_only: bool = False, local: bool = False, open_now: bool = False) -> Node:
    """The node's use cases for this command: through the running node when one
    answers on its socket (warm search, the node's own queue), in-process when
    none does (:class:`kbtui.api.proxy.NodeProxy`); the output is the same.

    A command that only reads opens the in-process node ``read_only``: it
    works on a read-only data directory and while another process holds the
    write lock, and never creates the data directory. ``local`` (``kbtui
    serve``) never goes through another node; neither does any command with
    ``KBTUI_NODE_API=off``. ``open_now`` opens the in-process node at once
    even when a node answers (a long-running command, ``kbtui mcp``, checks the
    data directory and starts its log before it serves).
    """
    stderr_level = ctx.meta.get(_STDERR_LEVEL, logging.WARNING)

    def open_here() -> Node:
        from kbtui.node import Node

        node = Node.open(ctx.obj, read_only=read_only)
        # The data directory exists now (a writing open may just have made it).
        _log_to(node.config, stderr_level, to_file=True)
        return node

    if local or os.environ.get(NODE_API_ENV, "").strip().lower() in ("0", "off", "no", "false"):
        node = open_here()
    else:
        from kbtui.api.proxy import NodeProxy

        proxy = NodeProxy(ctx.obj, open_here)
        if open_now:
            proxy.local()
        node = cast("Node", proxy)  # it offers Node's methods, wherever each runs
    ctx.call_on_close(node.close)
    return node


NODE_API_ENV = "KBTUI_NODE_API"


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
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        console=Console(stderr=True), disable=disable or not sys.stderr.isatty(), transient=True,
    )
