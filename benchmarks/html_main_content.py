"""Benchmark: does the HTML reader drop boilerplate, and keep all the content,
on real pages that do not mark their main content?

Ground truth comes from real pages that DO mark it (``<main>``,
``role="main"``, one ``<article>``): what the reader extracts from the
landmark is the content. Then every landmark is removed (``main``,
``article``, ``nav``, ``aside``, ``header`` and ``footer`` renamed to a plain
``div``, ARIA roles dropped), as on the many generators that set none,
and the page is read twice: by the plain walk (landmark-less pages before
trafilatura) and by the reader as it is now. Measured, over every page:

* content kept: share of the landmark's words (as a multiset) still there;
* boilerplate dropped: share of the words outside the landmark that are gone.

Pages that never had a landmark (DocBook, texinfo, gtk-doc) are read both
ways too, and their navigation lines counted (words in tables or divs whose
class says navigation: ``navheader``, ``navfooter``, ``header``, ``navigation``).

    python benchmarks/html_main_content.py [--pages N] [--json PATH] [DIR ...]

Without DIR it looks in the usual documentation trees of a Debian system
(/usr/share/doc, npm's and rustup's documentation).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kbtui.extract import ExtractionFailed  # noqa: E402
from kbtui.extract import html as reader  # noqa: E402
from kbtui.extract.limits import ExtractionLimits  # noqa: E402

DEFAULT_DIRS = [
    Path("/usr/share/doc"),
    Path("/usr/lib/node_modules/npm/docs/output"),
    *sorted(Path.home().glob(".rustup/toolchains/*/share/doc/rust/html")),
]
_LANDMARK = re.compile(rb"<main\b|role=[\"']main[\"']|<article\b", re.IGNORECASE)
_NAV_CLASSES = re.compile(rb"class=[\"'](?:navheader|navfooter|header|navigation)[\"']", re.IGNORECASE)
_WORD = re.compile(r"\w+")
LIMITS = ExtractionLimits()


def words(elements) -> Counter[str]:
    return Counter(w for e in elements for w in _WORD.findall(e.text.lower()))


def strip_landmarks(data: bytes) -> bytes:
    """The page as a generator without semantic markup would write it: main,
    article, nav, aside, header and footer become divs, ARIA roles go."""
    data = re.sub(rb"<(/?)(?:main|article|nav|aside|header|footer)\b", rb"<\1div", data, flags=re.IGNORECASE)
    return re.sub(rb"\brole=[\"'][a-z]+[\"']", b"", data, flags=re.IGNORECASE)


def plain_walk(data: bytes):
    """The reader without trafilatura: what a landmark-less page gave before."""
    with mock.patch.object(reader, "main_content_text", return_value=None):
        return reader.read_html(data, LIMITS)


def overlap(part: Counter[str], whole: Counter[str]) -> int:
    return sum(min(count, whole[word]) for word, count in part.items())


def readable(data: bytes) -> bool:
    try:
        return bool(plain_walk(data))
    except ExtractionFailed:
        return False


def pages(dirs: list[Path], limit: int) -> tuple[list[Path], list[Path]]:
    """Up to ``limit`` pages of each kind, taken in turn from each documentation
    tree (so one large tree does not stand for all)."""
    found: list[tuple[list[Path], list[Path]]] = []
    for directory in dirs:
        marked, unmarked = [], []
        for path in sorted(directory.rglob("*.html")):
            if len(marked) >= limit and len(unmarked) >= limit:
                break
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if not 2_000 <= len(data) <= 2_000_000 or not readable(data):
                continue
            bucket = marked if _LANDMARK.search(data) else unmarked
            if len(bucket) < limit:
                bucket.append(path)
        found.append((marked, unmarked))
    return _in_turn([m for m, _ in found], limit), _in_turn([u for _, u in found], limit)


def _in_turn(lists: list[list[Path]], limit: int) -> list[Path]:
    taken: list[Path] = []
    for row in range(max((len(items) for items in lists), default=0)):
        taken.extend(items[row] for items in lists if row < len(items))
    return taken[:limit]


def measure_marked(paths: list[Path]) -> dict[str, float]:
    totals = Counter()
    trees = Counter(_tree_of(path) for path in paths)
    started = time.perf_counter()
    for path in paths:
        data = path.read_bytes()
        truth = words(reader.read_html(data, LIMITS))  # the landmark's content
        stripped = strip_landmarks(data)
        page = words(plain_walk(stripped))  # landmark gone: the whole page's text
        now = words(reader.read_html(stripped, LIMITS))
        boilerplate = page - truth
        totals["truth"] += sum(truth.values())
        totals["boilerplate"] += sum(boilerplate.values())
        totals["walk_kept"] += overlap(truth, page)
        totals["now_kept"] += overlap(truth, now)
        totals["walk_boilerplate_left"] += sum(boilerplate.values())
        totals["now_boilerplate_left"] += overlap(boilerplate, now - truth)
    elapsed = time.perf_counter() - started
    return {
        "pages": len(paths),
        "content_words": totals["truth"],
        "boilerplate_words": totals["boilerplate"],
        "content_kept_walk": totals["walk_kept"] / max(1, totals["truth"]),
        "content_kept_now": totals["now_kept"] / max(1, totals["truth"]),
        "boilerplate_dropped_walk": 1 - totals["walk_boilerplate_left"] / max(1, totals["boilerplate"]),
        "boilerplate_dropped_now": 1 - totals["now_boilerplate_left"] / max(1, totals["boilerplate"]),
        "seconds": elapsed,
        "trees": dict(trees),
    }


def _tree_of(path: Path) -> str:
    parts = path.parts
    for anchor in ("doc", "output", "html"):
        if anchor in parts:
            index = parts.index(anchor)
            return "/".join(parts[index + 1 : index + 2]) or anchor
    return path.parent.name


def measure_unmarked(paths: list[Path]) -> dict[str, float]:
    totals = Counter()
    trees = Counter(_tree_of(path) for path in paths)
    for path in paths:
        data = path.read_bytes()
        walk = plain_walk(data)
        now = reader.read_html(data, LIMITS)
        totals["walk_words"] += sum(words(walk).values())
        totals["now_words"] += sum(words(now).values())
        if _NAV_CLASSES.search(data):
            nav_lines = {e.text for e in walk} - {e.text for e in now}
            totals["nav_pages"] += 1
            totals["lines_dropped"] += len(nav_lines)
    return {
        "pages": len(paths),
        "words_walk": totals["walk_words"],
        "words_now": totals["now_words"],
        "share_kept": totals["now_words"] / max(1, totals["walk_words"]),
        "pages_with_navigation_markup": totals["nav_pages"],
        "lines_dropped_on_those": totals["lines_dropped"],
        "trees": dict(trees),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="*", type=Path)
    parser.add_argument("--pages", type=int, default=120, help="pages of each kind at most")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    marked, unmarked = pages([d for d in (args.dirs or DEFAULT_DIRS) if d.is_dir()], args.pages)
    result = {"landmark_removed": measure_marked(marked), "never_marked": measure_unmarked(unmarked)}
    m = result["landmark_removed"]
    print(f"pages with a landmark, landmark removed: {m['pages']} pages, "
          f"{m['content_words']} content words, {m['boilerplate_words']} boilerplate words")
    print(f"  content kept:        walk {m['content_kept_walk']:.3f}  now {m['content_kept_now']:.3f}")
    print(f"  boilerplate dropped: walk {m['boilerplate_dropped_walk']:.3f}  now {m['boilerplate_dropped_now']:.3f}")
    print(f"  {m['seconds'] / max(1, m['pages']) * 1000:.0f} ms a page (three reads each); from {m['trees']}")
    u = result["never_marked"]
    print(f"pages that never had one: {u['pages']} pages; words kept {u['share_kept']:.3f} "
          f"({u['words_now']} of {u['words_walk']}); {u['lines_dropped_on_those']} lines dropped on "
          f"{u['pages_with_navigation_markup']} pages with navigation markup; from {u['trees']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
