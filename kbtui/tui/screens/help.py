"""``?``: every key that works where you are, and what it does."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Static

from kbtui.tui.widgets.lists import Table

INTRO = (
    "Keyboard only. / searches from anywhere, Esc goes back, q quits, "
    "ctrl+p opens the command palette with every action."
)


def binding_rows(screen: Screen) -> list[tuple[str, str]]:
    """(key, description) for every binding active on ``screen``: the app's and
    the screen's own first (they carry ids), then the focused widget's."""
    ours: list[tuple[str, str]] = []
    widgets: list[tuple[str, str]] = []
    seen: set[str] = set()
    for active in screen.active_bindings.values():
        binding = active.binding
        if not binding.description or binding.description in seen and binding.id is None:
            continue
        row = (screen.app.get_key_display(binding), binding.description)
        (ours if binding.id else widgets).append(row)
        seen.add(binding.description)
    return ours + widgets


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "close", "Close", id="help.close")]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical {
        width: 72; max-width: 100%; height: auto; max-height: 100%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    HelpScreen #help-intro { margin-bottom: 1; }
    HelpScreen DataTable { height: auto; max-height: 18; }
    """

    def __init__(self, for_screen: Screen) -> None:
        super().__init__()
        self.rows = binding_rows(for_screen)
        self.screen_title = for_screen.title or type(for_screen).__name__

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(INTRO), id="help-intro")
            table = Table(id="help-keys", cursor_type="row", show_cursor=False)
            table.add_columns("Key", "Action")
            for key, description in self.rows:
                table.add_row(Text(key, style="bold"), Text(description))
            yield table

    def on_mount(self) -> None:
        self.query_one(Vertical).border_title = "Keys"
        self.query_one(DataTable).focus()

    def action_close(self) -> None:
        self.dismiss(None)
