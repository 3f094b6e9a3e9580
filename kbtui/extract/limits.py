"""Bounds on one document's extraction: input size, output size, time, memory, zip shape."""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True)
class ExtractionLimits:
    """Caps that make a hostile document fail alone instead of taking the node down.

    Loaded from the ``[extraction]`` table of ``config.toml``.
    """

    # Wall-clock deadline for parsing one document in the worker process:
    # a base plus an allowance per MiB of input, so a legitimately huge
    # manual (pypdf reads about 50 pages/s) is not cut off while a small
    # hostile file is stopped quickly.
    timeout_seconds: float = 30.0
    timeout_seconds_per_mib: float = 10.0
    # Input bytes handed to a parser.
    max_input_bytes: int = 128 * MIB
    # Characters of extracted text: the decompression-bomb guard for every format.
    max_extracted_chars: int = 16 * 1024 * 1024
    # Address-space cap (RLIMIT_AS) of the worker process.
    max_memory_bytes: int = 3 * 1024 * MIB
    # Largest decoded PDF stream; pypdf's own cap is tightened to this.
    max_pdf_stream_bytes: int = 64 * MIB
    # DOCX zip pre-checks, before any XML is parsed.
    max_zip_entries: int = 10_000
    max_zip_uncompressed_bytes: int = 512 * MIB
    max_zip_ratio: int = 100
    # Worker processes kept alive for extraction (documents parsed at once).
    worker_processes: int = 2

    def __post_init__(self) -> None:
        for name in (
            "max_input_bytes", "max_extracted_chars", "max_memory_bytes", "max_pdf_stream_bytes",
            "max_zip_entries", "max_zip_uncompressed_bytes", "max_zip_ratio", "worker_processes",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"extraction.{name} must be positive")
        if self.timeout_seconds <= 0:
            raise ValueError("extraction.timeout_seconds must be positive")
        if self.timeout_seconds_per_mib < 0:
            raise ValueError("extraction.timeout_seconds_per_mib must not be negative")

    def deadline_seconds(self, input_bytes: int) -> float:
        """The parsing deadline for a document of ``input_bytes`` bytes."""
        return self.timeout_seconds + self.timeout_seconds_per_mib * input_bytes / MIB
