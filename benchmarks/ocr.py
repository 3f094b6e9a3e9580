"""OCR engines on the same generated pages: characters right, pages/s, peak memory.

Renders A4 pages of English prose with Pillow (a large title, then body text
at 11 pt), clean and "scanned" (turned 0.7 degrees, grain, blur, JPEG at
quality 55), and OCRs each page with:

  tesseract  Debian's tesseract-ocr 5 + tesseract-ocr-eng, run exactly as the
             extraction worker runs it (kbtui.extract.ocr: one process per
             page, page segmentation with orientation detection, one thread)
  rapidocr   rapidocr-onnxruntime (PP-OCRv4 detection and recognition models
             bundled in its wheel, on onnxruntime), with its default settings

Each engine runs in a child process of its own, so its peak memory is its
own: the peak resident set of the process, and of its children (Tesseract's
page processes). The character error rate (CER) is the edit distance between
the engine's text and the page's text (whitespace runs made one space),
divided by the page's length; "CER no spaces" ignores spaces altogether.
Model loading is timed apart from the pages.

rapidocr-onnxruntime is not a dependency of kbtui; measure it with
`.venv/bin/pip install rapidocr-onnxruntime` first (and uninstall it after).

    .venv/bin/python benchmarks/ocr.py [--pages 3] [--dpi 200] [--engines tesseract rapidocr]
        [--threads 1] [--json ocr.json]
"""

from __future__ import annotations

import argparse
import io
import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kbtui.extract.limits import OcrSettings  # noqa: E402

ENGINES = ("tesseract", "rapidocr")
KINDS = ("clean", "scanned")
WORDS = (
    "the of and to in is that for it as with was on be by this are from or at which an but not have has "
    "node backup restore certificate rotate server database index query search document page scan operator "
    "network offline encrypted storage replica cluster volume snapshot schedule retention policy archive "
    "kernel memory process thread socket timeout deadline budget worker batch queue admission chunk vector"
).split()


