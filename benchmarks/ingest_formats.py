"""Extraction and chunking throughput per document format, on real documents.

Extracts every selected file through the isolated worker (the pipeline's
path) and chunks the result, then prints per format: documents, pages (PDF
pages; one per document elsewhere), MB, chunks, and pages/s, MB/s, chunks/s
over extraction plus chunking. ``--compare`` also extracts in-process to
show what the worker process costs.

The default corpus is Debian's documentation packages (see
benchmarks/README.md for the set-up):
  html      python3.11-doc     /usr/share/doc/python3.11/html/**/*.html
  rst       python3.11-doc     /usr/share/doc/python3.11/html/_sources/**/*.rst.txt
  pdf       r-doc-pdf          /usr/share/doc/r-doc-pdf/manual/*.pdf
  code      libpython3.11-stdlib /usr/lib/python3.11/*.py
  markdown  various packages   /usr/share/doc/**/*.md
  docx      built here with python-docx from the rst sources' text (Debian
            ships no DOCX documentation), so the reader sees real prose.

Usage: python benchmarks/ingest_formats.py [--corpus DIR] [--per-format N] [--json PATH] [--compare]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from io import BytesIO
from pathlib import Path

from kbtui.chunking import ChunkSettings, chunk_document
from kbtui.extract import ExtractionFailed, ExtractionLimits, extract, extract_isolated, format_for, shutdown_extraction

PYTHON_DOCS = Path("/usr/share/doc/python3.11/html")
R_MANUALS = Path("/usr/share/doc/r-doc-pdf/manual")
PYTHON_LIB = Path("/usr/lib/python3.11")
SHARE_DOC = Path("/usr/share/doc")
MIB = 1024 * 1024


@dataclass
class FormatResult:
    label: str
    documents: int = 0
    failed: int = 0
    pages: int = 0
    megabytes: float = 0.0
    elements: int = 0
    chunks: int = 0
    extract_seconds: float = 0.0
    chunk_seconds: float = 0.0
    in_process_extract_seconds: float | None = None

    @property
    def seconds(self) -> float:
        return self.extract_seconds + self.chunk_seconds

    def rate(self, amount: float) -> float:
        return amount / self.seconds if self.seconds else 0.0


def _first(paths, count: int, max_bytes: int) -> list[Path]:
    chosen = []
    for path in sorted(paths):
        if path.is_file() and path.stat().st_size <= max_bytes:
            chosen.append(path)
            if len(chosen) == count:
                break
    return chosen


def debian_corpus(per_format: int, max_bytes: int, workdir: Path) -> dict[str, tuple[str, list[Path]]]:
    """Label -> (reader format, files) from the Debian documentation packages that are installed."""
    rst_sources = _first((PYTHON_DOCS / "_sources").rglob("*.rst.txt"), per_format, max_bytes)
    corpus = {
        "html": ("html", _first(PYTHON_DOCS.rglob("*.html"), per_format, max_bytes)),
        "rst": ("rst", rst_sources),
        "pdf": ("pdf", _first(R_MANUALS.glob("*.pdf"), per_format, max_bytes)),
        "code:python": ("code:python", _first(PYTHON_LIB.glob("*.py"), per_format, max_bytes)),
        "markdown": ("markdown", _first(SHARE_DOC.rglob("*.md"), per_format, max_bytes)),
        "docx": ("docx", _docx_from_rst(rst_sources, workdir)),
    }
    return {label: entry for label, entry in corpus.items() if entry[1]}


def _docx_from_rst(sources: list[Path], workdir: Path) -> list[Path]:
    import docx

    from kbtui.extract.text import decode_text, read_rst

    made = []
    for index, source in enumerate(sources):
        document = docx.Document()
        for element in read_rst(decode_text(source.read_bytes())):
            if element.kind == "heading":
                document.add_heading(element.text, level=min(element.level, 9))
            elif element.kind == "list_item":
                document.add_paragraph(element.text, style="List Bullet")
            else:
                document.add_paragraph(element.text)
        target = workdir / f"doc{index:03d}.docx"
        document.save(target)
        made.append(target)
    return made


def directory_corpus(root: Path, per_format: int, max_bytes: int) -> dict[str, tuple[str, list[Path]]]:
    """Label -> (reader format, files) for every supported file under ``root``."""
    by_format: dict[str, list[Path]] = {}
    for path in sorted(root.rglob("*")):
        fmt = format_for(path.name) if path.is_file() else None
        if fmt and path.stat().st_size <= max_bytes and len(by_format.get(fmt, [])) < per_format:
            by_format.setdefault(fmt, []).append(path)
    return {fmt: (fmt, files) for fmt, files in by_format.items()}


def _pdf_pages(data: bytes) -> int:
    from pypdf import PdfReader

    return len(PdfReader(BytesIO(data)).pages)


def measure(label: str, fmt: str, files: list[Path], limits: ExtractionLimits, compare: bool) -> FormatResult:
    result = FormatResult(label)
    settings = ChunkSettings()
    if compare:
        result.in_process_extract_seconds = 0.0
    for number, path in enumerate(files):
        data = path.read_bytes()
        result.documents += 1
        result.megabytes += len(data) / MIB
        result.pages += _pdf_pages(data) if fmt == "pdf" else 1
        started = time.perf_counter()
        try:
            elements = extract_isolated(data, fmt, limits)
        except ExtractionFailed:
            result.failed += 1
            result.extract_seconds += time.perf_counter() - started
            continue
        extracted = time.perf_counter()
        _, chunks = chunk_document(f"bench-{number}", elements, settings=settings, parser_version=0)
        chunked = time.perf_counter()
        result.extract_seconds += extracted - started
        result.chunk_seconds += chunked - extracted
        result.elements += len(elements)
        result.chunks += len(chunks)
        if compare:
            started = time.perf_counter()
            extract(data, fmt, limits)
            result.in_process_extract_seconds += time.perf_counter() - started
    return result


def print_table(results: list[FormatResult]) -> None:
    header = (
        f"{'format':<12} {'docs':>5} {'fail':>4} {'pages':>6} {'MB':>7} {'chunks':>7} "
        f"{'extract s':>9} {'chunk s':>8} {'pages/s':>8} {'MB/s':>7} {'chunks/s':>9}"
    )
    compare = any(r.in_process_extract_seconds is not None for r in results)
    if compare:
        header += f" {'worker/in-proc':>14}"
    print(header)
    print("-" * len(header))
    for r in results:
        line = (
            f"{r.label:<12} {r.documents:>5} {r.failed:>4} {r.pages:>6} {r.megabytes:>7.2f} {r.chunks:>7} "
            f"{r.extract_seconds:>9.2f} {r.chunk_seconds:>8.2f} {r.rate(r.pages):>8.1f} "
            f"{r.rate(r.megabytes):>7.2f} {r.rate(r.chunks):>9.0f}"
        )
        if compare and r.in_process_extract_seconds:
            line += f" {r.extract_seconds / r.in_process_extract_seconds:>14.2f}"
        print(line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, help="a directory of documents (default: Debian doc packages)")
    parser.add_argument("--per-format", type=int, default=40, help="files per format (default 40)")
    parser.add_argument("--max-file-mb", type=float, default=4.0, help="skip larger files (default 4)")
    parser.add_argument("--timeout", type=float, default=600.0, help="extraction deadline per document, s")
    parser.add_argument("--compare", action="store_true", help="also extract in-process, for the worker overhead")
    parser.add_argument("--json", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)

    max_bytes = int(args.max_file_mb * MIB)
    limits = ExtractionLimits(timeout_seconds=args.timeout)
    with tempfile.TemporaryDirectory(prefix="kbtui-bench-") as workdir:
        if args.corpus:
            corpus = directory_corpus(args.corpus, args.per_format, max_bytes)
        else:
            corpus = debian_corpus(args.per_format, max_bytes, Path(workdir))
        if not corpus:
            print("no documents found: see benchmarks/README.md for the set-up", file=sys.stderr)
            return 1
        # Start the worker, and import the readers here, outside the timings.
        extract_isolated(b"warm-up", "text", limits)
        if args.compare:
            import kbtui.extract.code  # noqa: F401, E401
        try:
            results = [measure(label, fmt, files, limits, args.compare) for label, (fmt, files) in corpus.items()]
        finally:
            shutdown_extraction()
    print_table(results)
    if args.json:
        rows = [
            {**asdict(r), "seconds": r.seconds, "pages_per_s": r.rate(r.pages),
             "mb_per_s": r.rate(r.megabytes), "chunks_per_s": r.rate(r.chunks)}
            for r in results
        ]
        args.json.write_text(json.dumps({"benchmark": "ingest_formats", "results": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
