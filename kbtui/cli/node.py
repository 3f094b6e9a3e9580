"""The headless node and its status."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time

import click
from rich.console import Console

from actors.events import DocumentReleased, DocumentStatusChanged
from kbtui.api.transport import NodeUnavailable
from kbtui.cli.common import advance, cli, log, open_node, shown, stdout
from kbtui.logs import LogLine, configure_logging
from kbtui.node import PROBLEM, Node, examination_json, examine_data_directory
from kbtui.reasons import INTERRUPTED


@cli.command()
@click.option("--listen", metavar="HOST:PORT",
              help="Also serve the API on this loopback TCP address, with the token in $KBTUI_HOME/api.token.")
@click.pass_context
def serve(ctx: click.Context, listen: str | None) -> int:
    """Run the node headless until SIGINT, SIGTERM or SIGHUP: index queued documents,
    keep the sources in sync (rescanned at start, then watched) and serve
    the local API (on the socket api.sock in the data directory)."""
    from kbtui.api.server import ApiServer, parse_listen

    listen_at = parse_listen(listen) if listen else None
    node = open_node(ctx, local=True)
    configure_logging(
        node.config.home, to_stderr_level=logging.INFO,
        file_level=logging.getLevelName(os.environ.get("KBTUI_LOG_LEVEL", "INFO").upper()),
    )
    stopping = threading.Event()
    # SIGHUP too: an SSH disconnect sends it, and it must drain, not kill.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda *_: stopping.set())
    api = ApiServer(node, listen=listen_at)
    try:
        with node.pipeline(listeners=[api.relay], watch=True) as runtime:
            api.start(runtime)
            log.info("node running (pid %d); stop with Ctrl-C, SIGTERM or SIGHUP", os.getpid())
            while not stopping.wait(SERVE_REPORT_INTERVAL_S):
                state = runtime.state()
                counts = node.status().counts
                log.info(
                    "queue %d/%d, in flight %d, accepted %d, rejected %d; %s",
                    state.queue_depth, state.queue_capacity, state.in_flight, state.accepted, state.rejected,
                    ", ".join(f"{k.lower()} {v}" for k, v in sorted(counts.items())) or "no documents",
                )
            # The API first: clients fall back to the catalog while the pipeline drains.
            api.stop()
            log.info("stopping: draining in-flight documents (up to %.0f s)", node.config.shutdown_drain_timeout_s)
    finally:
        api.stop()
    return 0


SERVE_REPORT_INTERVAL_S = 30.0


@cli.command()
@click.option("--json", "as_json", is_flag=True)
@click.option("-f", "--follow", is_flag=True,
              help="Then print the running node's events as they happen, until it stops (with --json: JSON lines).")
@click.pass_context
def status(ctx: click.Context, as_json: bool, follow: bool) -> int:
    """Whether a node runs, its queue, and documents by status."""
    node = open_node(ctx, read_only=True)
    state = node.status()
    running, queue, counts = state.running, state.published, state.counts
    if as_json:
        payload = {"node_running": running, "queue": queue, "documents": counts, "interrupted": state.interrupted}
        click.echo(json.dumps(payload) if follow else json.dumps(payload, indent=2))
    else:
        if running:
            stdout.print(f"node: running (pid {queue['pid']})" if queue else "node: running")
        else:
            stdout.print("node: not running")
        if queue:
            stdout.print(_queue_line(queue))
        stdout.print("documents: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"))
        if state.interrupted:
            stopped = ", ".join(f"{k} {v}" for k, v in sorted(state.interrupted.items()))
            stdout.print(f"[yellow]interrupted[/]: {stopped} ({INTERRUPTED})")
    if follow and running:
        _follow_events(node, as_json=as_json)
    return 0


def _by_node(event: DocumentStatusChanged) -> str:
    """`` · node 1a2b3c4d``: the node that did the work (many nodes may share the store)."""
    return f" · node {shown(event.node[:8])}" if event.node else ""


def _queue_line(queue: dict) -> str:
    return (
        f"queue: {queue['queue_depth']}/{queue['queue_capacity']}, in flight {queue['in_flight']}, "
        f"accepted {queue['accepted']}, rejected {queue['rejected']}"
        + (f", paused {queue['paused_for_s']:.0f} s (embedder unavailable)" if queue["paused_for_s"] else "")
    )


def _follow_events(node: Node, *, as_json: bool) -> None:
    """The node's events, one line each, until it stops (the event stream, not a poll).
    A document that failed is named (its path, or its name), as every failure line is."""
    home = node.config.home
    from kbtui.api.client import follow_events, unix_endpoint
    from kbtui.api.events import event_json

    events = follow_events(unix_endpoint(home))
    try:
        next(events)  # the queue as it stands: just printed
    except (NodeUnavailable, StopIteration):
        # e.g. the pipeline of a `kbtui add` that found no node: it serves no API.
        click.echo("kbtui: the running node serves no event stream (only kbtui serve and the TUI do)", err=True)
        return
    try:
        for event in events:
            if as_json:
                click.echo(json.dumps({"event": event.name, **event_json(event)}), nl=True)
                continue
            stamp = time.strftime("%H:%M:%S")
            if event.name == "admission_changed":
                stdout.print(f"{stamp} {_queue_line(event_json(event))}")
            elif isinstance(event, DocumentStatusChanged) and event.status == "Failed":
                found = node.documents(document_ids=[event.document_id])
                name = (found[0].source_path or found[0].name) if found else "-"
                stdout.print(f"{stamp} [red]failed[/] {shown(name)} ({event.document_id[:12]}) {event.reason or '-'} · "
                             f"{event.collection_id}{_by_node(event)}")
            elif isinstance(event, DocumentStatusChanged):
                reason = f" ({event.reason})" if event.reason else ""
                stdout.print(f"{stamp} document {event.document_id[:12]} {event.status}{reason} · {event.collection_id}"
                             f"{_by_node(event)}")
            elif isinstance(event, DocumentReleased):
                stdout.print(f"{stamp} document {event.document_id[:12]} back to the queue ({event.reason})")
            elif isinstance(event, LogLine):
                stdout.print(f"{time.strftime('%H:%M:%S', time.localtime(event.at))} {event.level} "
                             f"{event.logger}: {shown(event.message)}", no_wrap=True, overflow="ellipsis")
    except NodeUnavailable:
        pass
    if as_json:
        click.echo(json.dumps({"event": "node_stopped"}))
    else:
        stdout.print("node: stopped")


_SEVERITY_LABEL = {
    PROBLEM: "[bold red]PROBLEM[/]", "warning": "[yellow]warning[/]", "note": "[dim]note   [/]", "ok": "[green]ok     [/]",
}


_SOURCE_PROBLEM = {
    "missing": "missing", "bad_header": "damaged header", "failed_authentication": "fails authentication",
    "unreadable": "cannot be read", "other_bytes": "other bytes than the catalog recorded",
}


@cli.command()
@click.option("--quick", is_flag=True, help="Only check that each source is there with a blob header (no decryption).")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
@click.option("--upgrade-blobs", is_flag=True,
              help="First give every source stored in the old format its sealed label (kbtui recover needs it); writes.")
@click.pass_context
def doctor(ctx: click.Context, quick: bool, as_json: bool, upgrade_blobs: bool) -> int:
    """Check the data directory: catalog, key, permissions, sources, vector index.

    Decrypts and authenticates every encrypted source (--quick: only checks
    that each is there). Says what is wrong and what to do; changes nothing
    (except with --upgrade-blobs). Exits 0 when the directory is healthy, 3
    when it has a problem that must be fixed first (a damaged source included).
    """
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    upgraded = None
    if upgrade_blobs:
        from kbtui.cli.backup import run_blob_upgrade

        upgraded = run_blob_upgrade(ctx.obj, as_json=as_json)
    with Progress(
        TextColumn("[bold]authenticating sources"), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
        console=Console(stderr=True), disable=quick or not sys.stderr.isatty(), transient=True,
    ) as progress:
        task = progress.add_task("authenticating", total=None)
        found = examine_data_directory(ctx.obj, quick=quick, progress=advance(progress, task))
    if as_json:
        click.echo(json.dumps({**examination_json(found), **({"upgrade": upgraded} if upgraded else {})}, indent=2))
    else:
        stdout.print(f"data directory: {shown(str(found.home))}")
        for finding in found.findings:
            line = f"  {_SEVERITY_LABEL.get(finding.severity, finding.severity)} {finding.area}: {shown(finding.message)}"
            if finding.action:
                line += f" [dim]→ {shown(finding.action)}[/]"
            stdout.print(line)
        if found.damaged:
            stdout.print("documents whose source is damaged:")
        for damaged in found.damaged:
            stdout.print(
                f"  {shown(damaged.name)} [dim]· {damaged.document_id[:12]}[/] "
                f"{_SOURCE_PROBLEM.get(damaged.problem, damaged.problem)}"
            )
        problems = sum(1 for f in found.findings if f.severity == PROBLEM)
        stdout.print("healthy" if found.healthy else f"{problems} problem(s): fix them before using this data directory")
    return 0 if found.healthy else 3
