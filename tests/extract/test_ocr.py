"""OCR of scanned PDF pages and of image files, on scans made in the test.

Tesseract runs for real (Debian's tesseract-ocr, installed by `make setup`);
these tests fail, not skip, where it is missing.
"""

from __future__ import annotations

import pytest
from PIL import Image

from kbtui.extract import (
    OCR_BUDGET_SPENT,
    OCR_IMAGE_TOO_LARGE,
    OCR_NO_TEXT,
    OCR_OFF,
    OCR_TIMEOUT,
    OCR_UNAVAILABLE,
    ExtractionFailed,
    ExtractionLimits,
    OcrSettings,
    extract_document,
    format_for,
)
from kbtui.extract.isolation import ExtractionPool
from kbtui.settings import InvalidSetting
from tests.extract.scans import blank_page, encoded, huge_png, multipage_tiff, scanned_pdf, text_page

FAILOVER = "The quarterly failover drill restores the billing replica from a snapshot."
ROTATION = "Rotate the ingress certificates before the window closes on Friday."
PAYROLL = "Payroll exports are archived nightly to the cold storage bucket."


def text_of(extraction, page: int | None = None) -> str:
    return " ".join(e.text for e in extraction.elements if page is None or e.page == page)


def report(extraction) -> dict[int, tuple[bool, str | None]]:
    """Page -> (has a confidence, reason)."""
    return {p.page: (p.confidence is not None, p.reason) for p in extraction.ocr_pages}


@pytest.fixture(scope="module")
def pool():
    with ExtractionPool(1) as shared:
        yield shared


def test_an_image_only_pdf_is_read_page_by_page_with_its_confidence(pool):
    data = scanned_pdf([text_page([FAILOVER], title="Disaster recovery"), text_page([ROTATION])])

    extraction = pool.extract(data, "pdf", ExtractionLimits())

    assert FAILOVER in text_of(extraction, 1) and ROTATION in text_of(extraction, 2)
    assert report(extraction) == {1: (True, None), 2: (True, None)}
    assert all(p.confidence > 0.8 and p.words >= 10 for p in extraction.ocr_pages)
    # A large line is a heading; a page without one is labelled by its number.
    headings = [(e.text, e.page) for e in extraction.elements if e.kind == "heading"]
    assert headings == [("Disaster recovery", 1), ("page 2", 2)]


def test_a_mixed_pdf_keeps_its_text_layer_and_ocrs_only_the_scanned_page():
    real = "This page was typed: " + ROTATION
    extraction = extract_document(scanned_pdf([real, text_page([FAILOVER])]), "pdf")

    assert [p.page for p in extraction.ocr_pages] == [2]
    page_one = [e for e in extraction.elements if e.page == 1]
    assert [e.kind for e in page_one] == ["paragraph"] and page_one[0].text == real
    assert FAILOVER in text_of(extraction, 2)


@pytest.mark.parametrize("how", ["image turned", "page /Rotate"])
def test_a_rotated_page_is_read_the_right_way_up(how):
    page = text_page([FAILOVER, ROTATION])
    data = scanned_pdf([page.rotate(90, expand=True)]) if how == "image turned" else scanned_pdf([page], rotate={1: 90})

    extraction = extract_document(data, "pdf")

    assert FAILOVER in text_of(extraction) and ROTATION in text_of(extraction)


def test_an_empty_white_page_has_a_reason_and_the_document_keeps_its_other_pages(pool):
    data = scanned_pdf([text_page([FAILOVER]), blank_page(), text_page([PAYROLL])])

    extraction = pool.extract(data, "pdf", ExtractionLimits())

    assert report(extraction) == {1: (True, None), 2: (False, OCR_NO_TEXT), 3: (True, None)}
    assert FAILOVER in text_of(extraction) and PAYROLL in text_of(extraction)
    assert not [e for e in extraction.elements if e.page == 2]


@pytest.mark.parametrize(
    ("name", "fmt", "options"),
    [("scan.png", "PNG", {}), ("scan.jpg", "JPEG", {"quality": 70}), ("scan.webp", "WEBP", {"quality": 80}),
     ("scan.bmp", "BMP", {})],
)
def test_image_files_are_read_by_ocr(pool, name, fmt, options):
    assert format_for(name) == "image"
    data = encoded(text_page([PAYROLL], title="Backups").convert("RGB"), fmt, **options)

    extraction = pool.extract(data, "image", ExtractionLimits())

    assert PAYROLL in text_of(extraction, 1)
    assert report(extraction) == {1: (True, None)}


def test_each_frame_of_a_tiff_is_a_page():
    extraction = extract_document(multipage_tiff([text_page([FAILOVER]), text_page([ROTATION])]), "image")

    assert FAILOVER in text_of(extraction, 1) and ROTATION in text_of(extraction, 2)


def test_a_transparent_screenshot_is_read_as_dark_text_on_white():
    page = text_page([ROTATION])
    ink = page.point(lambda v: 255 - v)  # only the text is opaque
    nothing = Image.new("L", page.size, 0)
    black_on_transparent = Image.merge("RGBA", (nothing, nothing, nothing, ink))

    assert ROTATION in text_of(extract_document(encoded(black_on_transparent, "PNG"), "image"))


