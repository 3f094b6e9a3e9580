"""Which reader handles a file, decided by its extension alone.

A format is a short string stored on the document row: ``pdf``, ``docx``,
``html``, ``markdown``, ``rst``, ``text``, ``log``, or ``code:<language>`` for
source code and structured text (the language travels with the format because
the reader never sees the file name).
"""

from __future__ import annotations

from pathlib import PurePath

CODE_FORMAT_PREFIX = "code:"

MARKDOWN_EXTENSIONS = {".md", ".markdown", ".mdown", ".mkd"}
RST_EXTENSIONS = {".rst", ".rest"}
TEXT_EXTENSIONS = {".txt", ".text", ".csv", ".tsv", ""}
LOG_EXTENSIONS = {".log"}
HTML_EXTENSIONS = {".html", ".htm", ".xhtml"}

# Languages whose top-level symbols the code reader looks for are marked in
# kbtui.extract.code; the rest are recorded with their language only.
LANGUAGE_BY_EXTENSION: dict[str, str] = {
    ".py": "python", ".pyi": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".tsx": "typescript", ".mts": "typescript", ".cts": "typescript",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".kt": "kotlin", ".kts": "kotlin",
    ".c": "c", ".h": "c",
    ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hh": "cpp", ".hpp": "cpp", ".hxx": "cpp",
    ".cs": "csharp",
    ".rb": "ruby",
    ".php": "php",
    ".swift": "swift",
    ".scala": "scala",
    ".lua": "lua",
    ".pl": "perl", ".pm": "perl",
    ".sh": "shell", ".bash": "shell", ".zsh": "shell",
    ".sql": "sql",
    ".json": "json",
    ".yaml": "yaml", ".yml": "yaml",
    ".toml": "toml",
    ".ini": "ini", ".cfg": "ini", ".conf": "ini",
    ".xml": "xml",
    ".css": "css",
}

FORMAT_BY_EXTENSION: dict[str, str] = {
    **{ext: "markdown" for ext in MARKDOWN_EXTENSIONS},
    **{ext: "rst" for ext in RST_EXTENSIONS},
    **{ext: "text" for ext in TEXT_EXTENSIONS},
    **{ext: "log" for ext in LOG_EXTENSIONS},
    **{ext: "html" for ext in HTML_EXTENSIONS},
    ".pdf": "pdf",
    ".docx": "docx",
    **{ext: CODE_FORMAT_PREFIX + language for ext, language in LANGUAGE_BY_EXTENSION.items()},
}


def format_for(name: str) -> str | None:
    """The reader format for a file name, or None when it is not supported."""
    return FORMAT_BY_EXTENSION.get(PurePath(name).suffix.lower())


def code_language(fmt: str) -> str | None:
    """The language of a ``code:<language>`` format, else None."""
    if fmt.startswith(CODE_FORMAT_PREFIX):
        return fmt[len(CODE_FORMAT_PREFIX):] or None
    return None
