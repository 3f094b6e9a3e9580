"""Lists that move the way k9s, lazygit and less do: ``j``/``k`` a row, ``g``/``G``
the first and last, ``ctrl+d``/``ctrl+u`` a page, beside the arrows and PgUp/PgDn.

Every list and table of the UI is one of these, so the keys work wherever
there is a cursor. They are not in the footer (it has no room); ``?`` lists them.
"""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.widgets import DataTable, OptionList, Tree

# (key, action on a table, on an option list, on a tree, what it does)
_MOVES = (
    ("j", "cursor_down", "cursor_down", "cursor_down", "Down"),
    ("k", "cursor_up", "cursor_up", "cursor_up", "Up"),
    ("g", "scroll_top", "first", "scroll_home", "First"),
    ("G", "scroll_bottom", "last", "scroll_end", "Last"),
    ("ctrl+d", "page_down", "page_down", "page_down", "Page down"),
    ("ctrl+u", "page_up", "page_up", "page_up", "Page up"),
)

MOVE_KEYS = frozenset(key for key, *_ in _MOVES)
MOVES_HELP = ("j k  g G  ^d ^u", "move: a row, to the first or last, a page")


class Table(DataTable):
    """A :class:`DataTable` with the list keys."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(key, table_action, label, show=False) for key, table_action, _, _, label in _MOVES
    ]


class Choices(OptionList):
    """An :class:`OptionList` with the list keys."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(key, list_action, label, show=False) for key, _, list_action, _, label in _MOVES
    ]


class Outline(Tree[object]):
    """A :class:`Tree` with the list keys."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(key, tree_action, label, show=False) for key, _, _, tree_action, label in _MOVES
    ]
