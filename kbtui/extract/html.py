"""HTML: headings, paragraphs, list items, tables and code blocks in reading order.

A deterministic walk over lxml's tree (no content scoring): boilerplate such
as navigation, footers, sidebars, scripts and styles is dropped by tag and
ARIA role, and when the page marks its main content (``<main>`` or
``role="main"``) only that is read. The parser never resolves entities or
touches the network.

libxml2's "huge" mode is on: without it one text node or attribute over 10 MB
(a ``data:`` image, an inline blob) stops the parse and the whole page failed.
What that mode lifts is bounded here instead: the input by
``max_input_bytes``, the text by ``max_extracted_chars``, memory by the
worker's cap, and nesting by our depth check (libxml2 still stops at 2048
levels), so pathological nesting is ``extract_too_large``, never a hang.
"""

from __future__ import annotations

import codecs
import itertools
import re

from lxml import etree

from kbtui.extract import Element, ExtractionFailed
from kbtui.extract.collect import ElementCollector
from kbtui.extract.limits import ExtractionLimits

# Deeper than any real page nests; libxml2 itself stops at 2048 in huge mode.
MAX_DEPTH = 512

HEADING_LEVELS = {f"h{n}": n for n in range(1, 7)}
SKIPPED_TAGS = {
    "head", "script", "style", "noscript", "template", "nav", "footer", "aside", "svg", "math",
    "iframe", "object", "embed", "canvas", "button", "select", "textarea", "input", "form", "dialog",
}
SKIPPED_ROLES = {"navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar", "toolbar"}
# Permalink anchors that documentation generators put inside headings.
SKIPPED_CLASSES = {"headerlink"}
BLOCK_TAGS = {
    "html", "body", "main", "article", "section", "header", "div", "p", "blockquote", "ul", "ol", "li",
    "dl", "dt", "dd", "figure", "figcaption", "address", "details", "summary", "center", "fieldset",
    "legend", "caption", "hr", "br",
}
_LANGUAGE_CLASS = re.compile(r"\b(?:language|lang|highlight|sourceCode)-([\w+#.-]+)")
_LANGUAGE_ALIASES = {"python3": "python", "py": "python", "pycon": "python", "js": "javascript", "ts": "typescript"}
_NO_LANGUAGE = {"default", "none", "text", "plain", "plaintext", "notranslate"}
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_SPACE = re.compile(r"\s+")


