"""Properties of the chunker that must hold for any text (hypothesis, bounded)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbtui.chunking import ChunkSettings, chunk_document, estimate_tokens, is_wide, split_text
from kbtui.extract import Element

BOUNDED = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

LATIN = "abcdefghijklmnopqrstuvwxyzÀéü0123456789_-.,"
CJK = "東京都に住んでいます日本語한국어中文字"
EMOJI = "🙂🚀🔥✅"
# Words of at most 6 characters: at 2 tokens an emoji, any word fits every budget drawn below.
words = st.one_of(
    st.text(alphabet=LATIN, min_size=1, max_size=6),
    st.text(alphabet=CJK, min_size=1, max_size=6),
    st.text(alphabet=EMOJI, min_size=1, max_size=3),
)
separators = st.sampled_from([" ", " ", " ", "\n", "  ", "\t"])


@st.composite
def texts(draw, min_words: int = 1, max_words: int = 300) -> str:
    items = draw(st.lists(words, min_size=min_words, max_size=max_words))
    return "".join(w + draw(separators) for w in items).rstrip()


bounds = st.tuples(
    st.integers(min_value=24, max_value=400),  # max chars
    st.integers(min_value=12, max_value=120),  # max tokens
    st.integers(min_value=0, max_value=120),  # overlap
)


def _cuts_a_word(text: str, i: int) -> bool:
    """Whether position ``i`` falls inside a run of non-space, non-CJK characters."""
    if i <= 0 or i >= len(text):
        return False
    before, after = text[i - 1], text[i]
    return not (before.isspace() or after.isspace() or is_wide(before) or is_wide(after))


@BOUNDED
@given(texts(), bounds)
def test_windows_respect_both_bounds_and_never_cut_a_word(text, limits):
    max_chars, max_tokens, overlap = limits
    for start, end in split_text(text, max_chars, max_tokens, overlap):
        assert end - start <= max_chars
        assert estimate_tokens(text[start:end]) <= max_tokens
        assert not _cuts_a_word(text, start) and not _cuts_a_word(text, end)


@BOUNDED
@given(texts(), bounds)
def test_windows_cover_the_text_in_order(text, limits):
    windows = split_text(text, *limits)
    covered = set()
    for start, end in windows:
        covered.update(range(start, end))
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())
    starts = [start for start, _ in windows]
    assert starts == sorted(set(starts))  # always moving forward


@BOUNDED
@given(st.lists(texts(max_words=80), min_size=1, max_size=5), bounds, st.integers(min_value=1, max_value=3))
def test_chunks_respect_bounds_cover_sections_and_are_deterministic(paragraphs, limits, depth):
    max_chars, max_tokens, overlap = limits
    chunk_settings = ChunkSettings(
        max_chunk_chars=max_chars, max_chunk_tokens=max_tokens, overlap_chars=overlap, min_chunk_tokens=12
    )
    elements = [Element("heading", f"Level {level}", level=level) for level in range(1, depth + 1)]
    elements += [Element("paragraph", p) for p in paragraphs]
    sections, chunks = chunk_document("doc", elements, settings=chunk_settings, parser_version=2)

    trail = " > ".join(f"Level {level}" for level in range(1, depth + 1))
    section_budget = max(max_tokens - estimate_tokens(trail + "\n\n"), chunk_settings.min_chunk_tokens // 2)
    for chunk in chunks:
        assert chunk.heading_path == trail
        assert len(chunk.content) <= max_chars
        assert estimate_tokens(chunk.content) <= section_budget
        if section_budget > chunk_settings.min_chunk_tokens // 2:
            assert chunk.token_estimate <= max_tokens  # trail + content fit the budget
    # Every whole word, and every character of CJK runs (which break anywhere), is in a chunk.
    chunk_words = {w for c in chunks for w in c.content.split()}
    latin_words = {w for p in paragraphs for w in p.split() if not any(is_wide(ch) for ch in w)}
    assert latin_words <= chunk_words
    assert {ch for p in paragraphs for ch in p if not ch.isspace()} <= {ch for c in chunks for ch in c.content}

    again = chunk_document("doc", elements, settings=chunk_settings, parser_version=2)
    assert again == (sections, chunks)
    assert [c.chunk_uid for c in again[1]] == [c.chunk_uid for c in chunks]


@BOUNDED
@given(st.integers(min_value=400, max_value=2000), st.integers(min_value=20, max_value=200))
def test_cjk_gets_proportionally_smaller_chunks_than_latin(length, max_tokens):
    chunk_settings = ChunkSettings(max_chunk_chars=4 * max_tokens + 100, max_chunk_tokens=max_tokens, overlap_chars=0)
    latin = chunk_document("d", [Element("paragraph", ("abc " * length)[:length])], settings=chunk_settings)[1]
    cjk = chunk_document("d", [Element("paragraph", ("日本語" * length)[:length])], settings=chunk_settings)[1]
    # A CJK character is about a token, four ASCII characters are.
    assert max(len(c.content) for c in cjk) <= chunk_settings.token_budget(None)
    assert len(cjk) >= 3 * len(latin) - 3
