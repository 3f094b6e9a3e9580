"""PDF with pypdf: paragraphs per page (1-based page numbers), headings from the outline.

A PDF has no reliable heading markup in its text, but most long PDFs carry an
outline (bookmarks): each entry becomes a heading, at its level, placed before
the text of the page it points to. pypdf's decoder caps are tightened to the
configured stream limit, so a FlateDecode bomb stops at the cap.

A page whose text layer is empty or negligible but which shows images is a
scan: its images are OCR'd (:mod:`kbtui.extract.ocr`). The rule is per page,
judged on the text actually extracted (never on the PDF's claims about
itself), so a mixed PDF keeps its real text and OCRs only its scanned pages.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from io import BytesIO
from typing import Any

from PIL import Image
from pypdf import PageObject, PdfReader, apply_configuration, get_configuration
from pypdf.errors import (
    DependencyError,
    FileNotDecryptedError,
    LimitReachedError,
    PdfReadError,
    PyPdfError,
    WrongPasswordError,
)
from pypdf.generic import Destination

from kbtui.extract import OCR_IMAGE_TOO_LARGE, OCR_IMAGE_UNREADABLE, Element, ExtractionFailed
from kbtui.extract.collect import ElementCollector
from kbtui.extract.limits import ExtractionLimits
from kbtui.extract.ocr import OcrRun, PageSkipped, large_enough, page_image, pixel_cap

# pypdf limits (bytes of decoded output) that the stream cap tightens.
_STREAM_OUTPUT_LIMITS = (
    "maximum_declared_stream_length",
    "zlib_maximum_output_length",
    "lzw_maximum_output_length",
    "run_length_maximum_output_length",
    "brotli_maximum_output_length",
    "array_based_stream_maximum_output_length",
    "jbig2_maximum_output_length",
)
MAX_OUTLINE_HEADINGS = 10_000
MAX_HEADING_LEVEL = 6
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
# A page with fewer letters and digits than this in its text layer (a page
# number, a stamp) and with images is read by OCR.
NEGLIGIBLE_TEXT = 20


def read_pdf(data: bytes, limits: ExtractionLimits, ocr: OcrRun) -> list[Element]:
    """Paragraphs of each page (OCR'd for a scanned page) and outline headings;
    encrypted files fail ``extract_encrypted``."""
    configuration = get_configuration()
    tightened = {
        name: min(getattr(configuration, name), limits.max_pdf_stream_bytes)
        for name in _STREAM_OUTPUT_LIMITS
        if hasattr(configuration, name)  # the set of limits grows with pypdf releases
    }
    try:
        with apply_configuration(**tightened), pixel_cap(ocr.settings.max_image_pixels):
            return _read(data, limits, ocr)
    except (FileNotDecryptedError, WrongPasswordError, DependencyError):
        raise ExtractionFailed("extract_encrypted") from None
    except LimitReachedError:
        raise ExtractionFailed("extract_too_large") from None
    except (PdfReadError, PyPdfError):
        raise ExtractionFailed("extract_corrupt") from None


def _read(data: bytes, limits: ExtractionLimits, ocr: OcrRun) -> list[Element]:
    reader = PdfReader(BytesIO(data), strict=False)
    if reader.is_encrypted:
        # Many PDFs are encrypted only to restrict printing or copying, with an
        # empty user password; those open. Anything else needs a password we lack.
        if not reader.decrypt(""):
            raise ExtractionFailed("extract_encrypted")
    headings = _outline_headings(reader)
    out = ElementCollector(limits.max_extracted_chars)
    for index, page in enumerate(reader.pages):
        number = index + 1
        text = page.extract_text() or ""
        if _negligible(text) and _has_images(page):
            for level, title in headings.get(index, ()):  # no text to place them in: at the top
                out.add("heading", title, level=level, page=number)
            _add_paragraphs(out, text, number)
            ocr.read_page(out, number, _page_images(page, ocr.settings.max_image_pixels))
            continue
        # An outline entry points at a page, not at a place on it: each heading
        # goes where its title is printed on the page, so the text above it
        # stays in the section before (not one heading off).
        cursor = 0
        for level, title in headings.get(index, ()):
            at = title_position(text, title, cursor)
            _add_paragraphs(out, text[cursor:at], number)
            out.add("heading", title, level=level, page=number)
            cursor = at
        _add_paragraphs(out, text[cursor:], number)
    return out.elements


def _negligible(text: str) -> bool:
    return sum(1 for character in text if character.isalnum()) < NEGLIGIBLE_TEXT


def _has_images(page: PageObject) -> bool:
    try:
        return len(page.images) > 0
    except (PyPdfError, LimitReachedError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return False


def _page_images(page: PageObject, max_pixels: int) -> Iterator[Image.Image]:
    """The page's images worth OCR, decoded one at a time, each only once its
    declared size is known to be under the pixel cap."""
    for name in page.images.keys():  # noqa: SIM118 - a lazy list of images, not a dict
        try:
            if _declared_pixels(page, name) > max_pixels:
                raise PageSkipped(OCR_IMAGE_TOO_LARGE)
            image = page.images[name].image
        except PageSkipped:
            raise
        except (Image.DecompressionBombError, Image.DecompressionBombWarning, LimitReachedError):
            raise PageSkipped(OCR_IMAGE_TOO_LARGE) from None
        except Exception:  # noqa: BLE001 - pypdf and Pillow raise many kinds on a bad image
            raise PageSkipped(OCR_IMAGE_UNREADABLE) from None
        if image is None:  # pypdf could not decode it (it says why only in a log)
            raise PageSkipped(OCR_IMAGE_UNREADABLE)
        if large_enough(image):
            yield page_image(image, max_pixels)


def _declared_pixels(page: PageObject, name: str | list[str]) -> int:
    """Width x height an image XObject declares (0 for an inline image, which
    Pillow's own cap guards when pypdf decodes it)."""
    path = name if isinstance(name, list) else [name]
    if path[0].startswith("~"):
        return 0
    holder: Any = page
    for key in path:
        holder = holder["/Resources"].get_object()["/XObject"].get_object()[key].get_object()
    return int(holder.get("/Width", 0)) * int(holder.get("/Height", 0))


def _add_paragraphs(out: ElementCollector, text: str, page: int) -> None:
    for paragraph in _BLANK_LINE.split(text):
        out.add("paragraph", paragraph, page=page)


def title_position(text: str, title: str, start: int) -> int:
    """Where ``title`` is printed in a page's ``text`` at or after ``start``: at
    the start of a line (after a section number) if it is there, else anywhere;
    ``start`` when it is not found (the heading then goes where the page's text
    resumes, as an outline entry without a place on the page would)."""
    words = title.split()
    if not words:
        return start
    spaced = r"\s+".join(re.escape(word) for word in words)
    for pattern in (rf"(?m)^[ \t]*(?:[\d.]+[ \t]+)?{spaced}", spaced):
        found = re.compile(pattern, re.IGNORECASE).search(text, start)
        if found is not None:
            return found.start()
    return start


def _outline_headings(reader: PdfReader) -> dict[int, list[tuple[int, str]]]:
    """Outline titles by 0-based page index, in outline order; a broken outline yields none."""
    by_page: dict[int, list[tuple[int, str]]] = defaultdict(list)
    try:
        pending: list[tuple[list, int]] = [(reader.outline, 1)]
        count = 0
        while pending and count < MAX_OUTLINE_HEADINGS:
            items, level = pending.pop()
            # Children follow their parent as a nested list; walk in order with a stack.
            for position, item in enumerate(items):
                if isinstance(item, list):
                    pending.append((items[position + 1 :], level))
                    pending.append((item, level + 1))
                    break
                if isinstance(item, Destination) and item.title:
                    page = reader.get_destination_page_number(item)
                    if page is not None and page >= 0:
                        by_page[page].append((min(level, MAX_HEADING_LEVEL), str(item.title)))
                        count += 1
    except (PyPdfError, LimitReachedError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return {}
    return by_page
