"""How lists look: a table on a terminal, tab-separated lines in a pipe.

A table is for eyes at 80 columns: fixed columns keep their width and only
the name gives way (cut with an ellipsis, never wrapped). In a pipe (or with
``--format tsv``) every row is one line of tab-separated fields, whole ids
and names (made printable, so a tab or newline in a name cannot split a row),
ISO times: ``kbtui ls | grep`` and ``cut -f`` work.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable

import click

FORMATS = ("table", "tsv", "json")


def format_option(function):  # noqa: ANN001, ANN201 - a click decorator
    """``--format table|tsv|json`` (default: a table on a terminal, tsv in a pipe)."""
    return click.option(
        "--format", "output_format", type=click.Choice(FORMATS, case_sensitive=False), default=None,
        help="table (default on a terminal), tsv (default in a pipe: one line per row) or json.",
    )(function)


def chosen_format(output_format: str | None, as_json: bool) -> str:
    """The format to print in: ``--json`` wins, then ``--format``, then the terminal decides."""
    if as_json:
        return "json"
    if output_format:
        return output_format.lower()
    return "table" if sys.stdout.isatty() else "tsv"


def tsv_lines(header: Iterable[str], rows: Iterable[Iterable[object]]) -> str:
    """A header line and one line per row, fields separated by tabs (``-`` for none)."""
    lines = ["\t".join(header)]
    lines += ["\t".join("-" if value is None else str(value) for value in row) for row in rows]
    return "\n".join(lines)


def iso_time(at: float | None) -> str | None:
    """``2026-03-14T09:30:00`` (local time), for tab-separated output."""
    return None if at is None else time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(at))


def readable_time(at: float | None, now: float | None = None) -> str:
    """``2026-03-14 09:30:00 (5 min ago)`` (local time), or ``-``."""
    if at is None:
        return "-"
    now = time.time() if now is None else now
    return f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(at))} ({ago(now - at)})"


def ago(seconds: float) -> str:
    """``just now``, ``5 min ago``, ``3 h ago``, ``12 days ago``."""
    if seconds < 0:
        return "in the future"
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min ago"
    if seconds < 86400 * 2:
        return f"{seconds // 3600:.0f} h ago"
    return f"{seconds // 86400:.0f} days ago"
