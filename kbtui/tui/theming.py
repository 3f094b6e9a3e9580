"""Themes from files: TOML theme files in the ``themes`` package (shipped, read
as package data) and in ``$KBTUI_HOME/themes/`` (the operator's own),
validated before registration.

A broken file never stops the app: it comes back as a :class:`ThemeProblem`
for the UI to show as a notification.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from textual.color import Color, ColorParseError
from textual.theme import Theme

DEFAULT_THEME = "kbtui-dark"
THEME_SUFFIX = ".toml"
COLOR_FIELDS = (
    "primary", "secondary", "warning", "error", "success", "accent",
    "foreground", "background", "surface", "panel", "boost",
)
OTHER_FIELDS = ("name", "dark", "luminosity_spread", "text_alpha", "variables")
MAX_THEME_FILE_BYTES = 64 * 1024


class ThemeFileInvalid(ValueError):
    """A theme file that cannot be used; the message says why (never the content)."""


@dataclass(frozen=True)
class ThemeProblem:
    file_name: str
    reason: str


def bundled_theme_dir() -> Traversable:
    """The shipped themes: the ``themes`` package's files, wherever it is installed."""
    return files("themes")


def theme_dirs(home: Path) -> list[Traversable]:
    """Where themes are looked for, later ones overriding earlier ones by name."""
    return [bundled_theme_dir(), home / "themes"]


def parse_theme(values: dict[str, object]) -> Theme:
    """A :class:`Theme` from a theme file's table, or :class:`ThemeFileInvalid`."""
    unknown = sorted(set(values) - set(COLOR_FIELDS) - set(OTHER_FIELDS))
    if unknown:
        raise ThemeFileInvalid(f"unknown key(s): {', '.join(unknown)}")
    name = values.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ThemeFileInvalid("'name' must be a non-empty string")
    if "primary" not in values:
        raise ThemeFileInvalid("'primary' is required")
    for key in COLOR_FIELDS:
        if key in values:
            value = values[key]
            if not isinstance(value, str):
                raise ThemeFileInvalid(f"'{key}' must be a colour string")
            try:
                Color.parse(value)
            except ColorParseError:
                raise ThemeFileInvalid(f"'{key}' is not a colour") from None
    if not isinstance(values.get("dark", True), bool):
        raise ThemeFileInvalid("'dark' must be true or false")
    for key in ("luminosity_spread", "text_alpha"):
        if key in values and not isinstance(values[key], (int, float)):
            raise ThemeFileInvalid(f"'{key}' must be a number")
    variables = values.get("variables", {})
    if not isinstance(variables, dict) or not all(isinstance(v, str) for v in variables.values()):
        raise ThemeFileInvalid("'variables' must be a table of strings")
    theme = Theme(**values)  # type: ignore[arg-type]
    try:
        theme.to_color_system()
    except Exception as exc:  # noqa: BLE001 - whatever Textual rejects, the file is invalid
        raise ThemeFileInvalid(f"rejected by Textual ({type(exc).__name__})") from None
    return theme


def load_theme_file(path: Traversable) -> Theme:
    """Read and validate one theme file."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_THEME_FILE_BYTES + 1)
        if len(raw) > MAX_THEME_FILE_BYTES:
            raise ThemeFileInvalid("file is too large")
        values = tomllib.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError):
        raise ThemeFileInvalid("cannot be read") from None
    except tomllib.TOMLDecodeError:
        raise ThemeFileInvalid("is not valid TOML") from None
    return parse_theme(values)


def load_themes(directories: list[Traversable]) -> tuple[list[Theme], list[ThemeProblem]]:
    """Every valid theme in ``directories`` (in order), and what was wrong with the rest."""
    themes: dict[str, Theme] = {}
    problems: list[ThemeProblem] = []
    for directory in directories:
        if not directory.is_dir():
            continue
        candidates = (p for p in directory.iterdir() if p.name.endswith(THEME_SUFFIX) and not p.name.startswith("."))
        for path in sorted(candidates, key=lambda p: p.name):
            try:
                theme = load_theme_file(path)
            except ThemeFileInvalid as exc:
                problems.append(ThemeProblem(path.name, str(exc)))
                continue
            themes[theme.name] = theme
    return list(themes.values()), problems
