"""A yes/no question before anything destructive."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmScreen(ModalScreen[bool]):
    """Dismisses with True only on an explicit yes (``y`` or the Yes button)."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm.no"),
    ]

    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical {
        width: 64; max-width: 100%; height: auto; border: thick $error; background: $surface; padding: 1 2;
    }
    ConfirmScreen #confirm-question { margin-bottom: 1; }
    ConfirmScreen Horizontal { height: auto; align-horizontal: right; }
    ConfirmScreen Button { margin-left: 1; }
    """

    def __init__(self, question: str, *, yes_label: str = "Yes") -> None:
        super().__init__()
        self.question = question
        self.yes_label = yes_label

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self.question), id="confirm-question")
            with Horizontal():
                yield Button(f"{self.yes_label} (y)", id="confirm-yes", variant="error")
                yield Button("No (n)", id="confirm-no", variant="default")

    def on_mount(self) -> None:
        self.query_one("#confirm-no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm-yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
