"""Text from documents, file names and paths, made safe to print on a terminal.

Anything a document controls (names, headings, paths, chunk text) can carry
control characters, ANSI escapes, line breaks or BiDi overrides that would
move the cursor or reorder what the operator sees. They are escaped visibly.
"""

from __future__ import annotations

import unicodedata

_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Categories that can move the cursor, reorder text or hide characters.
_UNSAFE_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Zl", "Zp"}


def printable(text: str) -> str:
    """``text`` with every control, format (BiDi, zero-width) and separator
    character escaped, so it prints as one inert line."""
    out: list[str] = []
    for char in text:
        if char in _NAMED_ESCAPES:
            out.append(_NAMED_ESCAPES[char])
        elif unicodedata.category(char) in _UNSAFE_CATEGORIES:
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(char)
    return "".join(out)


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"
