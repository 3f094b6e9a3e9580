"""HTML: headings, paragraphs, list items, tables and code blocks in reading order.

A deterministic walk over lxml's tree keeps headings, code and tables in
order: boilerplate such as navigation, footers, sidebars, scripts and styles
is dropped by tag and ARIA role, hidden elements (``hidden``, ``aria-hidden``,
an inline ``display: none``) are not read, and when the page marks its main content
(``<main>``, ``role="main"``, or a single ``<article>``) only that is read.
A page without such a landmark (DocBook, texinfo and older generators put
their menus in plain tables and divs) is also given to trafilatura, which is
good at finding the main content: an element of the walk is kept when its
words are in trafilatura's text, a heading when it is or heads kept content.
When trafilatura finds nothing, the whole walk is kept. The parser never
resolves entities or touches the network.

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
from collections import Counter

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
# An inline style that hides its element from every reader: what no one sees is not indexed.
_HIDING_STYLE = re.compile(
    r"(?:^|;)\s*(?:display\s*:\s*none|visibility\s*:\s*(?:hidden|collapse)|content-visibility\s*:\s*hidden)"
    r"\s*(?:!\s*important\s*)?(?:;|$)",
    re.IGNORECASE,
)
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
    if _is_hidden(attributes):
        return True
    classes = attributes.get("class")
    return bool(classes) and not SKIPPED_CLASSES.isdisjoint(classes.split())


def _is_hidden(attributes) -> bool:
    """Hidden from readers: the ``hidden`` attribute (but ``until-found``, which
    find-in-page reveals), ``aria-hidden="true"`` (decoration, duplicates), or
    an inline ``display: none`` / ``visibility: hidden``."""
    hidden = attributes.get("hidden")
    if hidden is not None and hidden.strip().lower() != "until-found":
        return True
    if attributes.get("aria-hidden", "").strip().lower() == "true":
        return True
    return bool(_HIDING_STYLE.search(attributes.get("style", "")))


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
        if _is_skipped(row):
            continue
        cells = [_text_of(cell) for cell in row.xpath("./th | ./td") if not _is_skipped(cell)]
        if any(cells):
            rows.append(" | ".join(cells))
    return rows


def _content_root(root: etree._Element) -> tuple[etree._Element, bool]:
    """Where the page's content is, and whether the page itself said so (a landmark)."""
    main = root.xpath("(//main | //*[@role='main'])[1]")
    if main:
        return main[0], True
    articles = root.xpath("//article")
    if len(articles) == 1:
        return articles[0], True
    body = root.find("body")
    return (body if body is not None else root), False


_WORD = re.compile(r"\w+")
# An element is in trafilatura's text when this share of its lines is among trafilatura's lines.
MAIN_CONTENT_SHARE = 0.5
# An element with at least this share of its text in links is navigation unless trafilatura keeps it.
LINK_SHARE = 0.5
# At most this many link-heavy elements in a row between kept ones are content, not a menu.
CONTENT_GAP = 3
# Below this share of the page's text left, the page is an index of links: kept whole.
INDEX_PAGE_SHARE = 0.3


