"""Readers for text formats: decoding, Markdown structure and plain paragraphs."""

from __future__ import annotations

import codecs
import re

from kbtui.extract import Element

_ATX = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_SETEXT = re.compile(r"^(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[ \t]*([\w+#.-]*)")
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d+[.)])[ \t]+")


def decode_text(data: bytes) -> str:
    """Decode bytes as text: BOM first, then UTF-8, then cp1252 as the fallback.

    Invalid sequences become U+FFFD and NUL bytes are removed (SQLite string
    functions and FTS stop at NUL).
    """
    for bom, encoding in (
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF32_LE, "utf-32-le"),
        (codecs.BOM_UTF32_BE, "utf-32-be"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ):
        if data.startswith(bom):
            text = data[len(bom):].decode(encoding, errors="replace")
            break
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            # Mostly-UTF-8 with a few bad bytes stays UTF-8; otherwise assume
            # a single-byte Windows/Latin encoding rather than garbling it.
            replaced = data.decode("utf-8", errors="replace")
            if replaced.count("\ufffd") * 100 < max(len(replaced), 1):
                text = replaced
            else:
                text = data.decode("cp1252", errors="replace")
    return text.replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n")


def _lines_with_offsets(text: str) -> list[tuple[int, str]]:
    result, offset = [], 0
    for line in text.split("\n"):
        result.append((offset, line))
        offset += len(line) + 1
    return result


def read_markdown(text: str) -> list[Element]:
    """ATX and setext headings, fenced code with its language, lists, paragraphs."""
    lines = _lines_with_offsets(text)
    elements: list[Element] = []
    para: list[tuple[int, str]] = []

    def flush_paragraph() -> None:
        if not para:
            return
        start = para[0][0]
        end = para[-1][0] + len(para[-1][1])
        body = "\n".join(line for _, line in para).strip()
        if body:
            kind = "list_item" if _LIST_ITEM.match(para[0][1]) else "paragraph"
            elements.append(Element(kind, body, start=start, end=end))
        para.clear()

    i = 0
    while i < len(lines):
        offset, line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            flush_paragraph()
            marker, language = fence.group(1), fence.group(2) or None
            body_lines, j = [], i + 1
            while j < len(lines) and not lines[j][1].lstrip().startswith(marker):
                body_lines.append(lines[j][1])
                j += 1
            end = lines[min(j, len(lines) - 1)][0] + len(lines[min(j, len(lines) - 1)][1])
            code = "\n".join(body_lines)
            if code.strip():
                elements.append(Element("code", code, start=offset, end=end, language=language))
            i = j + 1
            continue
        atx = _ATX.match(line)
        if atx:
            flush_paragraph()
            title = atx.group(2).strip()
            if title:
                elements.append(
                    Element("heading", title, level=len(atx.group(1)), start=offset, end=offset + len(line))
                )
            i += 1
            continue
        if _SETEXT.match(line) and len(para) == 1 and para[0][1].strip():
            level = 1 if line.strip().startswith("=") else 2
            start, title = para[0]
            para.clear()
            elements.append(Element("heading", title.strip(), level=level, start=start, end=offset + len(line)))
            i += 1
            continue
        if not line.strip():
            flush_paragraph()
        elif _LIST_ITEM.match(line) and para:
            flush_paragraph()
            para.append((offset, line))
        else:
            para.append((offset, line))
        i += 1
    flush_paragraph()
    return elements


def read_plain(text: str) -> list[Element]:
    """Paragraphs separated by blank lines; no headings."""
    elements: list[Element] = []
    for match in re.finditer(r"(?:[^\n]*\S[^\n]*(?:\n|$))+", text):
        body = match.group(0).strip()
        if body:
            elements.append(Element("paragraph", body, start=match.start(), end=match.end()))
    return elements
