"""The command palette (ctrl+p): every action of the app, built from current state."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

from kbtui.reads import Status

if TYPE_CHECKING:
    from kbtui.tui.app import KbtuiApp


@dataclass(frozen=True)
class PaletteCommand:
    title: str
    help: str
    run: Callable[[], object]


def palette_commands(app: KbtuiApp) -> list[PaletteCommand]:
    """What the palette offers right now (the selected document, known collections, ...)."""
    commands = [
        PaletteCommand("Search", "Search the active collection (/)", app.action_focus_search),
        PaletteCommand("Documents", "Show the documents list", app.action_show_documents),
        PaletteCommand("Add files", "Add a file or every supported file under a directory (a)", app.action_add_files),
        PaletteCommand("Reindex all documents", "Run ingestion again for the whole collection (R)", app.confirm_reindex_all),
        PaletteCommand("Sources", "Folders, files and Git repositories: add, sync, watch (i)", app.action_sources),
        PaletteCommand("Failures", "Failed documents, why each failed, retry (x)", app.show_failures),
        PaletteCommand("Ask a question", "Answer from the knowledge base with a local chat model (k)", app.action_ask),
        PaletteCommand("Switch collection", "Pick or create a collection (c)", app.action_switch_collection),
        PaletteCommand("Toggle explain", "Show why each search hit ranked (ctrl+r on Search)", app.action_toggle_explain),
        PaletteCommand("Keys", "List every key binding (?)", app.action_help),
        PaletteCommand("Quit", "Stop the node (if this is it) and leave (q)", app.action_quit),
    ]
    for status in (None, *(s.value for s in Status)):
        label = status or "all"
        commands.append(
            PaletteCommand(f"Show {label} documents", "Filter the documents list by status (f)",
                           partial(app.filter_documents, status))
        )
    for collection_id in app.known_collections:
        if collection_id != app.collection_id:
            commands.append(
                PaletteCommand(f"Use collection {collection_id}", "Switch the active collection",
                               partial(app.switch_collection, collection_id))
            )
    selected = app.focused_document()
    if selected is not None:
        document_id, name = selected
        commands += [
            PaletteCommand(f"Open document {name}", "Metadata, history, sections, chunks (Enter)",
                           partial(app.open_document, document_id)),
            PaletteCommand(f"Reindex document {name}", "Run ingestion again for this document (r)",
                           partial(app.reindex_documents, [document_id])),
            PaletteCommand(f"Delete document {name}", "Delete it, after a confirmation (d)",
                           partial(app.confirm_delete, document_id, name)),
        ]
    return commands


class KbtuiCommands(Provider):
    """Offers :func:`palette_commands`, fuzzy-matched on the title."""

    async def discover(self) -> Hits:
        for command in palette_commands(self.app):  # type: ignore[arg-type]
            yield DiscoveryHit(command.title, command.run, help=command.help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for command in palette_commands(self.app):  # type: ignore[arg-type]
            score = matcher.match(command.title)
            if score > 0:
                yield Hit(score, matcher.highlight(command.title), command.run, help=command.help)
