"""Which files an ``add`` of paths means: supported files, hidden ones left out."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from kbtui.errors import KbtuiError, NotFound
from kbtui.extract import format_for


def collect_files(paths: Iterable[str]) -> list[Path]:
    """Expand arguments into supported files; a bad argument stops everything.

    Errors name the argument's position, never the path: file names are
    private to the operator and may end up in a log.
    """
    files: list[Path] = []
    for position, raw in enumerate(paths, start=1):
        path = Path(raw)
        if not path.exists():
            raise NotFound(f"argument {position}: no such file or directory")
        if path.is_dir():
            found = sorted(
                p for p in path.rglob("*")
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
                and format_for(p.name) is not None
            )
            if not found:
                raise KbtuiError(f"argument {position}: the directory holds no supported files")
            files.extend(found)
        elif path.is_file():
            if format_for(path.name) is None:
                raise KbtuiError(f"argument {position}: unsupported file type '{path.suffix or '(none)'}'")
            files.append(path)
        else:
            raise KbtuiError(f"argument {position}: not a regular file")
    return files
