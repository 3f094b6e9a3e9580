"""PDF and DOCX files written by real libraries come out as ordered, page-aware elements."""

from __future__ import annotations

import itertools
from io import BytesIO

import docx
import pytest
from docx.enum.style import WD_STYLE_TYPE

from kbtui.extract import ExtractionFailed, extract
from tests.extract.documents import docx_document, docx_with_external_entity, pdf_with_pages


def _outline(elements):
    return [(e.kind, e.level, e.text, e.page) for e in elements if e.kind == "heading"]


def test_pdf_keeps_page_numbers_and_outline_headings():
    data = pdf_with_pages(
        [
            ([(1, "Installation")], ["Install the package with pip.", "Then check the version."]),
            ([(1, "Usage"), (2, "Options")], ["Run kbtui add with a directory."]),
            ([], ["A page without a heading of its own."]),
        ]
    )
    elements = extract(data, "pdf")
    assert _outline(elements) == [
        ("heading", 1, "Installation", 1),
        ("heading", 1, "Usage", 2),
        ("heading", 2, "Options", 2),
    ]
    text_pages = {e.page for e in elements if "pip" in e.text}
    assert text_pages == {1}
    assert [e.page for e in elements if "without a heading" in e.text] == [3]
    # Offsets point into the extracted text: increasing, never overlapping.
    assert all(a.end < b.start for a, b in itertools.pairwise(elements))


def test_pdf_encrypted_with_a_user_password_fails_as_encrypted():
    data = pdf_with_pages([([], ["quarterly numbers"])], owner_password="owner", user_password="reader")
    with pytest.raises(ExtractionFailed) as failure:
        extract(data, "pdf")
    assert failure.value.code == "extract_encrypted"


def test_pdf_with_only_an_owner_password_still_opens():
    data = pdf_with_pages([([], ["printing is restricted but reading is not"])], owner_password="owner")
    assert "reading is not" in " ".join(e.text for e in extract(data, "pdf"))


@pytest.mark.parametrize("cut", [0, 50, 0.5])
def test_pdf_empty_or_truncated_fails_as_corrupt(cut):
    data = pdf_with_pages([([(1, "Title")], ["some text"])])
    keep = int(len(data) * cut) if isinstance(cut, float) else cut
    with pytest.raises(ExtractionFailed) as failure:
        extract(data[:keep], "pdf")
    assert failure.value.code == "extract_corrupt"


def _report(document):
    document.add_heading("Quarterly report", level=0)  # the Title style
    document.add_heading("Revenue", level=1)
    document.add_paragraph("Revenue grew in every region.")
    document.add_paragraph("North", style="List Bullet")
    document.add_paragraph("South", style="List Number")
    document.add_heading("Details", level=2)
    table = document.add_table(rows=2, cols=3)
    for row, values in zip(table.rows, (("Region", "Q1", "Q2"), ("North", "10", "12")), strict=True):
        for cell, value in zip(row.cells, values, strict=True):
            cell.text = value
    document.add_paragraph("After the table.")
    custom = document.styles.add_style("Chapter Heading", WD_STYLE_TYPE.PARAGRAPH)
    custom.base_style = document.styles["Heading 1"]
    document.add_paragraph("Appendix", style="Chapter Heading")


def test_docx_headings_by_style_lists_and_tables_in_order():
    elements = extract(docx_document(_report), "docx")
    assert [(e.kind, e.level, e.text) for e in elements] == [
        ("heading", 1, "Quarterly report"),
        ("heading", 1, "Revenue"),
        ("paragraph", 0, "Revenue grew in every region."),
        ("list_item", 0, "North"),
        ("list_item", 0, "South"),
        ("heading", 2, "Details"),
        ("table", 0, "Region | Q1 | Q2\nNorth | 10 | 12"),
        ("paragraph", 0, "After the table."),
        ("heading", 1, "Appendix"),  # a custom style based on Heading 1
    ]


def test_docx_merged_cells_are_read_once():
    def merged(document):
        table = document.add_table(rows=1, cols=4)
        merged_cell = table.cell(0, 0).merge(table.cell(0, 2))
        merged_cell.text = "wide"
        table.cell(0, 3).text = "narrow"

    [table] = extract(docx_document(merged), "docx")
    assert table.text == "wide | narrow"


def test_docx_password_protected_file_fails_as_encrypted():
    # Word stores a protected .docx as an OLE compound file, not a zip.
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 504
    with pytest.raises(ExtractionFailed) as failure:
        extract(ole, "docx")
    assert failure.value.code == "extract_encrypted"


def test_docx_that_is_not_a_zip_fails_as_corrupt():
    with pytest.raises(ExtractionFailed) as failure:
        extract(b"PK\x03\x04 not really a zip", "docx")
    assert failure.value.code == "extract_corrupt"


def test_python_docx_itself_never_resolves_entities(tmp_path):
    # Defence in depth behind the DOCTYPE pre-scan: the parser would not expand it either.
    secret = tmp_path / "secret.txt"
    secret.write_text("zqx-local-file-canary")
    opened = docx.Document(BytesIO(docx_with_external_entity(secret.as_uri())))
    assert "zqx-local-file-canary" not in "".join(p.text for p in opened.paragraphs)


def test_a_pdf_heading_in_the_middle_of_a_page_owns_only_the_text_below_it():
    # The R FAQ's layout: a section ends, and the next two begin, on one page.
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()
    pdf.start_section("1 Introduction", level=0)
    pdf.multi_cell(0, 7, "1 Introduction", new_x="LMARGIN", new_y="NEXT")
    pdf.multi_cell(0, 7, "This document answers frequent questions.", new_x="LMARGIN", new_y="NEXT")
    pdf.ln(7)
    pdf.start_section("2 What machines does R run on?", level=0)
    pdf.multi_cell(0, 7, "2 What machines does R run on?", new_x="LMARGIN", new_y="NEXT")
    pdf.multi_cell(0, 7, "It runs on Unix, Windows and macOS.", new_x="LMARGIN", new_y="NEXT")
    pdf.ln(7)
    pdf.start_section("2.1 What is R?", level=1)
    pdf.multi_cell(0, 7, "2.1 What is R?", new_x="LMARGIN", new_y="NEXT")
    pdf.multi_cell(0, 7, "R is a system for statistical computation and graphics.", new_x="LMARGIN", new_y="NEXT")
    elements = extract(bytes(pdf.output()), "pdf")
    heading = None
    under: dict[str, list[str]] = {}
    for element in elements:
        if element.kind == "heading":
            heading = element.text
        else:
            under.setdefault(heading, []).append(element.text)
    assert any("statistical computation" in text for text in under["2.1 What is R?"])
    assert any("Unix, Windows" in text for text in under["2 What machines does R run on?"])
    assert not any("statistical computation" in text for text in under["2 What machines does R run on?"])
    assert any("frequent questions" in text for text in under["1 Introduction"])