def render_page(seed: int, kind: str, dpi: int) -> tuple[Image.Image, str]:
    """An A4 page of prose (deterministic per seed) and the text printed on it."""
    rng = random.Random(seed)
    width, height = int(8.27 * dpi), int(11.69 * dpi)
    image = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(image)

    def px(points: float) -> int:
        return int(points * dpi / 72)

    body = ImageFont.load_default(size=px(11))
    margin, y = px(54), px(54)
    title = f"Chapter {seed} {rng.choice(WORDS).capitalize()} {rng.choice(WORDS)}"
    draw.text((margin, y), title, font=ImageFont.load_default(size=px(18)), fill=0)
    lines, y = [title], y + px(30)
    words = []
    for _ in range(60):
        sentence = [rng.choice(WORDS) for _ in range(rng.randint(6, 14))]
        words += [sentence[0].capitalize(), *sentence[1:-1], sentence[-1] + "."]
    line = ""
    for word in words:
        longer = f"{line} {word}".strip()
        if draw.textlength(longer, font=body) <= width - 2 * margin:
            line = longer
            continue
        draw.text((margin, y), line, font=body, fill=0)
        lines.append(line)
        line, y = word, y + int(px(11) * 1.45)
        if y > height - margin - 2 * px(11):
            break
    if kind == "scanned":
        image = image.rotate(0.7, fillcolor=255, resample=Image.Resampling.BICUBIC)
        grain = np.random.default_rng(seed).normal(0, 18, (height, width))
        image = Image.fromarray(np.clip(np.asarray(image) + grain, 0, 255).astype(np.uint8))
        image = image.filter(ImageFilter.GaussianBlur(0.6))
        jpeg = io.BytesIO()
        image.save(jpeg, "JPEG", quality=55)
        image = Image.open(io.BytesIO(jpeg.getvalue()))
        image.load()
    return image, "\n".join(lines)


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance, a row at a time in numpy (insertions by a running minimum)."""
    if not a or not b:
        return max(len(a), len(b))
    target = np.frombuffer(b.encode("utf-32-le"), dtype=np.uint32)
    columns = np.arange(len(b) + 1)
    previous = columns.copy()
    for i, character in enumerate(a, 1):
        substituted = previous[:-1] + (target != ord(character))
        current = np.empty(len(b) + 1, dtype=np.int64)
        current[0] = i
        current[1:] = np.minimum(substituted, previous[1:] + 1)
        previous = np.minimum.accumulate(current - columns) + columns
    return int(previous[-1])


def error_rate(found: str, truth: str, *, spaces: bool) -> float:
    def normal(text: str) -> str:
        return " ".join(text.split()) if spaces else "".join(text.split())

    return edit_distance(normal(found), normal(truth)) / max(1, len(normal(truth)))


def tesseract_reader(threads: int):
    from kbtui.extract.collect import ElementCollector
    from kbtui.extract.ocr import OcrRun, tesseract_languages_installed, tesseract_version

    if not tesseract_languages_installed("eng"):
        raise RuntimeError("tesseract with tesseract-ocr-eng is not installed (make setup)")
    settings = OcrSettings(page_timeout_seconds=600)

    def read(image: Image.Image) -> str:
        out = ElementCollector(1 << 30)
        OcrRun(settings).read_page(out, 1, [image])
        return "\n".join(e.text for e in out.elements if e.text != "page 1")

    return read, tesseract_version() or "tesseract"


def rapidocr_reader(threads: int):
    from importlib.metadata import version

    from rapidocr_onnxruntime import RapidOCR

    engine = RapidOCR(intra_op_num_threads=threads, inter_op_num_threads=1)

    def read(image: Image.Image) -> str:
        result, _ = engine(np.asarray(image.convert("RGB")))
        return "\n".join(text for _, text, _ in result or [])

    return read, f"rapidocr-onnxruntime {version('rapidocr-onnxruntime')}"


def measure_engine(engine: str, pages: int, dpi: int, threads: int) -> dict:
    """In this (child) process: OCR every page with ``engine``; times, errors and peak memory."""
    started = time.perf_counter()
    read, label = (tesseract_reader if engine == "tesseract" else rapidocr_reader)(threads)
    read(render_page(0, "clean", dpi)[0].crop((0, 0, 800, 400)))  # models loaded, caches warm
    load_seconds = time.perf_counter() - started
    results = []
    for kind in KINDS:
        for seed in range(1, pages + 1):
            image, truth = render_page(seed, kind, dpi)
            began = time.perf_counter()
            found = read(image)
            seconds = time.perf_counter() - began
            results.append({
                "kind": kind, "seconds": seconds, "characters": len(" ".join(truth.split())),
                "cer": error_rate(found, truth, spaces=True), "cer_no_spaces": error_rate(found, truth, spaces=False),
            })
    return {
        "engine": engine, "version": label, "load_seconds": load_seconds, "pages": results,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "peak_child_rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def run_in_child(engine: str, args: argparse.Namespace) -> dict:
    command = [sys.executable, __file__, "--child", engine, "--pages", str(args.pages), "--dpi", str(args.dpi),
               "--threads", str(args.threads)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["failed"])[-1]
        return {"engine": engine, "error": last}
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary(measured: dict) -> dict:
    rows = {}
    for kind in KINDS:
        pages = [p for p in measured["pages"] if p["kind"] == kind]
        seconds = sum(p["seconds"] for p in pages)
        characters = sum(p["characters"] for p in pages)
        rows[kind] = {
            "pages_per_second": len(pages) / seconds if seconds else 0.0,
            # Weighted by page length: the share of all the characters that came out wrong.
            "cer": sum(p["cer"] * p["characters"] for p in pages) / characters,
            "cer_no_spaces": sum(p["cer_no_spaces"] * p["characters"] for p in pages) / characters,
        }
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=3, help="pages of each kind (clean, scanned)")
    parser.add_argument("--dpi", type=int, default=200)
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    parser.add_argument("--threads", type=int, default=1, help="rapidocr's onnxruntime threads (Tesseract runs one)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", choices=ENGINES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure_engine(args.child, args.pages, args.dpi, args.threads)))
        return

    report = {"pages_per_kind": args.pages, "dpi": args.dpi, "threads": args.threads, "engines": []}
    print(f"{args.pages} A4 pages of each kind at {args.dpi} dpi; one engine per child process\n")
    print(f"{'engine':<34} {'kind':<8} {'pages/s':>8} {'CER':>7} {'CER no spaces':>14} "
          f"{'load s':>7} {'peak MiB':>9} {'children MiB':>13}")
    for engine in args.engines:
        measured = run_in_child(engine, args)
        if "error" in measured:
            print(f"{engine:<34} not measured: {measured['error']}")
            report["engines"].append(measured)
            continue
        measured["summary"] = summary(measured)
        report["engines"].append(measured)
        for kind, row in measured["summary"].items():
            print(f"{measured['version']:<34} {kind:<8} {row['pages_per_second']:>8.2f} {row['cer']:>7.4f} "
                  f"{row['cer_no_spaces']:>14.4f} {measured['load_seconds']:>7.1f} "
                  f"{measured['peak_rss_mib']:>9.0f} {measured['peak_child_rss_mib']:>13.0f}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
