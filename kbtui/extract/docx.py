"""DOCX with python-docx, after a zip pre-scan that refuses bombs and DTDs.

The pre-scan reads only the zip directory and the XML parts, before
python-docx sees anything: too many entries, too many uncompressed bytes, or
an entry compressed suspiciously well fail ``extract_too_large``; a DOCTYPE
or ENTITY declaration in any XML part (OOXML never needs one; it is how
entity expansion and local-file inclusion attacks start) fails
``extract_unsafe``. Body order is kept: headings by style (or outline
level), paragraphs, list items, and tables as one row per line.
"""

from __future__ import annotations

import re
import zipfile
import zlib
from collections.abc import Iterator
from io import BytesIO

import docx as python_docx
from docx.enum.style import WD_STYLE_TYPE
from docx.oxml.ns import qn
from docx.table import Table, _Cell
from docx.text.paragraph import Paragraph
from lxml import etree

from kbtui.extract import Element, ExtractionFailed
from kbtui.extract.collect import ElementCollector
from kbtui.extract.limits import MIB, ExtractionLimits

# Small parts may compress very well without being a bomb; the ratio matters
# only where the expanded size does.
RATIO_CHECK_MIN_BYTES = 1 * MIB
MAX_HEADING_LEVEL = 9
# An OLE compound file: what Word writes for a password-protected .docx.
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"

_HEADING_STYLE = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)


def _declaration_pattern(encoding: str) -> re.Pattern[bytes]:
    """``<!DOCTYPE`` or ``<!ENTITY``, any case, as bytes in ``encoding``."""

    def word(text: str) -> bytes:
        parts = []
        for ch in text:
            options = {ch.lower().encode(encoding), ch.upper().encode(encoding)}
            parts.append(b"(?:" + b"|".join(re.escape(o) for o in sorted(options)) + b")")
        return b"".join(parts)

    return re.compile(word("<!DOCTYPE") + b"|" + word("<!ENTITY"))


_DECLARATIONS = [
    _declaration_pattern(encoding)
    for encoding in ("utf-8", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be")
]


def check_package(data: bytes, limits: ExtractionLimits) -> None:
    """Refuse a DOCX whose zip shape or XML declarations are hostile, before parsing it."""
    if data.startswith(OLE_MAGIC):
        raise ExtractionFailed("extract_encrypted")
    try:
        with zipfile.ZipFile(BytesIO(data)) as package:
            entries = package.infolist()
            if len(entries) > limits.max_zip_entries:
                raise ExtractionFailed("extract_too_large")
            if sum(e.file_size for e in entries) > limits.max_zip_uncompressed_bytes:
                raise ExtractionFailed("extract_too_large")
            for entry in entries:
                if entry.file_size > RATIO_CHECK_MIN_BYTES and (
                    entry.file_size > limits.max_zip_ratio * max(entry.compress_size, 1)
                ):
                    raise ExtractionFailed("extract_too_large")
            if "word/document.xml" not in {e.filename for e in entries}:
                raise ExtractionFailed("extract_corrupt")
            for entry in entries:
                if entry.filename.lower().endswith((".xml", ".rels")):
                    # Reading stops at the declared size, which the total above bounds.
                    content = package.read(entry)
                    if any(p.search(content) for p in _DECLARATIONS):
                        raise ExtractionFailed("extract_unsafe")
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError, ValueError, zlib.error):
        # zlib.error: a damaged deflate stream inside the zip (found by the fuzzer).
        raise ExtractionFailed("extract_corrupt") from None


def read_docx(data: bytes, limits: ExtractionLimits) -> list[Element]:
    """Headings, paragraphs, list items and tables of the document body, in order."""
    check_package(data, limits)
    try:
        document = python_docx.Document(BytesIO(data))
    except (KeyError, ValueError, zipfile.BadZipFile, etree.XMLSyntaxError, zlib.error):
        raise ExtractionFailed("extract_corrupt") from None
    out = ElementCollector(limits.max_extracted_chars)
    styles = _StyleKinds(document)
    for block in _body_blocks(document.element.body):
        if block.tag == qn("w:tbl"):
            out.add("table", "\n".join(_table_rows(Table(block, document))))
            continue
        paragraph = Paragraph(block, document)
        ppr = block.pPr
        level = _outline_level(ppr) or styles.heading_level(block.style)
        if level:
            out.add("heading", paragraph.text, level=level)
        elif (ppr is not None and ppr.numPr is not None) or styles.is_list(block.style):
            out.add("list_item", paragraph.text)
        else:
            out.add("paragraph", paragraph.text)
    return out.elements


def _body_blocks(body: etree._Element) -> Iterator[etree._Element]:
    """Paragraphs and tables in document order, including those inside content controls."""
    paragraph, table, sdt = qn("w:p"), qn("w:tbl"), qn("w:sdt")
    content = qn("w:sdtContent")
    stack = [iter(body)]
    while stack:
        child = next(stack[-1], None)
        if child is None:
            stack.pop()
        elif child.tag in (paragraph, table):
            yield child
        elif child.tag == sdt:
            inner = child.find(content)
            if inner is not None:
                stack.append(iter(inner))


def _table_rows(table: Table) -> list[str]:
    # The row's own cell elements: python-docx's row.cells repeats a merged
    # cell once per grid column, which a hostile gridSpan turns into a bomb.
    rows = []
    for tr in table._tbl.tr_lst:
        cells = [" ".join(_Cell(tc, table).text.split()) for tc in tr.tc_lst]
        if any(cells):
            rows.append(" | ".join(cells))
    return rows


class _StyleKinds:
    """Heading level and list-ness of each paragraph style, looked up once per style id."""

    def __init__(self, document) -> None:
        self._styles = document.styles
        self._levels: dict[str | None, int | None] = {}
        self._lists: dict[str | None, bool] = {}

    def _chain(self, style_id: str | None) -> Iterator:
        try:
            style = self._styles.get_by_id(style_id, WD_STYLE_TYPE.PARAGRAPH)
        except (KeyError, ValueError):
            return
        seen = 0
        while style is not None and seen < 16:  # base styles can form a cycle in a hostile file
            yield style
            style = style.base_style
            seen += 1

    def heading_level(self, style_id: str | None) -> int | None:
        if style_id not in self._levels:
            self._levels[style_id] = self._heading_level(style_id)
        return self._levels[style_id]

    def _heading_level(self, style_id: str | None) -> int | None:
        for style in self._chain(style_id):
            name = style.name or ""
            if name.lower() == "title":
                return 1
            match = _HEADING_STYLE.match(name)
            if match:
                return int(match.group(1))
            level = _outline_level(style.element.pPr)
            if level:
                return level
        return None

    def is_list(self, style_id: str | None) -> bool:
        if style_id not in self._lists:
            self._lists[style_id] = any(
                (style.name or "").lower().startswith("list")
                or (style.element.pPr is not None and style.element.pPr.numPr is not None)
                for style in self._chain(style_id)
            )
        return self._lists[style_id]


def _outline_level(ppr: etree._Element | None) -> int | None:
    if ppr is None:
        return None
    node = ppr.find(qn("w:outlineLvl"))
    if node is None:
        return None
    try:
        value = int(node.get(qn("w:val"), ""))
    except ValueError:
        return None
    return value + 1 if 0 <= value < MAX_HEADING_LEVEL else None  # 9 means body text