@pytest.fixture(scope="module")
def giant_png() -> bytes:
    return huge_png(50_000, 50_000)


def test_a_50000_by_50000_pixel_image_is_refused_in_bounded_memory(giant_png):
    # A 512 MiB worker could not even hold the decoded pixels (2.5 GB as grey):
    # the image is refused from its header, not by running out of memory.
    limits = ExtractionLimits(max_memory_bytes=512 * 1024 * 1024)
    with ExtractionPool(1) as small:
        with pytest.raises(ExtractionFailed) as refused:
            small.extract(giant_png, "image", limits)
        assert refused.value.code == OCR_IMAGE_TOO_LARGE
        # The worker is fine: the next document is read by it.
        assert PAYROLL in text_of(small.extract(encoded(text_page([PAYROLL]), "PNG"), "image", limits))


def test_a_pdf_page_over_the_pixel_cap_is_skipped_and_the_rest_stays(pool):
    data = scanned_pdf([text_page([FAILOVER]), text_page([ROTATION], size=(3000, 2000))])

    extraction = pool.extract(data, "pdf", ExtractionLimits(), OcrSettings(max_image_pixels=2_000_000))

    assert report(extraction) == {1: (True, None), 2: (False, OCR_IMAGE_TOO_LARGE)}
    assert FAILOVER in text_of(extraction)


def test_a_page_that_times_out_is_skipped_and_the_next_page_is_read():
    # A dense page of 120 long lines takes Tesseract about 27 s on a quiet 2-core
    # machine, the one-line page about 0.5 s: a 4 s budget leaves a wide margin both
    # ways on a faster or a busier machine (speckle was too close: 8 s, found no text).
    dense = text_page([f"{PAYROLL} {FAILOVER} {ROTATION}"] * 120, size=(3000, 4700))
    settings = OcrSettings(page_timeout_seconds=4)
    extraction = extract_document(scanned_pdf([dense, text_page([PAYROLL])]), "pdf", ocr=settings)

    assert report(extraction)[1] == (False, OCR_TIMEOUT)
    assert PAYROLL in text_of(extraction, 2)


def test_the_document_budget_skips_the_pages_after_it():
    settings = OcrSettings(document_timeout_seconds=0.3)
    pages = [text_page([line]) for line in (FAILOVER, ROTATION, PAYROLL, FAILOVER)]

    extraction = extract_document(scanned_pdf(pages), "pdf", ocr=settings)

    assert report(extraction)[4] == (False, OCR_BUDGET_SPENT)


def test_heartbeats_keep_a_long_ocr_document_alive_past_the_parsing_deadline():
    # Six pages of OCR take far longer than the two-second parsing deadline:
    # each page OCR starts on extends it, so the document is read, not killed.
    pages = [text_page([FAILOVER, ROTATION, PAYROLL] * 8, size=(1240, 1754)) for _ in range(6)]
    heard: list[int] = []
    limits = ExtractionLimits(timeout_seconds=2, timeout_seconds_per_mib=0)
    with ExtractionPool(1) as own:
        own.extract(encoded(text_page(["warm"]), "PNG"), "image", ExtractionLimits())  # started, parsers loaded

        extraction = own.extract(scanned_pdf(pages), "pdf", limits, OcrSettings(), heard.append)

    assert heard == [1, 2, 3, 4, 5, 6]
    assert [p.page for p in extraction.ocr_pages if p.confidence] == [1, 2, 3, 4, 5, 6]


def test_ocr_turned_off_reads_no_page_and_an_image_fails_with_the_reason():
    off = OcrSettings(enabled=False)
    extraction = extract_document(scanned_pdf(["Typed text: " + ROTATION, text_page([FAILOVER])]), "pdf", ocr=off)
    assert report(extraction) == {2: (False, OCR_OFF)}
    assert FAILOVER not in text_of(extraction) and ROTATION in text_of(extraction)

    with pytest.raises(ExtractionFailed) as failed:
        extract_document(encoded(text_page([FAILOVER]), "PNG"), "image", ocr=off)
    assert failed.value.code == OCR_OFF


def test_a_language_that_is_not_installed_is_a_reason_not_a_crash():
    with pytest.raises(ExtractionFailed) as failed:
        extract_document(encoded(text_page([FAILOVER]), "PNG"), "image", ocr=OcrSettings(languages="eng+zzz"))
    assert failed.value.code == OCR_UNAVAILABLE


@pytest.mark.parametrize("languages", ["", "eng deu", "eng;rm", "-l", "eng+"])
def test_languages_are_checked_when_the_settings_load(languages):
    with pytest.raises(InvalidSetting, match="ocr.languages"):
        OcrSettings(languages=languages)


def test_a_blank_image_fails_as_no_text_with_its_page_reason(pool):
    extraction = pool.extract(encoded(blank_page(), "PNG"), "image", ExtractionLimits())

    assert extraction.elements == [] and report(extraction) == {1: (False, OCR_NO_TEXT)}


def test_a_file_named_png_that_is_not_an_image_fails_as_corrupt(pool):
    with pytest.raises(ExtractionFailed) as failed:
        pool.extract(b"\x89PNG\r\n\x1a\n", "image", ExtractionLimits())
    assert failed.value.code == "extract_corrupt"
