"""What the terminal UI remembers between runs (theme, collection), in
``$KBTUI_HOME/tui.json``. A missing or damaged file means defaults."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

PREFERENCES_FILE_NAME = "tui.json"


@dataclass(frozen=True)
class Preferences:
    theme: str | None = None
    collection_id: str | None = None


def load_preferences(home: Path) -> Preferences:
    try:
        values = json.loads((home / PREFERENCES_FILE_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return Preferences()
    if not isinstance(values, dict):
        return Preferences()
    known = {f.name for f in dataclasses.fields(Preferences)}
    return Preferences(**{k: v for k, v in values.items() if k in known and (v is None or isinstance(v, str))})


def save_preferences(home: Path, preferences: Preferences) -> None:
    """Write atomically (temp file + rename), readable by the owner only."""
    home.mkdir(parents=True, exist_ok=True)
    final = home / PREFERENCES_FILE_NAME
    tmp = final.with_suffix(".json.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(dataclasses.asdict(preferences), handle)
    os.replace(tmp, final)
