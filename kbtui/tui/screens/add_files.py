"""Add files: type a path (Tab completes) or pick one in a directory tree."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DirectoryTree, Static

from kbtui.tui.widgets.path_input import PathInput

HINT = "A file or a directory (every supported file under it). Tab completes, Enter adds, ctrl+t browses."


class AddFilesScreen(ModalScreen[str | None]):
    """Dismisses with the path typed or picked (None: cancelled)."""

    BINDINGS = [
        Binding("escape", "cancel", "Back", id="add.back"),
        Binding("ctrl+t", "toggle_tree", "Browse", id="add.browse"),
    ]

    DEFAULT_CSS = """
    AddFilesScreen { align: center middle; }
    AddFilesScreen > Vertical {
        width: 90%; max-width: 110; height: auto; max-height: 100%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    AddFilesScreen #add-hint { color: $text-muted; height: auto; }
    AddFilesScreen DirectoryTree { height: 14; display: none; }
    AddFilesScreen DirectoryTree.-shown { display: block; }
    """

    def __init__(self, start: Path | None = None) -> None:
        super().__init__()
        self.start = start or Path.cwd()

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(HINT), id="add-hint")
            yield PathInput(placeholder="path to add", id="add-path")
            yield DirectoryTree(self.start, id="add-tree")

    def on_mount(self) -> None:
        self.query_one(Vertical).border_title = "Add documents"
        self.query_one("#add-path", PathInput).focus()

    @on(PathInput.Submitted, "#add-path")
    def submitted(self, event: PathInput.Submitted) -> None:
        if event.value.strip():
            self.dismiss(event.value.strip())

    @on(DirectoryTree.FileSelected)
    def picked_file(self, event: DirectoryTree.FileSelected) -> None:
        self.dismiss(str(event.path))

    @on(DirectoryTree.DirectorySelected)
    def picked_directory(self, event: DirectoryTree.DirectorySelected) -> None:
        field = self.query_one("#add-path", PathInput)
        field.value = str(event.path) + "/"
        field.cursor_position = len(field.value)

    def action_toggle_tree(self) -> None:
        tree = self.query_one("#add-tree", DirectoryTree)
        tree.toggle_class("-shown")
        (tree if tree.has_class("-shown") else self.query_one("#add-path", PathInput)).focus()

    def action_cancel(self) -> None:
        self.dismiss(None)