def _key(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def main_content_text(text: str) -> str | None:
    """The page's main content as trafilatura finds it (plain text, one block a
    line), or None when it finds none."""
    import trafilatura
    from trafilatura.settings import use_config

    config = use_config()
    # No SIGALRM inside the extraction worker: its parent enforces the deadline.
    config.set("DEFAULT", "EXTRACTION_TIMEOUT", "0")
    config.set("DEFAULT", "MIN_EXTRACTED_SIZE", "0")
    try:
        found = trafilatura.extract(
            text, favor_recall=True, include_comments=False, include_tables=True, include_images=False,
            include_formatting=False, include_links=False, deduplicate=False, with_metadata=False,
            output_format="txt", config=config,
        )
    except Exception:  # noqa: BLE001 - trafilatura failing on a page leaves the walk as it is
        return None
    return found if found and found.strip() else None


def keep_main_content(
    elements: list[Element], link_shares: list[float], main_text: str, max_chars: int
) -> list[Element]:
    """The walk's elements without the boilerplate trafilatura saw, in order.

    Menus, sidebars, breadcrumbs and "next / previous" bars are made of
    links: an element mostly of link text goes unless trafilatura's text
    holds it. Everything else stays - trafilatura picks one block of a
    documentation page and would lose the rest. Each of trafilatura's lines
    is claimed once, from the end of the page backwards, so a table of
    contents repeating the headings after it finds them claimed. A short
    run of link-heavy elements between kept ones stays (a menu is a long
    run, a parameter's list of types is not). A heading
    goes with its section when nothing under it stays. When what would stay
    is under :data:`INDEX_PAGE_SHARE` of the words, the page is an index of
    links, which is its content: it is kept whole.
    """
    lines = Counter(key for key in map(_key, main_text.splitlines()) if key)
    keep = [False] * len(elements)
    for index in range(len(elements) - 1, -1, -1):
        own = [key for key in map(_key, elements[index].text.split("\n")) if key]
        matched = 0
        for key in own:
            if lines[key] > 0:
                lines[key] -= 1
                matched += 1
        in_main = bool(own) and matched >= MAIN_CONTENT_SHARE * len(own)
        keep[index] = in_main or link_shares[index] < LINK_SHARE
    _restore_short_gaps(keep)
    for index, element in enumerate(elements):
        if element.kind == "heading" and keep[index]:
            keep[index] = _section_has_content(elements, keep, index)
    total = sum(len(e.text) for e in elements)
    if sum(len(e.text) for e, kept in zip(elements, keep, strict=True) if kept) < INDEX_PAGE_SHARE * total:
        return elements
    out = ElementCollector(max_chars)
    for element, kept in zip(elements, keep, strict=True):
        if kept:
            out.add(element.kind, element.text, level=element.level, language=element.language)
    return out.elements


def _restore_short_gaps(keep: list[bool]) -> None:
    """A few link-heavy elements between kept ones (a parameter's types, a
    "see also") belong to the content; menus come in long runs."""
    index = 0
    while index < len(keep):
        if keep[index]:
            index += 1
            continue
        end = index
        while end < len(keep) and not keep[end]:
            end += 1
        if index > 0 and end < len(keep) and end - index <= CONTENT_GAP:
            keep[index:end] = [True] * (end - index)
        index = end


def _section_has_content(elements: list[Element], keep: list[bool], heading: int) -> bool:
    level = elements[heading].level
    for later in range(heading + 1, len(elements)):
        if elements[later].kind == "heading":
            if elements[later].level <= level:
                return False
            continue
        if keep[later]:
            return True
    return False


def _link_share(node: etree._Element) -> float:
    """How much of ``node``'s text is the text of its links."""
    text = _text_of(node)
    if not text:
        return 0.0
    linked = sum(len(_text_of(a)) for a in node.iter("a"))
    return min(1.0, linked / len(text))


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
    # How much of each element's text sits inside links (parallel to out.elements).
    link_shares: list[float] = []
    buffer: list[str] = []
    blocks: list[str] = []
    actions: list[str] = []
    linked = [0]  # characters of the buffer inside <a>

    def add(kind, body: str, share: float, **fields) -> None:
        before = len(out.elements)
        out.add(kind, body, **fields)
        if len(out.elements) > before:
            link_shares.append(share)

    def take(piece: str) -> None:
        buffer.append(piece)
        if "link" in actions:
            linked[0] += len(piece)

    def flush() -> None:
        if buffer:
            raw = "".join(buffer)
            share = linked[0] / len(raw) if raw else 0.0
            body = _SPACE.sub(" ", raw).strip()
            buffer.clear()
            linked[0] = 0
            if body:
                add("list_item" if blocks and blocks[-1] == "li" else "paragraph", body, share)

    content, landmark = _content_root(root)
    walker = etree.iterwalk(content, events=("start", "end"))
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
                add("heading", _text_of(node), _link_share(node), level=HEADING_LEVELS[tag])
                walker.skip_subtree()
                actions.append("whole")
            elif tag == "pre":
                flush()
                add("code", _text_of(node, keep_whitespace=True), 0.0, language=_code_language(node))
                walker.skip_subtree()
                actions.append("whole")
            elif tag == "table":
                flush()
                caption = node.find("caption")
                if caption is not None:
                    add("paragraph", _text_of(caption), _link_share(caption))
                add("table", "\n".join(_table_rows(node)), _link_share(node))
                walker.skip_subtree()
                actions.append("whole")
            elif tag in BLOCK_TAGS:
                flush()
                blocks.append(tag)
                actions.append("block")
                if node.text:
                    take(node.text)
            else:
                actions.append("link" if tag == "a" else "inline")
                if node.text:
                    take(node.text)
        else:
            if actions.pop() == "block":
                flush()
                blocks.pop()
            if node.tail and actions:  # the tail belongs to the parent's flow
                take(node.tail)
    flush()
    if landmark or not out.elements:
        return out.elements
    main_text = main_content_text(text)
    if main_text is None:
        return out.elements
    return keep_main_content(out.elements, link_shares, main_text, limits.max_extracted_chars)
