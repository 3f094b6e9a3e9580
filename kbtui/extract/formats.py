"""The formats table: which reader handles a file, decided by its extension
and, where the extension does not settle it, by its content.

A format is a short string stored on the document row: ``pdf``, ``docx``,
``html``, ``image``, ``markdown``, ``rst``, ``text``, ``log``, or ``code:<language>`` for
source code and structured text (the language travels with the format because
the reader never sees the file name).

Content decides what is text (:func:`detect_format`): a file with no or an
unknown extension whose first bytes are text is read as plain text
(README.Debian, LICENSE, a ``.service`` unit, a man page source); bytes that
are not text (NUL bytes, or too much that is neither UTF-8 nor printable)
are ``binary_content`` under any name, a ``.txt`` included. Names that are
binary by convention (archives, executables, media) are refused unread;
PNG, JPEG, TIFF, WebP and BMP images are read by OCR.

Adding a format is a reader module in this package plus one row in
:data:`FORMATS` (a code language: one entry in :data:`CODE_LANGUAGES`). Rows
name their reader instead of importing it: readers are imported where they
run, in the extraction worker, so the parsers never load in the node itself.
"""

from __future__ import annotations

import codecs
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
    # The reader may OCR page images: it is also given the document's OcrRun.
    ocr: bool = False

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

# Read by OCR; Pillow sniffs which of these a file really is.
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".bmp")

FORMATS: tuple[Format, ...] = (
    Format("markdown", (".md", ".markdown", ".mdown", ".mkd"), "text:read_markdown", "text"),
    Format("rst", (".rst", ".rest"), "text:read_rst", "text"),
    Format("text", (".txt", ".text", ".csv", ".tsv", ""), "text:read_plain", "text"),
    Format("log", (".log",), "text:read_plain", "text"),
    Format("html", (".html", ".htm", ".xhtml"), "html:read_html", "bytes"),
    Format("pdf", (".pdf",), "pdf:read_pdf", "bytes", ocr=True),
    Format("image", IMAGE_EXTENSIONS, "image:read_image", "bytes", ocr=True),
    Format("docx", (".docx",), "docx:read_docx", "bytes"),
    *(
        Format(CODE_FORMAT_PREFIX + language, extensions, "code:read_code", "text", language=language)
        for language, extensions in CODE_LANGUAGES.items()
    ),
)

FORMAT_BY_NAME: dict[str, Format] = {f.name: f for f in FORMATS}
FORMAT_BY_EXTENSION: dict[str, str] = {ext: f.name for f in FORMATS for ext in f.extensions}


def format_for(name: str) -> str | None:
    """The reader format the table gives a file name, or None when its extension is not in it."""
    return FORMAT_BY_EXTENSION.get(PurePath(name).suffix.lower())


# Reason codes of a detection (the same words a scan reports a skip with).
UNSUPPORTED_FORMAT = "unsupported_format"
BINARY_CONTENT = "binary_content"

# How much of a file decides whether it is text: as much as git looks at.
SNIFF_BYTES = 8000

# Binary by convention: refused without being read (a sniff would only confirm it).
BINARY_EXTENSIONS = frozenset({
    ".gif", ".ico", ".psd", ".heic",
    ".mp3", ".mp4", ".m4a", ".ogg", ".opus", ".flac", ".wav", ".avi", ".mov", ".mkv", ".webm",
    ".zip", ".gz", ".tgz", ".bz2", ".xz", ".zst", ".7z", ".rar", ".tar", ".jar", ".war", ".whl", ".deb", ".rpm",
    ".exe", ".dll", ".so", ".dylib", ".o", ".a", ".lib", ".obj", ".class", ".pyc", ".pyo", ".wasm", ".bin",
    ".woff", ".woff2", ".ttf", ".otf", ".eot", ".sqlite", ".sqlite3", ".db", ".iso", ".img", ".dmg",
    ".xlsx", ".pptx", ".odt", ".ods", ".odp", ".doc", ".xls", ".ppt",
})

# Formats whose bytes are their own (binary) container: the extension is trusted.
_CONTAINER_FORMATS = frozenset({"pdf", "docx", "image"})
_UNICODE_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
# C0 controls that text does not use (tab, newlines, form feed, escape and backspace are fine).
_CONTROL_BYTES = bytes(b for b in range(32) if b not in b"\t\n\r\f\b\x1b") + b"\x7f"
_MAX_NUL_SHARE = 0.10  # of the sample
_MAX_CONTROL_SHARE = 0.10  # of the sample
_MAX_INVALID_SHARE = 0.30  # of the characters, when the sample is not UTF-8


@dataclass(frozen=True)
class Detection:
    """The reader format for a file, or why there is none (a fixed reason code)."""

    format: str | None
    reason: str | None = None


def looks_binary(head: bytes, *, strict: bool = True) -> bool:
    """Whether a file's first bytes (:data:`SNIFF_BYTES` of them) are not text.

    Outside UTF-16/32 text a NUL byte says binary, as git judges it
    (``strict``); not ``strict``, only NULs making up more than a tenth of
    the sample do (executables and databases are mostly NULs; a stray NUL
    in text is stripped at extraction). A sample of which more than a
    tenth are control bytes is binary too, and so - when it is not UTF-8 -
    is one of which almost a third would not decode (compressed data,
    images). Legacy single-byte text (Latin-1, cp1252) has neither.
    """
    if not head or head.startswith(_UNICODE_BOMS):
        return False
    nuls = head.count(b"\x00")
    if nuls > (0 if strict else _MAX_NUL_SHARE * len(head)):
        return True
    sample = head.replace(b"\x00", b"") if nuls else head
    if not sample:
        return True
    if sum(sample.count(byte) for byte in _CONTROL_BYTES) > _MAX_CONTROL_SHARE * len(sample):
        return True
    try:
        # final=False: a character cut at the end of the sample is not an error.
        codecs.getincrementaldecoder("utf-8")().decode(sample, final=False)
        return False
    except UnicodeDecodeError:
        decoded = sample.decode("utf-8", errors="replace")
        return decoded.count("\ufffd") > _MAX_INVALID_SHARE * len(decoded)


def needs_content(name: str) -> bool:
    """Whether :func:`detect_format` must see the file's bytes (False: the name settles it)."""
    suffix = PurePath(name).suffix.lower()
    return FORMAT_BY_EXTENSION.get(suffix) not in _CONTAINER_FORMATS and suffix not in BINARY_EXTENSIONS


def detect_format(name: str, head: bytes | None = None) -> Detection:
    """The format for a file called ``name`` whose first bytes are ``head``.

    A known text format (Markdown, code, HTML, ...) is confirmed by its
    content; an unknown or missing extension is plain text when the content
    is text; a PDF, DOCX or image is taken by its extension. With ``head`` None only
    the name is judged (content-dependent names are then taken as text).
    """
    suffix = PurePath(name).suffix.lower()
    known = FORMAT_BY_EXTENSION.get(suffix)
    if known in _CONTAINER_FORMATS:
        return Detection(known)
    if known is None and suffix in BINARY_EXTENSIONS:
        return Detection(None, UNSUPPORTED_FORMAT)
    if head is not None and looks_binary(head[:SNIFF_BYTES]):
        return Detection(None, BINARY_CONTENT)
    return Detection(known or "text")
