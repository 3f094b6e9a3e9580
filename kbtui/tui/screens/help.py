"""``?``: every key that works where you are, and what it does."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Static

from kbtui.tui.widgets.lists import MOVE_KEYS, MOVES_HELP, Table

INTRO = "/ searches anywhere, : runs a command (:sources, :q), Esc goes back, ctrl+p: every action."


def binding_rows(screen: Screen) -> list[tuple[str, str]]:
    """(key, description) for every binding active on ``screen``: the app's and
    the screen's own first (they carry ids), then the focused widget's."""
    ours: list[tuple[str, str]] = []
    widgets: list[tuple[str, str]] = []
    seen: set[str] = set()
    moves = False
    for active in screen.active_bindings.values():
        binding = active.binding
        if binding.key in MOVE_KEYS and binding.id is None:
            moves = True  # the list keys: one row for all of them
            continue
        if not binding.description or binding.description in seen and binding.id is None:
            continue
        row = (screen.app.get_key_display(binding), binding.description)
        (ours if binding.id else widgets).append(row)
        seen.add(binding.description)
    return ours + ([MOVES_HELP] if moves else []) + widgets


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "close", "Close", id="help.close")]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical {
        width: 72; max-width: 100%; height: auto; max-height: 100%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    HelpScreen #help-intro { height: auto; }
    HelpScreen DataTable { height: auto; max-height: 100%; }
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
        self.query_one(Vertical).border_title = f"Keys: {self.screen_title}"
        self.query_one(DataTable).focus()
        self.call_after_refresh(self._say_if_it_scrolls)

    def on_resize(self) -> None:
        self.call_after_refresh(self._say_if_it_scrolls)

    def _say_if_it_scrolls(self) -> None:
        """When the keys do not all fit, the frame says so (and how to see the rest)."""
        table = self.query_one(DataTable)
        self.query_one(Vertical).border_subtitle = (
            f"{table.row_count} keys, more below: j/↓ scrolls · Esc closes" if table.max_scroll_y > 0 else "Esc closes"
        )

    def action_close(self) -> None:
        self.dismiss(None)
