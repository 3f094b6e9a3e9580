"""Real documents for the extraction tests, written by the libraries that make them.

Good files come from fpdf2 (PDF) and python-docx (DOCX); hostile ones start
from a good file and are then bent by hand where a library would refuse.
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from io import BytesIO

import docx
from fpdf import FPDF
from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject, StreamObject


def pdf_with_pages(pages: list[tuple[list[tuple[int, str]], list[str]]], **encryption: str) -> bytes:
    """A PDF with one page per entry: (outline headings as (level, title), paragraphs)."""
    pdf = FPDF()
    if encryption:
        pdf.set_encryption(**encryption)
    pdf.set_font("Helvetica", size=11)
    for headings, paragraphs in pages:
        pdf.add_page()
        for level, title in headings:
            pdf.start_section(title, level=level - 1)
            pdf.multi_cell(0, 7, title, new_x="LMARGIN", new_y="NEXT")
        for paragraph in paragraphs:
            pdf.multi_cell(0, 7, paragraph, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(7)
    return bytes(pdf.output())


def _pdf_with_content_stream(stream: StreamObject) -> bytes:
    return _pdf_with_content_streams([stream])


def _pdf_with_content_streams(streams: list[StreamObject]) -> bytes:
    """A PDF of one page per content stream (Helvetica as /F1)."""
    writer = PdfWriter()
    font = writer._add_object(
        DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
            }
        )
    )
    for stream in streams:
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        page[NameObject("/Contents")] = writer._add_object(stream)
    out = BytesIO()
    writer.write(out)
    return out.getvalue()


def slow_pdf(pages: int = 10, operators_per_page: int = 200_000) -> bytes:
    """A small PDF of pages full of text operators: pypdf needs about a minute
    for it, the deadline much less. Each page's stream stays under pypdf's own
    parsing budget (2 million tokens per stream, pypdf 6.6+): one page over it
    fails as extract_too_large after a few seconds, which a fast machine reaches
    before a 5 s deadline."""
    content = DecodedStreamObject()
    content.set_data(b"BT /F1 12 Tf " + b"1 0 0 1 10 10 Tm (x) Tj " * operators_per_page + b"ET")
    encoded = content.flate_encode()
    return _pdf_with_content_streams([encoded] * pages)


def flate_bomb_pdf(expanded_bytes: int) -> bytes:
    """A PDF whose content stream inflates from about a thousandth of its size to ``expanded_bytes``."""
    compressor = zlib.compressobj(9)
    block = b" " * (1 << 20)
    parts = [compressor.compress(block) for _ in range(expanded_bytes >> 20)]
    parts.append(compressor.flush())
    stream = StreamObject()
    stream._data = b"".join(parts)
    stream[NameObject("/Filter")] = NameObject("/FlateDecode")
    return _pdf_with_content_stream(stream)


def pdf_with_declared_length(length: int) -> bytes:
    """A hand-written PDF whose only content stream declares ``/Length length``."""
    body = b"BT /F1 12 Tf 72 720 Td (declared) Tj ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % length + body + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, obj in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def docx_document(build) -> bytes:
    """A DOCX written by python-docx; ``build(document)`` adds the content."""
    document = docx.Document()
    build(document)
    out = BytesIO()
    document.save(out)
    return out.getvalue()


def rewrite_docx(data: bytes, replace: dict[str, bytes] | None = None, add: dict[str, bytes] | None = None) -> bytes:
    """Copy a DOCX, replacing some parts and adding others (compressed)."""
    replace, add = replace or {}, add or {}
    source = zipfile.ZipFile(BytesIO(data))
    out = BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for entry in source.infolist():
            target.writestr(entry.filename, replace.get(entry.filename, source.read(entry)))
        for name, content in add.items():
            target.writestr(name, content)
    return out.getvalue()


def declare_uncompressed_size(data: bytes, name: str, size: int) -> bytes:
    """Patch the zip central directory so entry ``name`` claims ``size`` bytes uncompressed."""
    encoded = name.encode()
    position = 0
    patched = bytearray(data)
    while True:
        position = data.find(b"PK\x01\x02", position)
        if position < 0:
            raise ValueError("entry not found")
        name_length = struct.unpack_from("<H", data, position + 28)[0]
        if data[position + 46 : position + 46 + name_length] == encoded:
            struct.pack_into("<I", patched, position + 24, size)
            return bytes(patched)
        position += 4


def docx_with_external_entity(target_uri: str) -> bytes:
    """A DOCX whose body text is an entity declared (in a DOCTYPE) as the file at ``target_uri``."""
    data = docx_document(lambda document: document.add_paragraph("PLACEHOLDER"))
    xml = zipfile.ZipFile(BytesIO(data)).read("word/document.xml").decode()
    prolog_end = xml.index("?>") + 2
    hostile = (
        xml[:prolog_end]
        + f'<!DOCTYPE w:document [<!ENTITY leak SYSTEM "{target_uri}">]>'
        + xml[prolog_end:].replace("PLACEHOLDER", "&leak;")
    )
    return rewrite_docx(data, replace={"word/document.xml": hostile.encode()})
