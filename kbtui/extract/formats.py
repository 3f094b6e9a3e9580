"""The formats table: which reader handles a file, decided by its extension alone.

A format is a short string stored on the document row: ``pdf``, ``docx``,
``html``, ``markdown``, ``rst``, ``text``, ``log``, or ``code:<language>`` for
source code and structured text (the language travels with the format because
the reader never sees the file name).

Adding a format is a reader module in this package plus one row in
:data:`FORMATS` (a code language: one entry in :data:`CODE_LANGUAGES`). Rows
name their reader instead of importing it: readers are imported where they
run, in the extraction worker, so the parsers never load in the node itself.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Literal

CODE_FORMAT_PREFIX = "code:"


@dataclass(frozen=True)
class Format:
    name: str  # stored on the document row
    extensions: tuple[str, ...]  # lower case, with the dot; "" is a file without one
    reader: str  # "module:function" in kbtui.extract
    # "bytes": the reader parses the file itself, under the extraction limits;
    # "text": it is given the decoded text, already held to the character cap.
    reads: Literal["bytes", "text"]
    language: str | None = None  # passed to a text reader after the text

    def load_reader(self) -> Callable[..., Any]:
        """The reader function (its module is imported on first use)."""
        module, function = self.reader.split(":")
        return getattr(importlib.import_module(f"kbtui.extract.{module}"), function)


# Languages whose top-level symbols the code reader looks for are marked in
# kbtui.extract.code; the rest are recorded with their language only.
CODE_LANGUAGES: dict[str, tuple[str, ...]] = {
    "python": (".py", ".pyi"),
    "javascript": (".js", ".mjs", ".cjs", ".jsx"),
    "typescript": (".ts", ".tsx", ".mts", ".cts"),
    "go": (".go",),
    "rust": (".rs",),
    "java": (".java",),
    "kotlin": (".kt", ".kts"),
    "c": (".c", ".h"),
    "cpp": (".cc", ".cpp", ".cxx", ".hh", ".hpp", ".hxx"),
    "csharp": (".cs",),
    "ruby": (".rb",),
    "php": (".php",),
    "swift": (".swift",),
    "scala": (".scala",),
    "lua": (".lua",),
    "perl": (".pl", ".pm"),
    "shell": (".sh", ".bash", ".zsh"),
    "sql": (".sql",),
    "json": (".json",),
    "yaml": (".yaml", ".yml"),
    "toml": (".toml",),
    "ini": (".ini", ".cfg", ".conf"),
    "xml": (".xml",),
    "css": (".css",),
}

FORMATS: tuple[Format, ...] = (
    Format("markdown", (".md", ".markdown", ".mdown", ".mkd"), "text:read_markdown", "text"),
    Format("rst", (".rst", ".rest"), "text:read_rst", "text"),
    Format("text", (".txt", ".text", ".csv", ".tsv", ""), "text:read_plain", "text"),
    Format("log", (".log",), "text:read_plain", "text"),
    Format("html", (".html", ".htm", ".xhtml"), "html:read_html", "bytes"),
    Format("pdf", (".pdf",), "pdf:read_pdf", "bytes"),
    Format("docx", (".docx",), "docx:read_docx", "bytes"),
    *(
        Format(CODE_FORMAT_PREFIX + language, extensions, "code:read_code", "text", language=language)
        for language, extensions in CODE_LANGUAGES.items()
    ),
)

FORMAT_BY_NAME: dict[str, Format] = {f.name: f for f in FORMATS}
FORMAT_BY_EXTENSION: dict[str, str] = {ext: f.name for f in FORMATS for ext in f.extensions}


def format_for(name: str) -> str | None:
    """The reader format for a file name, or None when it is not supported."""
    return FORMAT_BY_EXTENSION.get(PurePath(name).suffix.lower())
