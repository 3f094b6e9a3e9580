"""Fuzzing, bounded in time: the extractors and the search path never fail
with anything but their own reason codes, whatever the input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbtui.extract import ExtractionFailed, extract
from kbtui.retrieval.fts_query import fts_match_expression
from store.db import database
from tests.extract.documents import docx_document, pdf_with_pages

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# Text that leans on what breaks query parsers: FTS5 syntax, quotes, control
# characters, NUL, surrogate-adjacent code points, CJK and emoji.
hostile_text = st.text(
    alphabet=st.one_of(
        st.sampled_from(list('"*()-:^+{}[]~\'\\NEARORANDNOT \t\n\x00\u200b\u202e東京📝')),
        st.characters(blacklist_categories=["Cs"]),
    ),
    max_size=80,
)


@pytest.fixture(scope="module")
def searchable(tmp_path_factory):
    from kbtui.config import Config
    from kbtui.node import Node
    from store import catalog

    home = tmp_path_factory.mktemp("fuzzhome")
    os.environ["KBTUI_EMBEDDING_PROVIDER"] = "hash"
    try:
        node = Node.open(Config.load(home))
    finally:
        del os.environ["KBTUI_EMBEDDING_PROVIDER"]
    docs = home / "docs"
    docs.mkdir()
    ids = []
    for i, text in enumerate(["# NEAR\n\nnear or and not col:foo", "# 東京\n\n東京都に住んでいます", "# Plain\n\nalpha bravo"]):
        path = docs / f"d{i}.md"
        path.write_text(text)
        ids.append(catalog.add_document(node.store, "DEFAULT", path, display_name=path.name, fmt="markdown").document_id)
    assert set(node.index(ids).values()) == {"Indexed"}
    yield node
    node.close()


@FUZZ
@given(query=hostile_text)
def test_search_never_raises_and_never_reports_an_sqlite_error(searchable, query):
    database.connect(reuse_if_open=True)
    response = searchable.search(query, "DEFAULT", limit=5)
    assert "lexical_failed" not in response.degraded
    assert "search_failed" not in response.degraded
    expression = fts_match_expression(query)
    if expression is not None:
        database.execute_sql("SELECT count(*) FROM chunk_fts WHERE chunk_fts MATCH ?", (expression,)).fetchone()


def _seeds() -> dict[str, bytes]:
    return {
        "pdf": pdf_with_pages([([(1, "Title")], ["Body text on a page."])]),
        "docx": docx_document(lambda d: (d.add_heading("Head", 1), d.add_paragraph("Para"))),
        "html": b"<html><body><h1>T</h1><p>para</p><table><tr><td>c</td></tr></table></body></html>",
        "markdown": b"# T\n\n```py\ncode\n```\n\n- item\n",
        "rst": b"Title\n=====\n\ntext\n",
        "code:python": b"def f():\n    return 1\n\nclass C:\n    pass\n",
    }


SEEDS = _seeds()


@FUZZ
@given(
    fmt=st.sampled_from(sorted(SEEDS)),
    edits=st.lists(st.tuples(st.floats(0, 1), st.binary(min_size=0, max_size=8)), max_size=6),
    cut=st.floats(0.05, 1.0),
)
def test_mutated_documents_fail_only_with_reason_codes(fmt, edits, cut):
    data = bytearray(SEEDS[fmt])
    for where, replacement in edits:
        at = int(where * len(data))
        data[at : at + len(replacement)] = replacement
    data = bytes(data[: max(1, int(cut * len(data)))])
    try:
        elements = extract(data, fmt)
    except ExtractionFailed as failure:
        assert failure.code.startswith("extract_") or failure.code == "binary_content"
        return
    for element in elements:
        assert "\x00" not in element.text


ATHERIS_HARNESS = Path(__file__).with_name("atheris_harness.py")


def test_atheris_finds_no_crash_in_the_query_path_and_text_readers():
    atheris_available = subprocess.run([sys.executable, "-c", "import atheris"], capture_output=True).returncode == 0
    if not atheris_available:
        pytest.skip("atheris does not install on this platform; the hypothesis fuzzers above still run")
    result = subprocess.run(
        [sys.executable, str(ATHERIS_HARNESS), "-max_total_time=20", "-rss_limit_mb=2048"],
        capture_output=True, text=True, timeout=180, cwd=Path(__file__).parents[2],
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Done" in result.stderr or "DONE" in result.stderr
