"""Collect elements from readers whose source has no useful character offsets.

PDF, DOCX and HTML readers produce text that is not a slice of the input bytes.
Their elements get offsets into a synthetic "extracted text": every element's
text joined by a blank line, in reading order. The collector also enforces
the extracted-character cap, the decompression-bomb guard shared by all
formats.
"""

from __future__ import annotations

from kbtui.extract import Element, ElementKind, ExtractionFailed

ELEMENT_SEPARATOR = "\n\n"


def clean_text(text: str) -> str:
    """Remove NUL bytes and replace lone surrogates, which SQLite and UTF-8 reject."""
    text = text.replace("\x00", "")
    if not text.isascii():
        text = text.encode("utf-8", errors="replace").decode("utf-8")
    return text


class ElementCollector:
    """Append-only list of elements with running offsets and a character cap."""

    def __init__(self, max_chars: int) -> None:
        self.elements: list[Element] = []
        self._max_chars = max_chars
        self._offset = 0

    def add(
        self,
        kind: ElementKind,
        text: str,
        *,
        level: int = 0,
        page: int | None = None,
        language: str | None = None,
        symbol: str | None = None,
    ) -> None:
        """Add one element; blank text is dropped; past the cap it raises extract_too_large."""
        text = clean_text(text)
        if kind != "code":
            text = text.strip()
        if not text.strip():
            return
        start = self._offset + (len(ELEMENT_SEPARATOR) if self.elements else 0)
        end = start + len(text)
        if end > self._max_chars:
            raise ExtractionFailed("extract_too_large")
        self.elements.append(
            Element(kind, text, level=level, start=start, end=end, page=page, language=language, symbol=symbol)
        )
        self._offset = end
