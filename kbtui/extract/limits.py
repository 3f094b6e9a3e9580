"""Bounds on one document's extraction (input size, output size, time, memory, zip shape) and the OCR settings."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kbtui.settings import CONFIG_FILE_NAME, InvalidSetting, setting, validate_settings

MIB = 1024 * 1024
TIB = 1 << 40
HOUR_S = 3600.0
DAY_S = 86_400.0


@dataclass(frozen=True)
class ExtractionLimits:
    """Caps that make a hostile document fail alone instead of taking the node down.

    Loaded from the ``[extraction]`` table of ``config.toml``.
    """

    # Wall-clock deadline for parsing one document in the worker process:
    # a base plus an allowance per MiB of input, so a legitimately huge
    # manual (pypdf reads about 50 pages/s) is not cut off while a small
    # hostile file is stopped quickly.
    timeout_seconds: float = setting(30.0, minimum=0.01, maximum=DAY_S)
    timeout_seconds_per_mib: float = setting(10.0, minimum=0.0, maximum=HOUR_S)
    # Input bytes handed to a parser.
    max_input_bytes: int = setting(128 * MIB, minimum=1, maximum=TIB)
    # Characters of extracted text: the decompression-bomb guard for every format.
    max_extracted_chars: int = setting(16 * 1024 * 1024, minimum=1, maximum=TIB)
    # Address-space cap (RLIMIT_AS) of the worker process.
    max_memory_bytes: int = setting(3 * 1024 * MIB, minimum=64 * MIB, maximum=TIB)
    # Largest decoded PDF stream; pypdf's own cap is tightened to this.
    max_pdf_stream_bytes: int = setting(64 * MIB, minimum=1, maximum=TIB)
    # DOCX zip pre-checks, before any XML is parsed.
    max_zip_entries: int = setting(10_000, minimum=1, maximum=100_000_000)
    max_zip_uncompressed_bytes: int = setting(512 * MIB, minimum=1, maximum=TIB)
    max_zip_ratio: int = setting(100, minimum=1, maximum=1_000_000)
    # Worker processes kept alive for extraction (documents parsed at once).
    worker_processes: int = setting(2, minimum=1, maximum=256)

    def __post_init__(self) -> None:
        validate_settings(self, "extraction")

    def deadline_seconds(self, input_bytes: int) -> float:
        """The parsing deadline for a document of ``input_bytes`` bytes."""
        return self.timeout_seconds + self.timeout_seconds_per_mib * input_bytes / MIB


# Tesseract language codes (eng, deu, chi_sim, script/Latin) joined by "+".
_LANGUAGES = re.compile(r"[A-Za-z0-9_]+(/[A-Za-z0-9_]+)?(\+[A-Za-z0-9_]+(/[A-Za-z0-9_]+)?)*")


@dataclass(frozen=True)
class OcrSettings:
    """OCR of scanned PDF pages and images: the ``[ocr]`` table of ``config.toml``.

    The engine is Tesseract, run once per page image from the extraction
    worker; its per-page bounds are enforced there, so a page that overruns
    them is skipped with a reason and the rest of the document stays.
    """

    enabled: bool = setting(True)
    # Installed Tesseract languages (Debian: tesseract-ocr-<code>), e.g. "eng+deu".
    languages: str = setting("eng")
    # A page whose mean word confidence is under this is flagged (kbtui ls --ocr-low).
    low_confidence: float = setting(0.7, minimum=0.0, maximum=1.0)
    # Wall-clock time for one page image; past it the page is skipped (ocr_timeout).
    page_timeout_seconds: float = setting(60.0, minimum=0.01, maximum=HOUR_S)
    # Address-space cap (RLIMIT_AS) of the OCR engine's process for one page.
    page_memory_bytes: int = setting(1024 * MIB, minimum=64 * MIB, maximum=TIB)
    # OCR time for one document; the pages after it are skipped (ocr_budget_spent).
    document_timeout_seconds: float = setting(3600.0, minimum=0.01, maximum=DAY_S)
    # Largest image decoded for OCR (width x height): the decompression-bomb guard.
    max_image_pixels: int = setting(100_000_000, minimum=1, maximum=1 << 40)

    def __post_init__(self) -> None:
        validate_settings(self, "ocr")
        if not _LANGUAGES.fullmatch(self.languages):
            raise InvalidSetting(
                f'{CONFIG_FILE_NAME}: ocr.languages must be Tesseract language codes joined by "+", like "eng+deu"'
            )
