"""Scans made in the test: text rendered to images with Pillow, saved as image
files or placed as the only content of PDF pages (fpdf2), as a scanner would.

Pillow's own font (Aileron, FreeType) is used, so no system font is needed.
"""

from __future__ import annotations

import struct
import zlib
from io import BytesIO

from fpdf import FPDF
from PIL import Image, ImageDraw, ImageFont

WHITE = 255


def text_page(lines: list[str], *, title: str | None = None, size: tuple[int, int] = (1400, 900)) -> Image.Image:
    """A grey page image: an optional large title, then ``lines`` at about 11 pt at 150 dpi."""
    image = Image.new("L", size, WHITE)
    draw = ImageDraw.Draw(image)
    body = ImageFont.load_default(size=24)
    y = 60
    if title:
        draw.text((70, y), title, font=ImageFont.load_default(size=48), fill=0)
        y += 100
    for line in lines:
        draw.text((70, y), line, font=body, fill=0)
        y += 38
    return image


def blank_page(size: tuple[int, int] = (1400, 900)) -> Image.Image:
    return Image.new("L", size, WHITE)


def encoded(image: Image.Image, fmt: str, **options: object) -> bytes:
    out = BytesIO()
    image.save(out, fmt, **options)
    return out.getvalue()


def multipage_tiff(pages: list[Image.Image]) -> bytes:
    out = BytesIO()
    pages[0].save(out, "TIFF", save_all=True, append_images=pages[1:], compression="tiff_deflate")
    return out.getvalue()


def scanned_pdf(pages: list[Image.Image | str], *, rotate: dict[int, int] | None = None) -> bytes:
    """A PDF with a page per entry: an image fills a scanned page (no text layer);
    a string is a page of real text. ``rotate`` maps a 1-based page to its /Rotate."""
    pdf = FPDF(unit="pt", format=(612, 792))
    pdf.set_auto_page_break(False)
    for page in pages:
        pdf.add_page()
        if isinstance(page, str):
            pdf.set_font("Helvetica", size=12)
            pdf.set_xy(50, 50)
            pdf.multi_cell(512, 16, page)
        else:
            pdf.image(page, x=0, y=0, w=612)
    data = bytes(pdf.output())
    if not rotate:
        return data
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(BytesIO(data)))
    for number, degrees in rotate.items():
        writer.pages[number - 1].rotate(degrees)
    out = BytesIO()
    writer.write(out)
    return out.getvalue()


def huge_png(width: int, height: int) -> bytes:
    """A valid 1-bit white PNG of ``width`` x ``height`` pixels, written row by row
    through zlib so it is made (and stays, compressed) small whatever its size."""
    row = b"\x00" + b"\xff" * ((width + 7) // 8)  # filter type 0, then the row's packed bits
    compressor = zlib.compressobj(9)
    rows_per_piece = max(1, (8 << 20) // len(row))
    pieces = []
    for start in range(0, height, rows_per_piece):
        pieces.append(compressor.compress(row * min(rows_per_piece, height - start)))
    pieces.append(compressor.flush())

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)  # 1 bit, greyscale
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", b"".join(pieces)) + chunk(b"IEND", b"")
