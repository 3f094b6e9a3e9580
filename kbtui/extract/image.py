"""Images (PNG, JPEG, TIFF, WebP, BMP): a photo of a whiteboard, a screenshot of a
runbook, a scanned page. Their text comes from OCR (:mod:`kbtui.extract.ocr`);
each frame of a multi-page TIFF (a fax, a scanner's batch) is a page.

Pillow reads only the header when it opens a file, so an image over the
pixel cap is refused before a byte of it is decoded.
"""

from __future__ import annotations

from collections.abc import Iterator
from io import BytesIO

from PIL import Image, ImageSequence, UnidentifiedImageError

from kbtui.extract import EXTRACT_CORRUPT, Element, ExtractionFailed
from kbtui.extract.collect import ElementCollector
from kbtui.extract.limits import ExtractionLimits
from kbtui.extract.ocr import OCR_IMAGE_TOO_LARGE, OCR_NO_TEXT, OcrRun, page_image, pixel_cap

# Pillow's plug-ins for the formats of the readers table: a file that says it
# is a PNG but holds another format Pillow knows is not parsed by that plug-in.
IMAGE_FORMATS = ("PNG", "JPEG", "TIFF", "WEBP", "BMP", "DIB")


def read_image(data: bytes, limits: ExtractionLimits, ocr: OcrRun) -> list[Element]:
    """OCR'd text of every page of the image; it fails with its page's reason when no page has text."""
    out = ElementCollector(limits.max_extracted_chars)
    max_pixels = ocr.settings.max_image_pixels
    with pixel_cap(max_pixels):
        try:
            image = Image.open(BytesIO(data), formats=IMAGE_FORMATS)
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise ExtractionFailed(OCR_IMAGE_TOO_LARGE) from None
        except (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError):
            raise ExtractionFailed(EXTRACT_CORRUPT) from None
        with image:
            try:
                for number, frame in enumerate(_pages(image), start=1):
                    ocr.read_page(out, number, _decoded(frame, max_pixels))
            except (OSError, ValueError, SyntaxError, EOFError):
                if not ocr.pages:
                    raise ExtractionFailed(EXTRACT_CORRUPT) from None
                # A damaged frame after good ones: the pages read so far stay.
    reasons = {page.reason or "" for page in ocr.pages}
    if not out.elements and len(reasons) == 1:
        # One reason for every page (too large, timed out, OCR off...) is the
        # document's; pages with no text leave it to fail as no_text.
        reason = reasons.pop()
        if reason not in ("", OCR_NO_TEXT):
            raise ExtractionFailed(reason)
    return out.elements


def _pages(image: Image.Image) -> Iterator[Image.Image]:
    if image.format == "TIFF":
        yield from ImageSequence.Iterator(image)
    else:
        yield image


def _decoded(frame: Image.Image, max_pixels: int) -> Iterator[Image.Image]:
    """The frame as OCR wants it, decoded on demand (once the page's OCR has begun)."""
    yield page_image(frame, max_pixels)
