"""Header-boundary chunking: deterministic, token-aware, provenance-rich.

Each heading opens a section (a level stack keeps the H1 > H2 trail); the
section's body is cut into overlapping chunks at whichever bound comes first,
the token budget or the character ceiling, always at the last whitespace
before the limit. The heading trail is prepended to the text that gets
embedded ("contextual content") and its cost is taken off the token budget.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import json
import unicodedata
from collections import Counter
from dataclasses import dataclass

from kbtui.extract import Element
from kbtui.settings import setting, validate_settings

# Bumped whenever the same elements would produce different chunks under the
# default settings (a change of the defaults included). What an operator sets
# in config.toml is added by chunker_version().
CHUNKER_VERSION = 2
# chunker_version(): the settings fingerprint takes the last ten decimal digits.
_SETTINGS_SPAN = 10**10

HEADING_SEPARATOR = " > "
# A heading longer than this is cut (at a word) in the trail: a real heading
# is short, and a runaway one would eat the whole token budget of every
# chunk under it.
MAX_HEADING_CHARS = 200


@dataclass(frozen=True)
class ChunkSettings:
    """The ``[chunking]`` table of ``config.toml``, range-checked when made.

    The floors keep every window moving forward: with no characters or no
    tokens to spend (``max_chunk_chars = 0``) the splitter never advanced.
    """

    max_chunk_chars: int = setting(1200, minimum=16, maximum=1_000_000)
    max_chunk_tokens: int = setting(300, minimum=8, maximum=100_000)
    overlap_chars: int = setting(150, minimum=0, maximum=1_000_000)
    # When the embedder's context window is known the token budget tightens to
    # window - reserve (intent prefix + special tokens), never below the floor.
    window_reserve_tokens: int = setting(16, minimum=0, maximum=100_000)
    min_chunk_tokens: int = setting(48, minimum=8, maximum=100_000)

    def __post_init__(self) -> None:
        validate_settings(self, "chunking")

    def token_budget(self, context_window: int | None) -> int:
        budget = self.max_chunk_tokens
        if context_window:
            budget = min(budget, context_window - self.window_reserve_tokens)
        return max(budget, self.min_chunk_tokens)


def chunker_version(settings: ChunkSettings) -> int:
    """The chunker version a document is indexed under, and that exact
    embedding reuse matches on: :data:`CHUNKER_VERSION` under the default
    settings, else that number followed by ten digits of a stable fingerprint
    of the settings that differ from the defaults.

    So changing the chunk size or overlap marks the documents indexed under
    the old settings stale, and no vector is reused across settings. It stays
    an integer (the version column and the reuse key are unchanged), and
    documents indexed under the defaults before settings counted stay current.
    """
    defaults = dataclasses.asdict(ChunkSettings())
    changed = {k: v for k, v in dataclasses.asdict(settings).items() if defaults.get(k) != v}
    if not changed:
        return CHUNKER_VERSION
    digest = hashlib.sha256(json.dumps(changed, sort_keys=True).encode()).digest()
    return CHUNKER_VERSION * _SETTINGS_SPAN + int.from_bytes(digest[:8], "big") % _SETTINGS_SPAN


@dataclass(frozen=True)
class SectionSpec:
    ordinal: int
    heading_path: str
    level: int
    start_offset: int
    end_offset: int
    page: int | None


@dataclass(frozen=True)
class ChunkSpec:
    chunk_uid: str
    ordinal: int
    section_ordinal: int
    content: str
    contextual_content: str  # what gets embedded: heading trail + content
    content_hash: str  # sha256 of contextual_content
    heading_path: str
    kind: str
    language: str | None
    symbol: str | None
    page: int | None
    start_offset: int
    end_offset: int
    token_estimate: int
    source_path: str = ""


def is_wide(ch: str) -> bool:
    """CJK ideographs, kana, Hangul and fullwidth forms: about a token each, no spaces between words."""
    code = ord(ch)
    return (
        0x1100 <= code <= 0x11FF  # Hangul jamo
        or 0x2E80 <= code <= 0x9FFF  # CJK radicals, punctuation, kana, unified ideographs
        or 0xAC00 <= code <= 0xD7AF  # Hangul syllables
        or 0xF900 <= code <= 0xFAFF  # CJK compatibility ideographs
        or 0xFF00 <= code <= 0xFFEF  # fullwidth and halfwidth forms
        or 0x20000 <= code <= 0x3FFFF  # CJK extensions
    )


def char_weight(ch: str) -> int:
    """Weight of one character in quarter tokens (so ASCII prose is ~4 chars/token)."""
    code = ord(ch)
    if code < 0x80:
        return 1
    if is_wide(ch):
        return 4
    if code >= 0x1F000 or unicodedata.category(ch) == "So":
        return 8  # emoji and symbols: often several byte-pair tokens each
    return 2


def estimate_tokens(text: str) -> int:
    """Deterministic token estimate: weighted characters / 4, rounded up."""
    if text.isascii():
        return -(-len(text) // 4)
    return -(-sum(char_weight(ch) for ch in text) // 4)


@dataclass
class _Span:
    body_start: int
    body_end: int
    element: Element


@dataclass
class _Section:
    ordinal: int
    trail: tuple[str, ...]
    level: int
    start_offset: int
    page: int | None
    body: list[str]
    spans: list[_Span]
    body_len: int = 0
    end_offset: int = 0


def chunk_document(
    document_id: str,
    elements: list[Element],
    *,
    source_path: str = "",
    settings: ChunkSettings = ChunkSettings(),
    context_window: int | None = None,
    parser_version: int = 0,
) -> tuple[list[SectionSpec], list[ChunkSpec]]:
    """Split ``elements`` into sections and chunks; same input gives identical output."""
    sections = _build_sections(elements)
    budget = settings.token_budget(context_window)
    chunks: list[ChunkSpec] = []
    section_specs: list[SectionSpec] = []
    for section in sections:
        heading_path = HEADING_SEPARATOR.join(_short_heading(title) for title in section.trail)
        section_specs.append(
            SectionSpec(
                section.ordinal, heading_path, section.level,
                section.start_offset, section.end_offset, section.page,
            )
        )
        body = "".join(section.body)
        span_ends = [span.body_end for span in section.spans]  # increasing: spans are in body order
        if not body.strip():
            continue
        prefix = f"{heading_path}\n\n" if heading_path else ""
        section_budget = max(budget - estimate_tokens(prefix), settings.min_chunk_tokens // 2)
        for start, end in split_text(body, settings.max_chunk_chars, section_budget, settings.overlap_chars):
            content = body[start:end].strip()
            if not content:
                continue
            contextual = prefix + content
            content_hash = hashlib.sha256(contextual.encode("utf-8")).hexdigest()
            ordinal = len(chunks)
            uid_source = f"{document_id}|{parser_version}|{CHUNKER_VERSION}|{ordinal}|{content_hash}"
            covering = []
            for span in section.spans[bisect.bisect_right(span_ends, start):]:
                if span.body_start >= end:
                    break
                covering.append(span)
            kind, language, symbol, page = _provenance(covering, start, end)
            chunks.append(
                ChunkSpec(
                    chunk_uid=hashlib.sha256(uid_source.encode()).hexdigest()[:32],
                    ordinal=ordinal,
                    section_ordinal=section.ordinal,
                    content=content,
                    contextual_content=contextual,
                    content_hash=content_hash,
                    heading_path=heading_path,
                    kind=kind,
                    language=language,
                    symbol=symbol,
                    page=page,
                    start_offset=_document_offset(covering, start, first=True),
                    end_offset=_document_offset(covering, end, first=False),
                    token_estimate=estimate_tokens(contextual),
                    source_path=source_path,
                )
            )
    return section_specs, chunks


def _build_sections(elements: list[Element]) -> list[_Section]:
    stack: list[tuple[int, str]] = []
    current = _Section(0, (), 0, 0, None, [], [])
    sections = [current]
    for element in elements:
        if element.kind == "heading":
            while stack and stack[-1][0] >= element.level:
                stack.pop()
            stack.append((element.level, element.text.strip()))
            current.end_offset = max(current.end_offset, element.start)
            current = _Section(
                len(sections), tuple(t for _, t in stack), element.level,
                element.start, element.page, [], [],
            )
            sections.append(current)
            continue
        text = element.text.strip("\n")
        if not text.strip():
            continue
        if current.body:
            current.body.append("\n\n")
            current.body_len += 2
        current.spans.append(_Span(current.body_len, current.body_len + len(text), element))
        current.body.append(text)
        current.body_len += len(text)
        current.end_offset = max(current.end_offset, element.end)
        if current.page is None:
            current.page = element.page
    # Drop the implicit leading section when the document starts with a heading.
    if not sections[0].body and len(sections) > 1:
        sections = sections[1:]
    return sections


def split_text(text: str, max_chars: int, max_tokens: int, overlap: int) -> list[tuple[int, int]]:
    """Cut ``text`` into ``(start, end)`` windows bounded by chars and tokens.

    A window ends at the last break opportunity before the limit (whitespace,
    or beside a CJK character, where no spaces separate words), so no word is
    cut unless a single word is longer than the limit. Consecutive windows
    overlap by up to ``overlap`` weighted characters (see
    :func:`_overlap_start`), never more than half the window just cut (so
    small windows still advance), starting at a word boundary.
    """
    n = len(text)
    windows: list[tuple[int, int]] = []
    start = _skip_space(text, 0)
    while start < n:
        limit = min(start + max_chars, _token_limit(text, start, max_tokens, max_chars), n)
        if limit >= n:
            windows.append((start, n))
            break
        end = _last_break(text, start, limit)
        windows.append((start, end))
        next_start = _skip_space(text, end)
        back = _overlap_start(text, start, end, min(overlap, (end - start) // 2))
        # Begin the overlap at a word start so the next chunk has whole words.
        while back < end and not (_is_break(text, back) and not text[back].isspace()):
            back += 1
        if back < end:
            next_start = back
        if next_start <= start:
            next_start = end
        start = next_start
    return windows


def _token_limit(text: str, start: int, max_tokens: int, max_chars: int) -> int:
    """The index where ``text[start:]`` exceeds ``max_tokens`` estimated tokens."""
    allowance = max_tokens * 4
    # ASCII weighs 1 per character: no need to walk it one by one.
    if text[start : start + min(allowance, max_chars) + 1].isascii():
        return min(start + allowance, len(text))
    i, used, n = start, 0, len(text)
    while i < n:
        used += char_weight(text[i])
        if used > allowance:
            return i
        i += 1
    return n


def _overlap_start(text: str, start: int, end: int, overlap: int) -> int:
    """Where the overlap before ``end`` begins: ``overlap`` weighted characters back.

    Measured in the token weights, so the overlap costs the same share of the
    token budget in any script (150 ASCII characters, or about 37 CJK ones).
    """
    floor = max(start + 1, end - overlap)
    if text[floor:end].isascii():
        return floor
    back, used = end, 0
    while back > floor:
        used += char_weight(text[back - 1])
        if used > overlap:
            break
        back -= 1
    return back


def _is_break(text: str, i: int) -> bool:
    """Whether a line may break between ``text[i - 1]`` and ``text[i]`` without cutting a word."""
    before, after = text[i - 1], text[i] if i < len(text) else " "
    return before.isspace() or after.isspace() or is_wide(before) or is_wide(after)


def _last_break(text: str, start: int, limit: int) -> int:
    for i in range(limit, start, -1):
        if _is_break(text, i):
            return i
    return limit  # one word longer than the limit: a hard cut is unavoidable


def _short_heading(title: str) -> str:
    if len(title) <= MAX_HEADING_CHARS:
        return title
    cut = title.rfind(" ", 0, MAX_HEADING_CHARS)
    return title[: cut if cut > 0 else MAX_HEADING_CHARS].rstrip() + "\u2026"


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i].isspace():
        i += 1
    return i


def _provenance(spans: list[_Span], start: int, end: int) -> tuple[str, str | None, str | None, int | None]:
    if not spans:
        return "prose", None, None, None
    weight: Counter[str] = Counter()
    for span in spans:
        overlap = min(end, span.body_end) - max(start, span.body_start)
        weight[_KIND_OF_ELEMENT[span.element.kind]] += max(overlap, 0)
    kind = max(sorted(weight), key=lambda k: weight[k])
    # The language of the chunk's main kind: a prose chunk quoting a snippet stays unlabelled.
    language = next(
        (s.element.language for s in spans if s.element.language and _KIND_OF_ELEMENT[s.element.kind] == kind),
        None,
    )
    symbol = next((s.element.symbol for s in spans if s.element.symbol), None)
    page = next((s.element.page for s in spans if s.element.page is not None), None)
    return kind, language, symbol, page


_KIND_OF_ELEMENT = {
    "paragraph": "prose",
    "heading": "prose",
    "list_item": "list",
    "table": "table",
    "code": "code",
}


def _document_offset(spans: list[_Span], body_pos: int, *, first: bool) -> int:
    if not spans:
        return 0
    span = spans[0] if first else spans[-1]
    delta = min(max(body_pos - span.body_start, 0), span.body_end - span.body_start)
    return min(span.element.start + delta, span.element.end) if span.element.end else span.element.start
