"""The command palette (ctrl+p), built from current state, and the ``:`` command
line's table of commands (k9s's habit: ``:sources``, ``:failures``, ``:q``)."""

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
        PaletteCommand("Nodes", "Every node of the knowledge base: state, heartbeat, work (M)", app.action_nodes),
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


# ---------------------------------------------------------------- the : command line


@dataclass(frozen=True)
class ColonCommand:
    """One ``:`` command: its name, other names, what it does, and how (given the
    app and what was typed after the name)."""

    name: str
    help: str
    run: Callable[[KbtuiApp, str], object]
    aliases: tuple[str, ...] = ()
    takes: str = ""  # what may follow the name, for the help (e.g. "NAME")


def _documents(app: KbtuiApp, argument: str) -> None:
    app.action_show_documents()
    if argument:
        app.documents_screen.filter_names(argument)


def _search(app: KbtuiApp, argument: str) -> None:
    app.action_focus_search()
    if argument:
        app.search_for(argument)


def _collection(app: KbtuiApp, argument: str) -> None:
    if argument:
        app.switch_collection_named(argument)
    else:
        app.action_switch_collection()


# The table the command line reads.
COLON_COMMANDS: tuple[ColonCommand, ...] = (
    ColonCommand("documents", "the documents list (a word: filter names)", _documents, ("docs", "ls"), "[WORDS]"),
    ColonCommand("search", "search (the words after it: search them)", _search, ("s",), "[WORDS]"),
    ColonCommand("sources", "folders, files and repositories", lambda app, _: app.action_sources(), ("src",)),
    ColonCommand("nodes", "every node of the knowledge base", lambda app, _: app.action_nodes()),
    ColonCommand("failures", "failed documents, why, retry", lambda app, _: app.show_failures(), ("failed",)),
    ColonCommand("events", "the node's log lines, live (on the documents list)", lambda app, _: app.show_events(),
                 ("logs", "log")),
    ColonCommand("collection", "switch collection (a name: to it)", _collection, ("c", "col"), "[NAME]"),
    ColonCommand("ask", "ask a question with a local chat model", lambda app, _: app.action_ask()),
    ColonCommand("theme", "change the theme", lambda app, _: app.action_change_theme()),
    ColonCommand("help", "the keys", lambda app, _: app.action_help(), ("keys", "?")),
    ColonCommand("quit", "stop the node (if this is it) and leave", lambda app, _: app.call_later(app.action_quit),
                 ("q", "q!", "exit")),
)


def colon_names(commands: tuple[ColonCommand, ...] = COLON_COMMANDS) -> list[str]:
    """Every name and alias, for completion."""
    return [name for command in commands for name in (command.name, *command.aliases)]


def find_colon_command(
    line: str, commands: tuple[ColonCommand, ...] = COLON_COMMANDS
) -> tuple[ColonCommand, str] | None:
    """The command ``line`` names (a whole name or alias, else a prefix of exactly
    one command's name) and what follows it; None when it names none or several."""
    word, _, argument = line.strip().lstrip(":").partition(" ")
    word = word.lower()
    if not word:
        return None
    for command in commands:
        if word == command.name or word in command.aliases:
            return command, argument.strip()
    started = [c for c in commands if c.name.startswith(word)]
    return (started[0], argument.strip()) if len(started) == 1 else None


def complete_colon(line: str, commands: tuple[ColonCommand, ...] = COLON_COMMANDS) -> str | None:
    """``line`` with its command name completed (the longest common start of the
    names it begins), or None when nothing longer fits."""
    word = line.strip().lower()
    if " " in word:
        return None
    names = sorted(n for n in colon_names(commands) if n.startswith(word) and n != word)
    if not names:
        return None
    common = names[0]
    for name in names[1:]:
        while not name.startswith(common):
            common = common[:-1]
    if len(names) == 1:
        return common + " "
    return common if len(common) > len(word) else None
