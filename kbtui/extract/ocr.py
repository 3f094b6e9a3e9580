"""OCR of page images with Tesseract, for scanned PDF pages and image files.

Tesseract (Debian's ``tesseract-ocr`` with its language packages) reads one
page image per run, from stdin, so decrypted pixels never touch the disk. It
runs as a child of the extraction worker, which gives each page its own
bounds: a wall-clock timeout (the child is killed and the page skipped with
``ocr_timeout``) and an address-space cap. The worker also holds a time budget
for the whole document and refuses images over a pixel cap before decoding
them (decompression bombs). benchmarks/ocr.py measured it against
rapidocr-onnxruntime; README.md has the numbers.

Tesseract's page segmentation mode 1 detects the page's orientation, so a
page scanned sideways or upside down is read the right way up. Its TSV output
gives blocks, paragraphs, lines and words with a confidence per word: a
page's confidence is the mean over its words, and a short paragraph set in
lines much taller than the body text becomes a heading.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import shutil
import statistics
import subprocess
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache

from PIL import Image

from kbtui.extract import (
    OCR_BUDGET_SPENT,
    OCR_FAILED,
    OCR_IMAGE_TOO_LARGE,
    OCR_IMAGE_UNREADABLE,
    OCR_NO_TEXT,
    OCR_OFF,
    OCR_TIMEOUT,
    OCR_UNAVAILABLE,
    PageOcr,
)
from kbtui.extract.collect import ElementCollector
from kbtui.extract.limits import OcrSettings

PAGE_MODE = "1"  # automatic page segmentation with orientation and script detection
# A paragraph is a heading when its lines are this much taller than the body's
# (level 1 from the larger factor), and it is short.
HEADING_HEIGHT = 1.4
TOP_HEADING_HEIGHT = 2.0
MAX_HEADING_WORDS = 15
MAX_HEADING_LINES = 2
# The label of an OCR'd page's section, nested under any heading before it.
PAGE_LABEL_LEVEL = 6
SMALLEST_IMAGE_SIDE = 16  # pixels: icons and rules are not pages


class PageSkipped(Exception):
    """One page image is not OCR'd; ``code`` is one of :data:`kbtui.extract.OCR_REASONS`."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


@dataclass(frozen=True)
class _Word:
    text: str
    confidence: float  # 0..100
    paragraph: tuple[int, int]  # (block, paragraph)
    line: tuple[int, int, int]  # (block, paragraph, line)


@dataclass
class _Paragraph:
    lines: list[list[_Word]] = field(default_factory=list)
    heights: list[int] = field(default_factory=list)


@dataclass
class OcrRun:
    """OCR of one document's page images under the [ocr] bounds.

    Collects a :class:`PageOcr` per page in ``pages``; ``on_page`` is told a
    page's number before its images are decoded and OCR'd (the worker turns
    that into a heartbeat, so the parent extends its deadline page by page).
    """

    settings: OcrSettings
    on_page: Callable[[int], None] | None = None
    pages: list[PageOcr] = field(default_factory=list)
    _spent: float = 0.0

    def read_page(self, out: ElementCollector, page: int, images: Iterable[Image.Image]) -> None:
        """OCR the images of one page (in order) into ``out``: its headings and
        paragraphs, under a ``page N`` label unless it starts with a heading. A
        page that gives no text adds nothing but its reason."""
        started = time.monotonic()
        try:
            paragraphs, reason = self._recognize(page, images, started), OCR_NO_TEXT
        except PageSkipped as skipped:
            paragraphs, reason = [], skipped.code
        seconds = time.monotonic() - started
        self._spent += seconds
        words = [word for paragraph in paragraphs for line in paragraph.lines for word in line]
        if not words:
            self.pages.append(PageOcr(page, seconds=seconds, reason=reason))
            return
        confidence = round(statistics.fmean(word.confidence for word in words) / 100, 3)
        self.pages.append(PageOcr(page, confidence=confidence, words=len(words), seconds=seconds))
        _add_page(out, page, paragraphs)

    def _recognize(self, page: int, images: Iterable[Image.Image], started: float) -> list[_Paragraph]:
        settings = self.settings
        if not settings.enabled:
            raise PageSkipped(OCR_OFF)
        if self._spent >= settings.document_timeout_seconds:
            raise PageSkipped(OCR_BUDGET_SPENT)  # before a byte of the page is decoded
        if self.on_page is not None:
            self.on_page(page)
        if not tesseract_languages_installed(settings.languages):
            raise PageSkipped(OCR_UNAVAILABLE)
        paragraphs: list[_Paragraph] = []
        for image in images:
            elapsed = time.monotonic() - started
            page_left = settings.page_timeout_seconds - elapsed  # a page of several images shares it
            document_left = settings.document_timeout_seconds - self._spent - elapsed
            if page_left <= 0 or document_left <= 0:
                raise PageSkipped(OCR_TIMEOUT if page_left <= 0 else OCR_BUDGET_SPENT)
            paragraphs.extend(_paragraphs(run_tesseract(image, settings, min(page_left, document_left))))
        return paragraphs


