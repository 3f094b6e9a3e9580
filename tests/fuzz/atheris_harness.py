"""Coverage-guided fuzzing (atheris) of the query path and the text readers.

Run by tests/fuzz/test_fuzz.py for a bounded time; or by hand:
``python tests/fuzz/atheris_harness.py -max_total_time=300``.
"""

from __future__ import annotations

import contextlib
import sqlite3
import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

with atheris.instrument_imports():
    from kbtui.extract import ExtractionFailed, extract
    from kbtui.retrieval.fts_query import fts_match_expression, parse_query

_DB = sqlite3.connect(":memory:")
_DB.execute("CREATE VIRTUAL TABLE t USING fts5(content, tokenize='porter unicode61 remove_diacritics 2')")
_DB.execute("INSERT INTO t VALUES ('alpha bravo 東京 near or not')")
_FORMATS = ["markdown", "rst", "text", "html", "code:python", "code:go"]


def one_input(data: bytes) -> None:
    provider = atheris.FuzzedDataProvider(data)
    query = provider.ConsumeUnicodeNoSurrogates(200)
    parse_query(query)
    expression = fts_match_expression(query)
    if expression is not None:
        _DB.execute("SELECT count(*) FROM t WHERE t MATCH ?", (expression,)).fetchone()
    fmt = _FORMATS[provider.ConsumeIntInRange(0, len(_FORMATS) - 1)]
    with contextlib.suppress(ExtractionFailed):
        extract(provider.ConsumeBytes(4096), fmt)


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