def decode_html(data: bytes) -> str:
    """Decode by BOM, then a ``<meta charset>`` near the top, then UTF-8, then cp1252."""
    for bom, encoding in ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be")):
        if data.startswith(bom):
            return data[len(bom):].decode(encoding, errors="replace")
    declared = _META_CHARSET.search(data[:4096])
    if declared:
        try:
            named: str | None = codecs.lookup(declared.group(1).decode("ascii")).name
        except LookupError:
            named = None
        if named and not named.startswith("utf-16"):
            return data.decode(named, errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


def _parser() -> etree.HTMLParser:
    return etree.HTMLParser(
        no_network=True, remove_comments=True, remove_pis=True, huge_tree=True, recover=True,
    )


def _is_skipped(element: etree._Element) -> bool:
    tag = element.tag
    if tag in SKIPPED_TAGS:
        return True
    if tag == "header" and not any(a.tag in ("article", "main") for a in element.iterancestors()):
        return True  # the page banner; an article's own header holds its title
    attributes = element.attrib
    if attributes.get("role", "").lower() in SKIPPED_ROLES:
        return True
    if "hidden" in attributes or attributes.get("aria-hidden", "").lower() == "true":
        return True
    classes = attributes.get("class")
    return bool(classes) and not SKIPPED_CLASSES.isdisjoint(classes.split())


def _text_of(element: etree._Element, *, keep_whitespace: bool = False) -> str:
    """The visible text under ``element``, skipping boilerplate descendants."""
    parts: list[str] = []
    walker = etree.iterwalk(element, events=("start", "end"))
    for event, node in walker:
        if not isinstance(node.tag, str):
            continue
        if event == "start":
            if node is not element and _is_skipped(node):
                walker.skip_subtree()
            elif node.text:
                parts.append(node.text)
            elif node.tag == "br":
                parts.append("\n")
        elif node is not element and node.tail:
            parts.append(node.tail)
    text = "".join(parts)
    return text.strip("\n") if keep_whitespace else _SPACE.sub(" ", text).strip()


def _code_language(pre: etree._Element) -> str | None:
    candidates = [pre, *pre.iterchildren("code")]
    candidates += list(itertools.islice(pre.iterancestors(), 3))
    for node in candidates:
        match = _LANGUAGE_CLASS.search(node.attrib.get("class", ""))
        if match:
            language = match.group(1).lower()
            if language in _NO_LANGUAGE:
                return None
            return _LANGUAGE_ALIASES.get(language, language)
    return None


def _table_rows(table: etree._Element) -> list[str]:
    rows = []
    # Rows of this table only; a nested table's text stays inside its cell.
    for row in table.xpath("./tr | ./thead/tr | ./tbody/tr | ./tfoot/tr"):
        cells = [_text_of(cell) for cell in row.xpath("./th | ./td")]
        if any(cells):
            rows.append(" | ".join(cells))
    return rows


def _content_root(root: etree._Element) -> etree._Element:
    main = root.xpath("(//main | //*[@role='main'])[1]")
    if main:
        return main[0]
    body = root.find("body")
    return body if body is not None else root


def read_html(data: bytes, limits: ExtractionLimits) -> list[Element]:
    """Structural elements of an HTML page, boilerplate dropped."""
    text = decode_html(data).replace("\x00", "")
    if not text.strip():
        return []
    parser = _parser()
    try:
        root = etree.fromstring(text, parser)
    except (etree.XMLSyntaxError, etree.ParserError, ValueError):
        raise ExtractionFailed("extract_corrupt") from None
    if any(e.type_name == "ERR_RESOURCE_LIMIT" for e in parser.error_log):
        raise ExtractionFailed("extract_too_large")
    if root is None:
        return []
    out = ElementCollector(limits.max_extracted_chars)
    buffer: list[str] = []
    blocks: list[str] = []
    actions: list[str] = []

    def flush() -> None:
        if buffer:
            body = _SPACE.sub(" ", "".join(buffer)).strip()
            buffer.clear()
            if body:
                out.add("list_item" if blocks and blocks[-1] == "li" else "paragraph", body)

    walker = etree.iterwalk(_content_root(root), events=("start", "end"))
    for event, node in walker:
        tag = node.tag if isinstance(node.tag, str) else ""
        if event == "start":
            if len(actions) >= MAX_DEPTH:
                raise ExtractionFailed("extract_too_large")
            if not tag or _is_skipped(node):
                walker.skip_subtree()
                actions.append("skip")
            elif tag in HEADING_LEVELS:
                flush()
                out.add("heading", _text_of(node), level=HEADING_LEVELS[tag])
                walker.skip_subtree()
                actions.append("whole")
            elif tag == "pre":
                flush()
                out.add("code", _text_of(node, keep_whitespace=True), language=_code_language(node))
                walker.skip_subtree()
                actions.append("whole")
            elif tag == "table":
                flush()
                caption = node.find("caption")
                if caption is not None:
                    out.add("paragraph", _text_of(caption))
                out.add("table", "\n".join(_table_rows(node)))
                walker.skip_subtree()
                actions.append("whole")
            elif tag in BLOCK_TAGS:
                flush()
                blocks.append(tag)
                actions.append("block")
                if node.text:
                    buffer.append(node.text)
            else:
                actions.append("inline")
                if node.text:
                    buffer.append(node.text)
        else:
            if actions.pop() == "block":
                flush()
                blocks.pop()
            if node.tail and actions:  # the tail belongs to the parent's flow
                buffer.append(node.tail)
    flush()
    return out.elements
