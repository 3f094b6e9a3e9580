"""``:`` opens a command line at the bottom, k9s's way: ``:sources``, ``:failures``,
``:q``; Tab completes, the line under it lists what fits, Enter runs it."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Input, Static

from kbtui.tui.commands import COLON_COMMANDS, colon_names, complete_colon, find_colon_command


def matches_text(line: str) -> Text:
    """The commands ``line`` could be, each with what it does (all of them for an empty line)."""
    word = line.strip().lower().partition(" ")[0]
    text = Text(no_wrap=True, overflow="ellipsis")
    fitting = [c for c in COLON_COMMANDS if not word or c.name.startswith(word) or word in c.aliases]
    if not fitting:
        text.append(f"no command {word!r}; Tab completes, Esc closes", style="bold")
        return text
    for index, command in enumerate(fitting):
        if index:
            text.append("  ")
        text.append(command.name, style="bold")
        if len(fitting) <= 2:
            text.append(f" {command.takes}".rstrip() + f": {command.help}")
    return text


class CommandInput(Input):
    """The command line's box: Tab completes the command's name."""

    BINDINGS = [Binding("tab", "complete", "Complete", show=False)]

    def action_complete(self) -> None:
        completed = complete_colon(self.value)
        if completed is not None:
            self.value = completed
            self.cursor_position = len(completed)


class CommandLineScreen(ModalScreen[str | None]):
    """Dismisses with the typed line (None: closed)."""

    BINDINGS = [Binding("escape", "cancel", "Close", id="command_line.close")]

    DEFAULT_CSS = """
    CommandLineScreen { align: left bottom; background: $background 0%; }
    CommandLineScreen > Vertical { height: auto; width: 100%; background: $panel; }
    CommandLineScreen #command-matches { height: 1; padding: 0 1; color: $text-muted; }
    CommandLineScreen #command-line { border: none; height: 1; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(matches_text(""), id="command-matches")
            yield CommandInput(
                placeholder="command (Tab completes, Enter runs, Esc closes)", id="command-line", compact=True,
                suggester=SuggestFromList(colon_names(), case_sensitive=False),
            )

    def on_mount(self) -> None:
        self.query_one(CommandInput).border_title = None
        self.query_one(CommandInput).focus()

    @on(Input.Changed, "#command-line")
    def typed(self, event: Input.Changed) -> None:
        self.query_one("#command-matches", Static).update(matches_text(event.value))

    @on(Input.Submitted, "#command-line")
    def submitted(self, event: Input.Submitted) -> None:
        if not event.value.strip():
            self.dismiss(None)
        elif find_colon_command(event.value) is None:
            self.query_one("#command-matches", Static).update(matches_text(event.value))
        else:
            self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)
