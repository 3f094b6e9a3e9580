"""Declared bounds for configuration values, checked whenever a settings object is made.

Each settings dataclass (:class:`kbtui.config.Config`, ``ChunkSettings``,
``ExtractionLimits``) declares its fields with :func:`setting`, which carries
the allowed range or choices as field metadata, and calls
:func:`validate_settings` in ``__post_init__``. So a value from
``config.toml`` of the wrong type or out of range stops the program at load
with one line naming the key and what it accepts, instead of killing an actor
later (``max_in_flight = "abc"``), spinning the chunker (``max_chunk_chars =
0``) or hanging ``add`` (``max_in_flight = 0``).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass
from typing import Any

from kbtui.errors import KbtuiError

CONFIG_FILE_NAME = "config.toml"


class InvalidSetting(KbtuiError, ValueError):
    """A configuration value has the wrong type or is out of its allowed range (exit 2)."""


@dataclass(frozen=True)
class Bounds:
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None


def setting(
    default: Any,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    choices: tuple[str, ...] | None = None,
    secret: bool = False,
) -> Any:
    """A dataclass field with its allowed range (inclusive) or its allowed values;
    a ``secret`` one is left out of the settings object's ``repr``."""
    return dataclasses.field(default=default, repr=not secret, metadata={"bounds": Bounds(minimum, maximum, choices)})


def validate_settings(instance: Any, table: str | None = None) -> None:
    """Check every field of ``instance`` against its type and declared bounds.

    Integers are accepted for float fields (TOML ``30`` for ``30.0``) and
    stored as floats. Fields of other types (paths, nested settings) are left
    to their own checks. Raises :class:`InvalidSetting`.
    """
    hints = _type_hints(type(instance))
    for field in dataclasses.fields(instance):
        kind = hints.get(field.name)
        if kind not in (bool, int, float, str):
            continue
        key = f"{table}.{field.name}" if table else field.name
        bounds: Bounds = field.metadata.get("bounds", Bounds())
        value = getattr(instance, field.name)
        if not _has_type(value, kind):
            raise InvalidSetting(f"{CONFIG_FILE_NAME}: {key} must be {_accepted(kind, bounds)} (got {_kind_of(value)})")
        if kind is float and not isinstance(value, float):
            object.__setattr__(instance, field.name, float(value))
        if not _within(value, bounds):
            got = "another value" if kind is str else repr(value)
            raise InvalidSetting(f"{CONFIG_FILE_NAME}: {key} must be {_accepted(kind, bounds)} (got {got})")


_HINTS: dict[type, dict[str, Any]] = {}


def _type_hints(kind: type) -> dict[str, Any]:
    """The resolved annotations of a settings class (string annotations resolved once per class)."""
    hints = _HINTS.get(kind)
    if hints is None:
        hints = _HINTS[kind] = typing.get_type_hints(kind)
    return hints


def _has_type(value: object, kind: type) -> bool:
    if kind is bool:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False  # True is an int to Python, not to an operator
    if kind is float:
        return isinstance(value, (int, float)) and math.isfinite(value)
    return isinstance(value, kind)


def _within(value: Any, bounds: Bounds) -> bool:
    if bounds.choices is not None and value not in bounds.choices:
        return False
    if bounds.minimum is not None and value < bounds.minimum:
        return False
    return bounds.maximum is None or value <= bounds.maximum


def _accepted(kind: type, bounds: Bounds) -> str:
    if kind is bool:
        return "true or false"
    if bounds.choices is not None:
        return "one of " + ", ".join(f'"{choice}"' for choice in bounds.choices)
    if kind is str:
        return "a string"
    noun = "an integer" if kind is int else "a number"
    low, high = bounds.minimum, bounds.maximum
    if low is not None and high is not None:
        return f"{noun} from {_number(low)} to {_number(high)}"
    if low is not None:
        return f"{noun} of at least {_number(low)}"
    if high is not None:
        return f"{noun} of at most {_number(high)}"
    return noun


def _number(value: float) -> str:
    return f"{value:,}".replace(",", "_") if isinstance(value, int) and abs(value) >= 100_000 else f"{value:g}"


def _kind_of(value: object) -> str:
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__
