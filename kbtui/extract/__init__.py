"""Extraction: turn a document's bytes into ordered structural elements.

Readers are chosen by extension (:func:`format_for`, from the table in
:mod:`kbtui.extract.formats`). Each returns a list of
:class:`Element` in reading order with offsets into the document's extracted
text, so chunks can point back to where they came from. Text formats keep
offsets into the decoded source; PDF, DOCX and HTML get offsets into the
elements' texts joined by blank lines.

The pipeline calls :func:`extract_isolated`, which parses in a killable worker
process under :class:`ExtractionLimits`; :func:`extract_document` is the same
work in this process (the worker runs it). PDF pages without a text layer and
images are read by OCR (:mod:`kbtui.extract.ocr`, under :class:`OcrSettings`),
and the result reports on each page OCR ran on (:class:`PageOcr`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from kbtui.errors import KbtuiError
from kbtui.extract.formats import (
    FORMAT_BY_EXTENSION,
    FORMAT_BY_NAME,
    SNIFF_BYTES,
    Detection,
    detect_format,
    format_for,
    looks_binary,
    needs_content,
)
from kbtui.extract.limits import ExtractionLimits, OcrSettings

ElementKind = Literal["heading", "paragraph", "list_item", "table", "code"]

# Bumped whenever a reader's output changes for the same input; stored on every
# document so the reindexer can find documents extracted by an older parser.
# 3: a document of headings only is indexed by its headings; an HTML text node
# over libxml2's 10 MB no longer fails the whole page. 4: text that is not text
# fails as binary_content; HTML without landmarks keeps only its main content;
# a PDF outline heading goes where its title is printed on the page, not at the page's top.
# 5: OCR of PDF pages without a text layer and of images (so PDFs that failed
# as no_text are read again).
PARSER_VERSION = 5

# Fixed, content-free reasons an extraction fails with.
EXTRACT_TIMEOUT = "extract_timeout"  # the parser did not finish before the deadline
EXTRACT_TOO_LARGE = "extract_too_large"  # input, output, memory or zip bounds exceeded
EXTRACT_UNSUPPORTED = "extract_unsupported"  # no reader for this format
EXTRACT_CORRUPT = "extract_corrupt"  # the parser rejected the file
EXTRACT_ENCRYPTED = "extract_encrypted"  # a password-protected file
EXTRACT_UNSAFE = "extract_unsafe"  # a construct refused on purpose (XML DOCTYPE/entities)
EXTRACT_CRASHED = "extract_crashed"  # the worker process died while parsing
EXTRACT_UNAVAILABLE = "extract_unavailable"  # extraction was shut down
BINARY_CONTENT = "binary_content"  # a text format (or no format) whose bytes are not text

# Why a page gave no OCR text: fixed, content-free codes, shown per page. An
# image file fails with its only page's reason (no_text for a blank one).
OCR_NO_TEXT = "ocr_no_text"  # the image holds nothing Tesseract could read (a blank page)
OCR_TIMEOUT = "ocr_timeout"  # the page took longer than [ocr] page_timeout_seconds
OCR_BUDGET_SPENT = "ocr_budget_spent"  # the document's [ocr] document_timeout_seconds ran out first
OCR_IMAGE_TOO_LARGE = "ocr_image_too_large"  # more pixels than [ocr] max_image_pixels
OCR_IMAGE_UNREADABLE = "ocr_image_unreadable"  # the image data could not be decoded
OCR_FAILED = "ocr_failed"  # Tesseract failed on the page (out of its memory cap, or crashed)
OCR_UNAVAILABLE = "ocr_unavailable"  # Tesseract or one of [ocr] languages is not installed
OCR_OFF = "ocr_off"  # [ocr] enabled = false
OCR_REASONS = frozenset(
    {OCR_NO_TEXT, OCR_TIMEOUT, OCR_BUDGET_SPENT, OCR_IMAGE_TOO_LARGE, OCR_IMAGE_UNREADABLE, OCR_FAILED,
     OCR_UNAVAILABLE, OCR_OFF}
)


@dataclass(frozen=True)
class Element:
    kind: ElementKind
    text: str
    level: int = 0  # heading level, 1 = top
    start: int = 0  # character offsets into the extracted text
    end: int = 0
    page: int | None = None  # 1-based page (PDF)
    language: str | None = None  # code language
    symbol: str | None = None  # top-level function/class a code element defines


@dataclass(frozen=True)
class PageOcr:
    """What OCR made of one page: its mean word confidence (0..1) and word count,
    or the reason (one of :data:`OCR_REASONS`) it gave no text."""

    page: int  # 1-based; an image file is page 1 (a TIFF frame is a page)
    confidence: float | None = None
    words: int = 0
    seconds: float = 0.0
    reason: str | None = None


@dataclass(frozen=True)
class Extraction:
    """A document's elements, and a report for each page that went through OCR."""

    elements: list[Element]
    ocr_pages: tuple[PageOcr, ...] = ()


