"""Repository-relative paths: normalising git's raw bytes into an identity.

A path is identity (``document.source_path``), so it must be stable and
unambiguous; shown to the operator it goes through :func:`kbtui.printable.printable`.
"""

from __future__ import annotations

import unicodedata


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
