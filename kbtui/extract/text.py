"""Readers for text formats: decoding, Markdown structure and plain paragraphs."""

from __future__ import annotations

import codecs
import re

from kbtui.extract import Element, ElementKind

_ATX = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_SETEXT = re.compile(r"^(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[ \t]*([\w+#.-]*)")
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d+[.)])[ \t]+")
_WELL_FORMED_NON_ASCII = re.compile("[^\x00-\x7f\ufffd]")


def decode_text(data: bytes) -> str:
    """Decode bytes as text: a BOM first, then UTF-8, then cp1252 as the fallback.

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
            # Any well-formed multi-byte sequence means UTF-8 with some damage
            # (legacy single-byte text almost never forms one by chance); with
            # none, assume a Windows/Latin single-byte encoding rather than
            # replacing every accented letter.
            replaced = data.decode("utf-8", errors="replace")
            text = replaced if _WELL_FORMED_NON_ASCII.search(replaced) else data.decode("cp1252", errors="replace")
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
            kind: ElementKind = "list_item" if _LIST_ITEM.match(para[0][1]) else "paragraph"
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


# reStructuredText: a title is underlined (optionally also overlined) by one
# repeated punctuation character; levels follow the order adornment styles
# first appear in, as docutils does.
_RST_ADORNMENT = re.compile(r"^([!-/:-@\[-`{-~])\1+[ \t]*$")
_RST_DIRECTIVE = re.compile(r"^\.\.[ \t]+([\w:-]+)::[ \t]*(.*?)[ \t]*$")
_RST_COMMENT = re.compile(r"^\.\.(?:[ \t]|$)")
_RST_CODE_DIRECTIVES = {"code-block", "code", "sourcecode"}
_RST_LIST_ITEM = re.compile(r"^(?:[-*+\u2022]|\d+[.)]|#\.|\(\d+\))[ \t]+")


def _is_rst_title(title: str, adornment: str) -> bool:
    title = title.rstrip()
    width = len(adornment.rstrip())
    return bool(title) and not title[0].isspace() and (width >= len(title) or width >= 4)


def _indented_block(lines: list[tuple[int, str]], i: int) -> int:
    """Index just past the block of blank or indented lines starting at ``i``."""
    j = i
    while j < len(lines) and (not lines[j][1].strip() or lines[j][1][:1].isspace()):
        j += 1
    while j > i and not lines[j - 1][1].strip():
        j -= 1
    return j


def _dedent(block: list[str]) -> str:
    widths = [len(line) - len(line.lstrip()) for line in block if line.strip()]
    cut = min(widths, default=0)
    return "\n".join(line[cut:] for line in block).strip("\n")


def read_rst(text: str) -> list[Element]:
    """reStructuredText: titles by adornment, literal and code-block code, lists, paragraphs."""
    lines = _lines_with_offsets(text)
    elements: list[Element] = []
    styles: dict[tuple[str, bool], int] = {}

    def heading(title: str, style: tuple[str, bool], start: int, end: int) -> None:
        level = styles.setdefault(style, len(styles) + 1)
        elements.append(Element("heading", title.strip(), level=level, start=start, end=end))

    def code_block(i: int, language: str | None) -> int:
        while i < len(lines) and (not lines[i][1].strip() or re.match(r"^[ \t]+:[\w-]+:", lines[i][1])):
            i += 1  # blank lines and directive options before the body
        if i >= len(lines) or not lines[i][1][:1].isspace():
            return i
        end = _indented_block(lines, i)
        body = _dedent([line for _, line in lines[i:end]])
        if body.strip():
            last = lines[end - 1]
            elements.append(Element("code", body, start=lines[i][0], end=last[0] + len(last[1]), language=language))
        return end

    i, n = 0, len(lines)
    while i < n:
        offset, line = lines[i]
        if not line.strip():
            i += 1
            continue
        nxt = lines[i + 1][1] if i + 1 < n else ""
        if _RST_ADORNMENT.match(line):
            after = lines[i + 2][1] if i + 2 < n else ""
            if (
                nxt.strip() and not _RST_ADORNMENT.match(nxt)
                and after.rstrip() == line.rstrip()
            ):
                heading(nxt, (line[0], True), offset, lines[i + 2][0] + len(after))
                i += 3
            else:
                i += 1  # a transition, or stray punctuation
            continue
        if not line[:1].isspace() and _RST_ADORNMENT.match(nxt) and _is_rst_title(line, nxt):
            heading(line, (nxt[0], False), offset, lines[i + 1][0] + len(nxt))
            i += 2
            continue
        directive = _RST_DIRECTIVE.match(line)
        if directive:
            name, argument = directive.group(1).lower(), directive.group(2)
            if name in _RST_CODE_DIRECTIVES:
                i = code_block(i + 1, argument.split()[0] if argument else None)
            else:
                i += 1  # other directives: their indented body is read as text below
            continue
        if _RST_COMMENT.match(line):
            i = _indented_block(lines, i + 1)  # comments and link targets carry no text
            continue
        if line[:1].isspace():
            end = _indented_block(lines, i)
            for para in re.split(r"\n[ \t]*\n", _dedent([ln for _, ln in lines[i:end]])):
                if para.strip():
                    last_start, last_line = lines[end - 1]
                    elements.append(Element("paragraph", para.strip(), start=offset, end=last_start + len(last_line)))
            i = end
            continue
        # A paragraph or list item: up to a blank line, the next list item, or a title.
        j = i + 1
        while (
            j < n and lines[j][1].strip() and not _RST_LIST_ITEM.match(lines[j][1])
            and not (j + 1 < n and _RST_ADORNMENT.match(lines[j + 1][1]) and _is_rst_title(lines[j][1], lines[j + 1][1]))
        ):
            j += 1
        body = "\n".join(ln for _, ln in lines[i:j]).strip()
        literal_follows = body.endswith("::")
        if literal_follows:  # "Text::" reads "Text:", "Text ::" and a bare "::" vanish
            stem = body[:-2]
            body = stem.rstrip() if not stem or stem[-1].isspace() else stem + ":"
        if body.strip():
            kind: ElementKind = "list_item" if _RST_LIST_ITEM.match(line) else "paragraph"
            elements.append(Element(kind, body.strip(), start=offset, end=lines[j - 1][0] + len(lines[j - 1][1])))
        i = code_block(j, None) if literal_follows else j
    return elements