class ExtractionFailed(KbtuiError):
    """Extraction of one document failed; ``code`` is a fixed, content-free reason."""

    def __init__(self, code: str, message: str | None = None) -> None:
        super().__init__(message or code)
        self.code = code

    def __reduce__(self):  # keeps ``code`` when the exception crosses a process boundary
        return (type(self), (self.code, self.message))


DEFAULT_LIMITS = ExtractionLimits()
DEFAULT_OCR = OcrSettings()


def extract(
    data: bytes, fmt: str, limits: ExtractionLimits = DEFAULT_LIMITS, ocr: OcrSettings = DEFAULT_OCR
) -> list[Element]:
    """Extract ``data`` of format ``fmt`` into elements, in this process (see :func:`extract_document`)."""
    return extract_document(data, fmt, limits, ocr).elements


def extract_document(
    data: bytes,
    fmt: str,
    limits: ExtractionLimits = DEFAULT_LIMITS,
    ocr: OcrSettings = DEFAULT_OCR,
    on_ocr_page: Callable[[int], None] | None = None,
) -> Extraction:
    """Extract ``data`` of format ``fmt``, in this process, with a report on every OCR'd page.

    Only the size caps and OCR's own per-page bounds apply here; the
    document's deadline and memory cap need the worker process
    (:func:`extract_isolated`). ``on_ocr_page`` is told each page number
    before its OCR starts.
    """
    if len(data) > limits.max_input_bytes:
        raise ExtractionFailed(EXTRACT_TOO_LARGE)
    found = FORMAT_BY_NAME.get(fmt)
    if found is None or not found.ocr:
        return Extraction(headings_as_text(_read(data, fmt, limits)))
    from kbtui.extract.ocr import OcrRun

    run = OcrRun(ocr, on_ocr_page)
    elements = found.load_reader()(data, limits, run)
    return Extraction(headings_as_text(elements), tuple(run.pages))


def headings_as_text(elements: list[Element]) -> list[Element]:
    """A document of headings only (a README that is just a title) still has text:
    each heading also becomes a paragraph of its section, instead of the document
    failing as ``no_text``. Any other document is returned as it is."""
    if not elements or any(element.kind != "heading" for element in elements):
        return elements
    with_text: list[Element] = []
    for heading in elements:
        with_text.append(heading)
        with_text.append(Element("paragraph", heading.text, start=heading.start, end=heading.end, page=heading.page))
    return with_text


def _read(data: bytes, fmt: str, limits: ExtractionLimits) -> list[Element]:
    found = FORMAT_BY_NAME.get(fmt)
    if found is None:
        raise ExtractionFailed(EXTRACT_UNSUPPORTED)
    if (found.reads == "text" or found.name == "html") and looks_binary(data[:SNIFF_BYTES], strict=False):
        # Uploads reach here unsniffed: content decides, not the name. A scan
        # already refused any NUL; here a stray one is stripped, not fatal.
        raise ExtractionFailed(BINARY_CONTENT)
    read = found.load_reader()
    if found.reads == "bytes":
        return read(data, limits)
    from kbtui.extract.text import decode_text

    decoded = decode_text(data)
    if len(decoded) > limits.max_extracted_chars:
        raise ExtractionFailed(EXTRACT_TOO_LARGE)
    return read(decoded, found.language) if found.language else read(decoded)


def extract_isolated(
    data: bytes,
    fmt: str,
    limits: ExtractionLimits = DEFAULT_LIMITS,
    ocr: OcrSettings = DEFAULT_OCR,
    on_ocr_page: Callable[[int], None] | None = None,
) -> Extraction:
    """:func:`extract_document` in a reusable worker process with a deadline and a memory cap.

    Safe to call from several threads. A timeout or crash kills and replaces
    the worker; the failure is an :class:`ExtractionFailed` with a fixed code.
    Each page OCR starts on extends the deadline by [ocr] page_timeout_seconds,
    up to [ocr] document_timeout_seconds in all.
    """
    from kbtui.extract.isolation import default_pool

    return default_pool(limits).extract(data, fmt, limits, ocr, on_ocr_page)


def shutdown_extraction() -> None:
    """Stop the shared extraction worker processes (a later call starts new ones)."""
    from kbtui.extract.isolation import shutdown_default_pool

    shutdown_default_pool()


__all__ = [
    "BINARY_CONTENT",
    "DEFAULT_LIMITS",
    "FORMAT_BY_EXTENSION",
    "PARSER_VERSION",
    "Detection",
    "Element",
    "ElementKind",
    "ExtractionFailed",
    "ExtractionLimits",
    "detect_format",
    "extract",
    "extract_isolated",
    "format_for",
    "looks_binary",
    "needs_content",
    "shutdown_extraction",
]