def _add_page(out: ElementCollector, page: int, paragraphs: list[_Paragraph]) -> None:
    body = [h for p in paragraphs for h, line in zip(p.heights, p.lines, strict=True) if len(line) >= 3]
    body_height = statistics.median(body) if body else None
    levels = [_heading_level(paragraph, body_height) for paragraph in paragraphs]
    if not levels[0]:
        # No heading of its own at the top: the page's text is labelled by its number.
        out.add("heading", f"page {page}", level=PAGE_LABEL_LEVEL, page=page)
    for paragraph, level in zip(paragraphs, levels, strict=True):
        out.add("heading" if level else "paragraph", _join_lines(paragraph.lines), level=level, page=page)


def _heading_level(paragraph: _Paragraph, body_height: float | None) -> int:
    """1 or 2 for a short paragraph of tall lines, else 0 (body text)."""
    words = sum(len(line) for line in paragraph.lines)
    if body_height is None or len(paragraph.lines) > MAX_HEADING_LINES or words > MAX_HEADING_WORDS:
        return 0
    ratio = min(paragraph.heights) / body_height
    if ratio >= TOP_HEADING_HEIGHT:
        return 1
    return 2 if ratio >= HEADING_HEIGHT else 0


def _join_lines(lines: list[list[_Word]]) -> str:
    """A paragraph's lines as one line of text; a word hyphenated at a line's end is joined."""
    text = ""
    for line in lines:
        words = " ".join(word.text for word in line)
        hyphenated = text.endswith("-") and words[:1].islower()
        text = text[:-1] + words if hyphenated else f"{text} {words}".lstrip()
    return text


def _paragraphs(tsv: str) -> list[_Paragraph]:
    """Tesseract's TSV as paragraphs of lines of words, in reading order."""
    paragraphs: dict[tuple[int, int], _Paragraph] = {}
    line_heights: dict[tuple[int, int, int], int] = {}
    words: list[_Word] = []
    for row in csv.DictReader(io.StringIO(tsv), delimiter="\t", quoting=csv.QUOTE_NONE):
        try:
            level = int(row["level"])
            block, par, line = int(row["block_num"]), int(row["par_num"]), int(row["line_num"])
            height, confidence = int(row["height"]), float(row["conf"])
        except (KeyError, TypeError, ValueError):
            continue
        if level == 4:
            line_heights[(block, par, line)] = height
        text = (row.get("text") or "").strip()
        if level == 5 and confidence >= 0 and text:
            words.append(_Word(text, confidence, (block, par), (block, par, line)))
    current_line: tuple[int, int, int] | None = None
    for word in words:
        paragraph = paragraphs.setdefault(word.paragraph, _Paragraph())
        if word.line != current_line:
            current_line = word.line
            paragraph.lines.append([])
            paragraph.heights.append(line_heights.get(word.line, 0))
        paragraph.lines[-1].append(word)
    return list(paragraphs.values())


