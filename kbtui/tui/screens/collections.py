"""Switch the active collection, or start a new one by name."""

from __future__ import annotations

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from kbtui.collections import canonical_collection_id
from kbtui.errors import InvalidCollection
from kbtui.tui.widgets.lists import Choices


class CollectionsScreen(ModalScreen[str | None]):
    """Dismisses with the chosen canonical collection id (None: unchanged)."""

    BINDINGS = [Binding("escape", "cancel", "Back", id="collections.back")]

    DEFAULT_CSS = """
    CollectionsScreen { align: center middle; }
    CollectionsScreen > Vertical {
        width: 60; max-width: 100%; height: auto; max-height: 100%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    CollectionsScreen OptionList { height: auto; max-height: 12; }
    CollectionsScreen #collections-problem { color: $error; height: auto; }
    """

    def __init__(self, collections: list[str], current: str) -> None:
        super().__init__()
        self.collections = sorted(set(collections) | {current})
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Choices(
                *[Option(Text(("● " if c == self.current else "  ") + c), id=c) for c in self.collections],
                id="collections-list",
            )
            yield Input(placeholder="type a new collection name, or ↑/↓ to pick one", id="collections-new", compact=True)
            yield Static("", id="collections-problem")

    def on_mount(self) -> None:
        self.query_one(Vertical).border_title = "Collections"
        options = self.query_one(OptionList)
        options.highlighted = self.collections.index(self.current)
        # Typing goes to the name box (typed text is never dropped); the arrows
        # move the highlight in the list; Enter on an empty box picks it.
        self.query_one("#collections-new", Input).focus()

    def on_key(self, event: events.Key) -> None:
        options = self.query_one(OptionList)
        box = self.query_one("#collections-new", Input)
        if box.has_focus and event.key in ("up", "down"):
            options.action_cursor_up() if event.key == "up" else options.action_cursor_down()
            event.stop()
        elif options.has_focus and event.is_printable and event.character:
            box.focus()
            box.insert_text_at_cursor(event.character)
            event.stop()

    @on(OptionList.OptionSelected, "#collections-list")
    def chose(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    @on(Input.Submitted, "#collections-new")
    def typed(self, event: Input.Submitted) -> None:
        if not event.value.strip():
            options = self.query_one(OptionList)
            if options.highlighted is not None:
                self.dismiss(self.collections[options.highlighted])
            return
        try:
            self.dismiss(canonical_collection_id(event.value))
        except InvalidCollection as problem:
            self.query_one("#collections-problem", Static).update(Text(problem.message))

    def action_cancel(self) -> None:
        self.dismiss(None)
