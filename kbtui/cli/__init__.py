"""The ``kbtui`` command: the TUI with no arguments, headless subcommands otherwise.

Nothing heavy is imported at first: ``kbtui search`` in a pipe or with
``--json`` is answered by a running node before click, rich or the store
load (:mod:`kbtui.cli.fast`); every other command loads the click group.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kbtui.errors import KbtuiError, StoreError

__all__ = ["COMMAND_MODULES", "cli", "main"]


def __getattr__(name: str) -> Any:
    if name == "cli":  # the click group, loaded when asked for
        from kbtui.cli.common import cli

        return cli
    raise AttributeError(name)

# The modules that register subcommands on ``cli`` (kbtui.cli.<module>). Each is
# imported when one of its commands runs (see ``common.Commands``), so `kbtui
# search` through a running node loads the search command and little else.
COMMAND_MODULES = {
    "agents": ("mcp", "ask"),
    "backup": ("backup", "restore", "recover"),
    "documents": ("add", "ls", "show", "rm", "reindex"),
    "migrate": ("migrate",),
    "node": ("serve", "status", "doctor"),
    "nodes": ("nodes",),
    "repositories": ("repo", "import"),
    "search": ("search", "eval"),
    "sources": ("sources", "sync"),
    "web": ("web",),
}

# SQLite's words for a catalog that is damaged or cannot be used; fixed
# strings, never carrying data, so they may be shown.
_DAMAGED_CATALOG = ("database disk image is malformed", "file is not a database", "disk I/O error")
_READ_ONLY_CATALOG = "attempt to write a readonly database"
_UNOPENABLE_CATALOG = "unable to open database file"
_UNWRITABLE_ERRNOS = {errno.EROFS, errno.EACCES, errno.EPERM}


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: maps expected errors to one line and an exit code.

    Exit codes: 1 a document failed, 2 bad input, 3 the data directory or key
    is unsafe, damaged or unusable (nothing was changed).
    """
    # Everything kbtui creates (catalog, sources, logs, status and lock files)
    # is for the owner only, whichever module creates it.
    previous_umask = os.umask(0o077)
    try:
        _run(argv)
    except BrokenPipeError:
        _reader_went_away()
    finally:
        os.umask(previous_umask)  # matters only to a caller in the same process (tests)


def _reader_went_away() -> None:
    """The output's reader closed it (``kbtui search ... | head -1``): that is not a
    failure. Exit 0, quietly; stdout goes to /dev/null so the interpreter's last
    flush cannot complain about the pipe either."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    sys.exit(0)


def _run(argv: list[str] | None) -> None:
    from kbtui.cli.fast import answer_quickly

    quick = answer_quickly(sys.argv[1:] if argv is None else argv)
    if quick is not None:
        sys.exit(quick)
    import click

    from kbtui.cli.common import OutputClosed, cli

    try:
        code = cli.main(args=argv, prog_name="kbtui", standalone_mode=False)
    except OutputClosed:
        _reader_went_away()
    except click.exceptions.Abort:
        click.echo("kbtui: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except Exception as exc:
        problem = _operator_problem(exc)
        if problem is None:
            raise
        _fail(problem)
    sys.exit(code if isinstance(code, int) else 0)


def _operator_problem(exc: Exception) -> KbtuiError | StoreError | None:
    """The one-line error for an expected failure (ours, or a condition of the
    machine or the data directory), or None for a bug. Imported here: the
    storage libraries are not loaded by a command that never needed them."""
    from kbtui.errors import OPERATOR_ERRORS
    from store.errors import is_database_error, storage_problem

    if isinstance(exc, OPERATOR_ERRORS):
        return exc
    if isinstance(exc, OSError) or is_database_error(exc):
        return storage_problem(exc) or _machine_problem(exc)
    return None


def _fail(problem: KbtuiError | StoreError) -> None:
    import click

    click.echo(f"kbtui: {problem.message}", err=True)
    sys.exit(problem.exit_code)


def _machine_problem(exc: BaseException) -> StoreError | None:
    """An operator-facing error for a condition of the data directory, or None."""
    from kbtui.errors import CatalogProblem, DataDirectoryProblem

    if isinstance(exc, OSError):
        where = _inside_data_directory(exc.filename)
        if where is None:
            return None
        reason = os.strerror(exc.errno).lower() if exc.errno else type(exc).__name__
        if exc.errno in _UNWRITABLE_ERRNOS:
            return DataDirectoryProblem(
                f"the data directory cannot be written ({reason}: {where}); read-only commands "
                "(search, ls, show, status, doctor) still work; nothing was changed"
            )
        return DataDirectoryProblem(f"the data directory cannot be used ({reason}: {where}); run kbtui doctor")
    message = str(exc).split("\n")[0]
    if message in _DAMAGED_CATALOG:
        return CatalogProblem(f"the catalog (kb.sqlite3) is damaged ({message}); run kbtui doctor; restore it from a backup")
    if message == _READ_ONLY_CATALOG:
        return DataDirectoryProblem(
            f"the catalog (kb.sqlite3) cannot be written ({message}); read-only commands "
            "(search, ls, show, status, doctor) still work; nothing was changed"
        )
    if message == _UNOPENABLE_CATALOG:
        return CatalogProblem(f"the catalog (kb.sqlite3) cannot be opened ({message}); run kbtui doctor")
    return None


def _inside_data_directory(filename: object) -> str | None:
    """The data directory entry (kb.sqlite3, blobs, logs, ...) that ``filename``
    is in, or None outside it. Only the first component is shown: deeper names
    are document ids and temp files, of no use to an operator."""
    from kbtui.config import kbtui_home

    if not isinstance(filename, (str, bytes, os.PathLike)):
        return None
    home = kbtui_home().absolute()
    path = os.path.abspath(os.fsdecode(filename))
    try:
        relative = os.path.relpath(path, home)
    except ValueError:
        return None
    if relative == ".":
        return str(home)
    if relative.startswith(".."):
        return None
    return relative.split(os.sep)[0]
