"""IN-lists that fit SQLite's limit on bound parameters: every statement of the
store that takes a list of ids takes it in these batches."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sized
from typing import TypeVar

# SQLite before 3.32 allowed 999 parameters in one statement (later ones allow
# 32766); a batch leaves room for the statement's other parameters.
MAX_BATCH = 500

T = TypeVar("T")


def id_batches(ids: Iterable[T], size: int = MAX_BATCH) -> Iterator[list[T]]:
    """``ids`` in order, in lists of at most ``size``."""
    remaining = iter(ids)
    while batch := list(itertools.islice(remaining, size)):
        yield batch


def placeholders(batch: Sized) -> str:
    """``?, ?, ?``: one parameter per item of ``batch``, for an IN-list."""
    return ", ".join("?" * len(batch))
