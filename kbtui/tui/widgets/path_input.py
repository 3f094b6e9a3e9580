"""Shell-like completion for a path typed into an Input: the first entry that
starts with what was typed; Tab (the Input's cursor-right at the end) takes it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from textual.binding import Binding
from textual.suggester import Suggester
from textual.widgets import Input

MAX_ENTRIES_LOOKED_AT = 2000


def complete_path(value: str) -> str | None:
    """The completion of ``value`` (a path being typed), or None.

    Directories complete with a trailing ``/`` so typing can go on; hidden
    entries are offered only when the typed part starts with a dot.
    """
    if not value:
        return None
    expanded = os.path.expanduser(value)
    if os.sep in expanded:
        directory, partial = expanded.rsplit(os.sep, 1)
        folder = Path(directory or os.sep)
    else:
        folder, partial = Path("."), expanded
    show_hidden = partial.startswith(".")
    candidates: list[tuple[str, bool]] = []
    try:
        with os.scandir(folder) as entries:
            for index, entry in enumerate(entries):
                if index >= MAX_ENTRIES_LOOKED_AT:
                    break
                if entry.name.startswith(partial) and (show_hidden or not entry.name.startswith(".")):
                    candidates.append((entry.name, entry.is_dir()))
    except OSError:
        return None
    for name, is_dir in sorted(candidates):
        completed = value + name[len(partial):] + (os.sep if is_dir else "")
        if completed != value:
            return completed
    return None


class PathSuggester(Suggester):
    """Suggests the completion of a file-system path (read in a thread)."""

    def __init__(self) -> None:
        super().__init__(use_cache=False, case_sensitive=True)

    async def get_suggestion(self, value: str) -> str | None:
        return await asyncio.to_thread(complete_path, value)


class PathInput(Input):
    """An Input for a path: completes as you type; Tab takes the completion
    (and moves focus on, as usual, when there is none)."""

    BINDINGS = [Binding("tab", "complete", "Complete", show=False)]

    def __init__(self, value: str = "", *, placeholder: str = "", id: str | None = None) -> None:
        super().__init__(value, placeholder=placeholder, suggester=PathSuggester(), id=id)

    def action_complete(self) -> None:
        # Completed from what is typed now, not from the last suggestion shown:
        # that one may answer an older value (it is read in a thread) and would
        # drop the characters typed since.
        completed = complete_path(self.value) if self.cursor_at_end else None
        if completed is not None:
            self.value = completed
            self.cursor_position = len(completed)
        else:
            self.screen.focus_next()
