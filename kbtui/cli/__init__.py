"""The ``kbtui`` command: the TUI with no arguments, headless subcommands otherwise."""

from __future__ import annotations

import sys

import click
import peewee

from kbtui.cli import agents, documents, node, repositories, search  # noqa: F401 - registers the commands
from kbtui.cli.common import cli
from kbtui.errors import OPERATOR_ERRORS
from store.errors import storage_problem

__all__ = ["cli", "main"]


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: maps expected errors to one line and an exit code."""
    try:
        code = cli.main(args=argv, prog_name="kbtui", standalone_mode=False)
    except OPERATOR_ERRORS as exc:
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
