"""The formats table is the one place that maps an extension to a format and a
format to its reader: a new format is a reader module plus one row."""

from __future__ import annotations

from collections import Counter

import pytest

from kbtui.extract import ExtractionFailed, extract, format_for, formats
from kbtui.extract.formats import FORMATS, Format


def test_every_row_names_a_reader_that_loads():
    for row in FORMATS:
        assert callable(row.load_reader()), row.name


def test_every_extension_belongs_to_exactly_one_format():
    counts = Counter(ext for row in FORMATS for ext in row.extensions)
    assert [ext for ext, n in counts.items() if n > 1] == []
    for row in FORMATS:
        for ext in row.extensions:
            assert format_for(f"FILE{ext.upper()}" if ext else "README") == row.name


def test_a_new_row_is_all_a_new_format_needs(monkeypatch):
    row = Format("notes", (".notes",), "text:read_plain", "text")
    # What adding the row to FORMATS puts in the two lookups derived from it.
    monkeypatch.setitem(formats.FORMAT_BY_NAME, row.name, row)
    monkeypatch.setitem(formats.FORMAT_BY_EXTENSION, ".notes", row.name)
    assert format_for("meeting.notes") == "notes"
    assert [e.text for e in extract(b"first\n\nsecond\n", "notes")] == ["first", "second"]


def test_a_format_without_a_row_is_unsupported():
    with pytest.raises(ExtractionFailed) as failure:
        extract(b"data", "spreadsheet")
    assert failure.value.code == "extract_unsupported"
