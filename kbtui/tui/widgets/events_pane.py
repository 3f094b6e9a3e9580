"""The events pane: the node's log lines, live, under the documents list (``l``).

Fed by the app with :class:`kbtui.logs.LogLine` values: this process's own
lines when it runs the node, the running node's event stream when it is a
client. The lines are the log file's (content-free by the log rule); the
pane keeps the last few hundred.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable

from rich.text import Text
from textual.widgets import RichLog

from kbtui.logs import LogLine
from kbtui.printable import printable

KEPT_LINES = 500
# Whole ids (32 hex digits) are shown as the rest of the UI shows them: their first 12.
_WHOLE_ID = re.compile(r"\b([0-9a-f]{12})[0-9a-f]{20}\b")
LEVEL_STYLES = {"WARNING": "yellow", "ERROR": "bold red", "CRITICAL": "bold red"}


def log_line_text(line: LogLine) -> Text:
    """``09:30:01 WARNING actors.embedder: embedding provider unavailable …``, one screen line."""
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(time.strftime("%H:%M:%S", time.localtime(line.at)), style="dim")
    text.append(f" {line.level:<7} ", style=LEVEL_STYLES.get(line.level, "dim"))
    text.append(f"{line.logger.removeprefix('kbtui.')}: ", style="dim")
    text.append(_WHOLE_ID.sub(r"\1", printable(line.message)))
    return text


class EventsPane(RichLog):
    """The last :data:`KEPT_LINES` log lines, newest at the bottom."""

    DEFAULT_CSS = """
    EventsPane { height: 8; border-top: solid $primary; background: $surface; padding: 0 1; display: none;
                 overflow-x: hidden; }
    EventsPane.-shown { display: block; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, max_lines=KEPT_LINES, wrap=False, markup=False, highlight=False, auto_scroll=True)

    def add_lines(self, lines: Iterable[LogLine]) -> None:
        for line in lines:
            self.write(log_line_text(line))
