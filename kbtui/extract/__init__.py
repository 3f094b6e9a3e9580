"""Extraction: turn a document's bytes into ordered structural elements.

Readers are chosen by extension. Each returns a list of :class:`Element` in
reading order with offsets into the document's extracted text, so chunks can
point back to where they came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath
from typing import Literal

from kbtui.errors import KbtuiError

ElementKind = Literal["heading", "paragraph", "list_item", "table", "code"]

# Bumped whenever a reader's output changes for the same input; stored on every
# document so the reindexer can find documents extracted by an older parser.
PARSER_VERSION = 1


@dataclass(frozen=True)
class Element:
    kind: ElementKind
    text: str
    level: int = 0  # heading level, 1 = top
    start: int = 0  # character offsets into the extracted text
    end: int = 0
    page: int | None = None
    language: str | None = None
    symbol: str | None = None


class ExtractionFailed(KbtuiError):
    """Extraction of one document failed; ``code`` is a fixed, content-free reason."""

    def __init__(self, code: str, message: str | None = None) -> None:
        super().__init__(message or code)
        self.code = code


MARKDOWN_EXTENSIONS = {".md", ".markdown", ".mdown", ".mkd"}
TEXT_EXTENSIONS = {".txt", ".text", ""}
LOG_EXTENSIONS = {".log"}

FORMAT_BY_EXTENSION: dict[str, str] = {
    **{ext: "markdown" for ext in MARKDOWN_EXTENSIONS},
    **{ext: "text" for ext in TEXT_EXTENSIONS},
    **{ext: "log" for ext in LOG_EXTENSIONS},
}


def format_for(name: str) -> str | None:
    """The reader format for a file name, or None when it is not supported."""
    return FORMAT_BY_EXTENSION.get(PurePath(name).suffix.lower())


def extract(data: bytes, fmt: str) -> list[Element]:
    """Extract ``data`` of format ``fmt`` into elements (in this process)."""
    from kbtui.extract import text

    if fmt == "markdown":
        return text.read_markdown(text.decode_text(data))
    if fmt in ("text", "log"):
        return text.read_plain(text.decode_text(data))
    raise ExtractionFailed("extract_unsupported")
