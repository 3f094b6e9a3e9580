"""Repository-relative paths: normalising git's raw bytes, and showing them safely.

A path is identity (``document.source_path``), so it must be stable and
unambiguous; it is also shown to the operator, so control characters, line
breaks and BiDi overrides must never reach a terminal raw.
"""

from __future__ import annotations

import unicodedata

_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Categories that can move the cursor, reorder text or hide characters.
_UNSAFE_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Zl", "Zp"}


def normalise_source_path(raw: bytes) -> str | None:
    """The identity of a raw, ``/``-separated relative path, or None if unsafe.

    Bytes that are not UTF-8 become ``\\xNN`` escapes (the name stays
    distinct and storable); the text is NFC-normalised so the same name
    written by different systems is one identity. Absolute paths and empty,
    ``.`` or ``..`` components are refused: they could name something
    outside the tree.
    """
    if not raw or raw.startswith(b"/") or b"\x00" in raw:
        return None
    parts = raw.split(b"/")
    if any(part in (b"", b".", b"..") for part in parts):
        return None
    text = raw.decode("utf-8", "backslashreplace")
    return unicodedata.normalize("NFC", text)


def printable_path(path: str) -> str:
    """``path`` with every control, format (BiDi, zero-width) and separator
    character escaped, so it prints as one inert line."""
    out: list[str] = []
    for char in path:
        if char in _NAMED_ESCAPES:
            out.append(_NAMED_ESCAPES[char])
        elif unicodedata.category(char) in _UNSAFE_CATEGORIES:
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(char)
    return "".join(out)
