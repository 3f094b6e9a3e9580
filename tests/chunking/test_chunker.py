"""Header-boundary chunking, as the reference specifies it, on concrete documents."""

from __future__ import annotations

import hashlib
import itertools

from kbtui.chunking import (
    CHUNKER_VERSION,
    MAX_HEADING_CHARS,
    ChunkSettings,
    chunk_document,
    estimate_tokens,
    split_text,
)
from kbtui.extract import Element, extract

SOURCE = """# Operations

Intro to operations.

## Backups

Nightly base backups.

### Retention

Keep seven days.

## Restore

```bash
pg_ctl stop
```

| not | a table in markdown |

- step one
"""


def _chunks(elements, **kwargs):
    return chunk_document("doc-1", elements, **kwargs)[1]


def test_heading_trail_follows_the_level_stack():
    sections, chunks = chunk_document("doc-1", extract(SOURCE.encode(), "markdown"))
    assert [s.heading_path for s in sections] == [
        "Operations",
        "Operations > Backups",
        "Operations > Backups > Retention",
        "Operations > Restore",  # the H2 pops the H3 and the previous H2
    ]
    assert [(c.heading_path, c.content) for c in chunks][:3] == [
        ("Operations", "Intro to operations."),
        ("Operations > Backups", "Nightly base backups."),
        ("Operations > Backups > Retention", "Keep seven days."),
    ]


def test_the_trail_is_prepended_to_what_gets_embedded_and_hashed():
    chunk = _chunks(extract(SOURCE.encode(), "markdown"))[2]
    assert chunk.contextual_content == "Operations > Backups > Retention\n\nKeep seven days."
    assert chunk.content_hash == hashlib.sha256(chunk.contextual_content.encode()).hexdigest()
    assert chunk.token_estimate == estimate_tokens(chunk.contextual_content)


def test_offsets_point_back_into_the_source():
    chunks = _chunks(extract(SOURCE.encode(), "markdown"))
    for chunk in chunks[:3]:  # one paragraph each: the slice is exactly the text
        assert SOURCE[chunk.start_offset:chunk.end_offset] == chunk.content
    for chunk in chunks:  # mixed elements: the slice spans them, fences and all
        region = SOURCE[chunk.start_offset:chunk.end_offset]
        assert all(word in region for word in chunk.content.split())


def test_kinds_languages_symbols_pages_and_source_path_are_carried():
    elements = [
        Element("heading", "API", level=1, page=3),
        Element("code", "def rotate():\n    pass", language="python", symbol="rotate", page=3),
        Element("heading", "Limits", level=1, page=4),
        Element("table", "name | value\nmax | 10", page=4),
        Element("heading", "Steps", level=1, page=5),
        Element("list_item", "first", page=5),
        Element("list_item", "second", page=5),
    ]
    chunks = _chunks(elements, source_path="docs/api.pdf")
    assert [(c.kind, c.language, c.symbol, c.page, c.source_path) for c in chunks] == [
        ("code", "python", "rotate", 3, "docs/api.pdf"),
        ("table", None, None, 4, "docs/api.pdf"),
        ("list", None, None, 5, "docs/api.pdf"),
    ]


def test_a_prose_chunk_quoting_a_snippet_is_not_labelled_with_its_language():
    elements = [
        Element("paragraph", "A long explanation of the rotation procedure and why it matters. " * 3),
        Element("code", "x=1", language="python"),
    ]
    [chunk] = _chunks(elements)
    assert (chunk.kind, chunk.language) == ("prose", None)


def test_long_sections_split_at_whitespace_with_overlap():
    words = [f"word{i:03d}" for i in range(120)]
    settings = ChunkSettings(max_chunk_chars=100, max_chunk_tokens=300, overlap_chars=20)
    chunks = _chunks([Element("paragraph", " ".join(words))], settings=settings)
    assert len(chunks) > 5
    for chunk in chunks:
        assert len(chunk.content) <= 100
        assert all(token in words for token in chunk.content.split())  # whole words only
    for previous, current in itertools.pairwise(chunks):
        assert previous.content.split()[-1] in current.content.split()[:3]  # the overlap


def test_the_token_budget_tightens_to_the_embedder_window_with_a_floor():
    settings = ChunkSettings(max_chunk_chars=1200, max_chunk_tokens=300, window_reserve_tokens=16, min_chunk_tokens=48)
    assert settings.token_budget(None) == 300
    assert settings.token_budget(128) == 112
    assert settings.token_budget(512) == 300  # only ever tightens
    assert settings.token_budget(20) == 48  # a tiny window cannot collapse chunking
    text = " ".join(["lorem"] * 2000)
    chunks = _chunks([Element("paragraph", text)], settings=settings, context_window=128)
    assert max(c.token_estimate for c in chunks) <= 112


def test_the_heading_trail_cost_comes_off_the_budget():
    trail = "Chapter about a rather long subject name"
    settings = ChunkSettings(max_chunk_chars=1200, max_chunk_tokens=60, overlap_chars=0, min_chunk_tokens=8)
    chunks = _chunks([Element("heading", trail, level=1), Element("paragraph", "alpha " * 400)], settings=settings)
    assert all(c.token_estimate <= 60 for c in chunks)
    assert all(estimate_tokens(c.content) <= 60 - estimate_tokens(trail + "\n\n") for c in chunks)


def test_cjk_text_gets_proportionally_smaller_chunks():
    settings = ChunkSettings(max_chunk_chars=1200, max_chunk_tokens=300, overlap_chars=0)
    latin = _chunks([Element("paragraph", "tokyo " * 1000)], settings=settings)
    cjk = _chunks([Element("paragraph", "東京都に住んでいます。" * 300)], settings=settings)
    assert max(len(c.content) for c in latin) > 1100  # ASCII: the character ceiling binds
    assert max(len(c.content) for c in cjk) <= 300  # CJK: about one token a character


def test_a_runaway_heading_is_shortened_in_the_trail():
    heading = "word " * 100
    [chunk] = _chunks([Element("heading", heading, level=1), Element("paragraph", "body")])
    assert len(chunk.heading_path) <= MAX_HEADING_CHARS + 1 and chunk.heading_path.endswith("\u2026")


def test_ids_are_stable_and_depend_on_document_versions_and_position():
    elements = extract(SOURCE.encode(), "markdown")
    first = _chunks(elements, parser_version=2)
    assert first == _chunks(elements, parser_version=2)
    assert len({c.chunk_uid for c in first}) == len(first)
    other_document = chunk_document("doc-2", elements, parser_version=2)[1]
    other_parser = _chunks(elements, parser_version=3)
    for a, b, c in zip(first, other_document, other_parser, strict=True):
        assert a.chunk_uid != b.chunk_uid and a.chunk_uid != c.chunk_uid
        assert a.content_hash == b.content_hash == c.content_hash
    assert CHUNKER_VERSION >= 2


def test_a_document_without_headings_is_one_untitled_section():
    sections, chunks = chunk_document("doc-1", [Element("paragraph", "just text")])
    assert [s.heading_path for s in sections] == [""]
    assert [(c.heading_path, c.contextual_content) for c in chunks] == [("", "just text")]


def test_split_text_never_loops_on_small_windows_with_big_overlap():
    windows = split_text("ab " * 500, max_chars=10, max_tokens=300, overlap=150)
    assert len(windows) < 400
    assert all(end - start <= 10 for start, end in windows)