@contextlib.contextmanager
def pixel_cap(max_pixels: int) -> Iterator[None]:
    """Within this block Pillow refuses (at open, before decoding) any image of
    more than ``max_pixels``: its size warning becomes an error."""
    previous = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = max_pixels
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            yield
    finally:
        Image.MAX_IMAGE_PIXELS = previous


def page_image(image: Image.Image, max_pixels: int) -> Image.Image:
    """``image`` as 8-bit grey on white, decoded only if within ``max_pixels``."""
    width, height = image.size
    if width * height > max_pixels:
        raise PageSkipped(OCR_IMAGE_TOO_LARGE)
    try:
        if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
            # Transparent pixels are often black: put the text on white paper.
            rgba = image.convert("RGBA")
            paper = Image.new("RGBA", rgba.size, "white")
            image = Image.alpha_composite(paper, rgba)
        return image.convert("L")
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise PageSkipped(OCR_IMAGE_TOO_LARGE) from None
    except (OSError, ValueError, SyntaxError, EOFError):
        raise PageSkipped(OCR_IMAGE_UNREADABLE) from None


def large_enough(image: Image.Image) -> bool:
    """Whether an image is big enough to hold text (not an icon, a rule or a dot)."""
    return min(image.size) >= SMALLEST_IMAGE_SIDE


@cache
def _tesseract() -> str | None:
    return shutil.which("tesseract")


@cache
def _installed_languages() -> frozenset[str]:
    program = _tesseract()
    if program is None:
        return frozenset()
    try:
        listed = subprocess.run(
            [program, "--list-langs"], capture_output=True, timeout=30, check=False, env=_environment()
        ).stdout.decode("utf-8", "replace")
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    # The first line says where the languages are; one code a line follows.
    return frozenset(line.strip() for line in listed.splitlines()[1:] if line.strip())


def tesseract_languages_installed(languages: str) -> bool:
    """Whether Tesseract is installed with every language of ``languages`` ("eng+deu")."""
    installed = _installed_languages()
    return bool(installed) and all(code in installed for code in languages.split("+"))


def tesseract_version() -> str | None:
    """Tesseract's version line ("tesseract 5.3.0"), or None when it is not installed."""
    program = _tesseract()
    if program is None:
        return None
    try:
        done = subprocess.run([program, "--version"], capture_output=True, timeout=30, check=False, env=_environment())
    except (OSError, subprocess.SubprocessError):
        return None
    lines = (done.stdout or done.stderr).decode("utf-8", "replace").splitlines()
    return lines[0].strip() if lines else None


def _environment() -> dict[str, str]:
    # One thread: the worker pool already runs a document per core. Nothing
    # else of ours (TESSDATA_PREFIX excepted) reaches the engine.
    env = {"OMP_THREAD_LIMIT": "1", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    if "TESSDATA_PREFIX" in os.environ:
        env["TESSDATA_PREFIX"] = os.environ["TESSDATA_PREFIX"]
    return env


def run_tesseract(image: Image.Image, settings: OcrSettings, timeout: float) -> str:
    """Tesseract's TSV for one grey page image, within the page's time and memory bounds."""
    program = _tesseract()
    if program is None:
        raise PageSkipped(OCR_UNAVAILABLE)
    pixels = io.BytesIO()
    image.save(pixels, "PPM")  # a grey image is written as PGM: no compression to pay for
    memory = settings.page_memory_bytes

    def cap_memory() -> None:  # runs in the child, before tesseract starts
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (memory if hard == resource.RLIM_INFINITY else min(memory, hard), hard))

    try:
        done = subprocess.run(
            [program, "stdin", "stdout", "-l", settings.languages, "--psm", PAGE_MODE, "tsv"],
            input=pixels.getvalue(),
            capture_output=True,
            timeout=max(timeout, 0.01),
            env=_environment(),
            preexec_fn=cap_memory,  # noqa: PLW1509 - the worker is single-threaded
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise PageSkipped(OCR_TIMEOUT) from None
    except OSError:
        raise PageSkipped(OCR_FAILED) from None
    if done.returncode != 0:
        raise PageSkipped(OCR_FAILED)
    return done.stdout.decode("utf-8", "replace")
