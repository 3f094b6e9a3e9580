"""Markdown, reStructuredText, plain text and logs: structure, encodings, offsets."""

from __future__ import annotations

import pytest

from kbtui.chunking import chunk_document
from kbtui.extract import ExtractionFailed, ExtractionLimits, extract, format_for


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("guide.md", "markdown"), ("guide.RST", "rst"), ("notes.txt", "text"), ("README", "text"),
        ("app.log", "log"), ("page.htm", "html"), ("page.html", "html"), ("paper.pdf", "pdf"),
        ("letter.docx", "docx"), ("tool.py", "code:python"), ("main.go", "code:go"), ("lib.rs", "code:rust"),
        ("index.tsx", "code:typescript"), ("Main.java", "code:java"), ("x.hpp", "code:cpp"),
        ("values.yaml", "code:yaml"), ("photo.jpg", "image"), ("scan.TIFF", "image"), ("shot.webp", "image"),
        ("anim.gif", None), ("archive.zip", None), ("old.doc", None),
    ],
)
def test_format_is_chosen_by_extension(name, fmt):
    assert format_for(name) == fmt


def test_markdown_atx_setext_and_fenced_code_with_language():
    source = (
        "Guide\n=====\n\nIntro text.\n\n## Install\n\n```bash\npip install kbtui\n```\n\n"
        "Details\n-------\n\n- first\n- second\n\n### Deep ###\nbody\n"
    )
    elements = extract(source.encode(), "markdown")
    assert [(e.kind, e.level, e.text, e.language) for e in elements] == [
        ("heading", 1, "Guide", None),
        ("paragraph", 0, "Intro text.", None),
        ("heading", 2, "Install", None),
        ("code", 0, "pip install kbtui", "bash"),
        ("heading", 2, "Details", None),
        ("list_item", 0, "- first", None),
        ("list_item", 0, "- second", None),
        ("heading", 3, "Deep", None),
        ("paragraph", 0, "body", None),
    ]
    intro = elements[1]
    assert source[intro.start:intro.end] == "Intro text."


RST = """\
=========
 Runbook
=========

Read this first::

    kbtui status --json

Backups
=======

Nightly at two.

.. code-block:: python
   :linenos:

   restore(latest=True)

Restore steps
-------------

- stop the node
- copy the files

.. note::

   Keep the key safe.

.. _hidden-target:

Checks
------

Verify the checksum.

Second chapter
==============

Text.
"""


def test_rst_titles_by_adornment_and_code_blocks():
    elements = extract(RST.encode(), "rst")
    assert [(e.kind, e.level, e.text, e.language) for e in elements] == [
        ("heading", 1, "Runbook", None),
        ("paragraph", 0, "Read this first:", None),
        ("code", 0, "kbtui status --json", None),
        ("heading", 2, "Backups", None),
        ("paragraph", 0, "Nightly at two.", None),
        ("code", 0, "restore(latest=True)", "python"),
        ("heading", 3, "Restore steps", None),
        ("list_item", 0, "- stop the node", None),
        ("list_item", 0, "- copy the files", None),
        ("paragraph", 0, "Keep the key safe.", None),
        ("heading", 3, "Checks", None),
        ("paragraph", 0, "Verify the checksum.", None),
        ("heading", 2, "Second chapter", None),  # "=" underline, second style seen: level 2 again
        ("paragraph", 0, "Text.", None),
    ]
    code = elements[2]
    assert RST[code.start:code.end].strip() == "kbtui status --json"


@pytest.mark.parametrize("fmt", ["markdown", "rst", "html"])
def test_a_document_of_headings_only_is_indexed_by_its_headings(fmt):
    # A README that is only a title failed as no_text (issue 16, finding 10).
    source = {
        "markdown": "# Runbook index\n\n## Contacts\n",
        "rst": "Runbook index\n=============\n\nContacts\n--------\n",
        "html": "<h1>Runbook index</h1><h2>Contacts</h2>",
    }[fmt]
    elements = extract(source.encode(), fmt)
    assert [(e.kind, e.text) for e in elements] == [
        ("heading", "Runbook index"), ("paragraph", "Runbook index"), ("heading", "Contacts"), ("paragraph", "Contacts"),
    ]
    _, chunks = chunk_document("doc", elements)
    assert [c.heading_path for c in chunks] == ["Runbook index", "Runbook index > Contacts"]


def test_a_heading_with_text_elsewhere_is_left_as_it_is():
    elements = extract(b"# Title\n\n## Empty section\n\n## Filled\n\nbody\n", "markdown")
    assert [e.kind for e in elements] == ["heading", "heading", "heading", "paragraph"]


def test_plain_text_and_logs_are_paragraphs():
    log = b"2026-03-01 disk 91%\n2026-03-01 disk 97%\n\n2026-03-02 resolved\n"
    assert [e.text for e in extract(log, "log")] == ["2026-03-01 disk 91%\n2026-03-01 disk 97%", "2026-03-02 resolved"]


def test_invalid_utf8_is_replaced_and_nul_bytes_stripped():
    data = b"caf\xc3\xa9 ok \xff\xfe broken\x00 tail"
    [element] = extract(data, "text")
    assert element.text == "caf\u00e9 ok \ufffd\ufffd broken tail"


def test_legacy_single_byte_text_falls_back_to_cp1252():
    [element] = extract("Gr\u00fc\u00dfe aus K\u00f6ln, na\u00efve caf\u00e9".encode("cp1252"), "text")
    assert element.text == "Gr\u00fc\u00dfe aus K\u00f6ln, na\u00efve caf\u00e9"


def test_utf16_with_bom_is_decoded():
    [element] = extract("\ufeffhello \u4e16\u754c".encode("utf-16-le"), "text")
    assert element.text == "hello \u4e16\u754c"


def test_the_extracted_character_cap_applies_to_every_format():
    with pytest.raises(ExtractionFailed) as failure:
        extract(b"word " * 1000, "markdown", ExtractionLimits(max_extracted_chars=1000))
    assert failure.value.code == "extract_too_large"
    with pytest.raises(ExtractionFailed) as failure:
        extract(b"<p>" + b"word " * 1000 + b"</p>", "html", ExtractionLimits(max_extracted_chars=1000))
    assert failure.value.code == "extract_too_large"


def test_input_over_the_size_cap_is_refused_before_parsing():
    with pytest.raises(ExtractionFailed) as failure:
        extract(b"x" * 2048, "text", ExtractionLimits(max_input_bytes=1024))
    assert failure.value.code == "extract_too_large"


def test_unknown_format_is_unsupported():
    with pytest.raises(ExtractionFailed) as failure:
        extract(b"data", "spreadsheet")
    assert failure.value.code == "extract_unsupported"
