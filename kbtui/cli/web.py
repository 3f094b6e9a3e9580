"""The terminal UI in a browser."""

from __future__ import annotations

import click

from kbtui.cli.common import cli
from kbtui.errors import KbtuiError


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Anything but loopback needs --allow-remote.")
@click.option("--port", type=click.IntRange(1, 65535), default=8023, show_default=True)
@click.option("--allow-remote", is_flag=True, help="Listen on a non-loopback address (the page shows your documents).")
@click.option("--max-sessions", type=click.IntRange(1, 64), default=4, show_default=True,
              help="Browser sessions at once (each runs kbtui on this machine); more are refused.")
@click.pass_context
def web(ctx: click.Context, host: str, port: int, allow_remote: bool, max_sessions: int) -> int:
    """Serve the terminal UI to a browser (textual-serve), on this machine only by default.

    Prints a URL with a one-time token; each browser session runs the UI on
    this machine, as the node or a client of the running node.
    """
    from kbtui.tui.web import is_loopback, serve_web

    if not is_loopback(host) and not allow_remote:
        raise KbtuiError(f"{host} is not a loopback address; pass --allow-remote to serve it beyond this machine")
    return serve_web(host=host, port=port, max_sessions=max_sessions)
