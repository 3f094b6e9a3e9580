"""Question sets in BEIR layout built from FAQs that Debian packages ship, the
way ``../shared/eval/debfaq`` was built: each question heading is a query, its
answer is the one relevant passage.

Three sets from three domains:

- ``lsof``: the lsof FAQ (processes, open files, kernels; /usr/share/doc/lsof/00FAQ.gz);
- ``unixtools``: the sed FAQ (text editing, regular expressions;
  /usr/share/doc/sed/sedfaq.txt.gz) and the procps FAQ (ps, top);
- ``heldout``: the valgrind, zlib and xz FAQs (debugging and compression), kept
  aside: no rule or constant is fitted on it, it is run to check that what was
  fitted on the others carries over.

Each set gets ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/test.tsv`` under
``--out`` (default: the user cache, ``faq-sets/``), and a set whose source is
missing on this machine is skipped with a line saying so. Questions with no
answer in each set, for ``kbtui eval --no-answer``, are kept beside this
script in ``benchmarks/no_answer/``. Nothing from the FAQs enters the
repository: they are read from the machine where the script runs.

    .venv/bin/python benchmarks/faq_sets.py
    .venv/bin/python -m kbtui eval --beir ~/.cache/kbtui/faq-sets/lsof --fusion all \\
        --no-answer benchmarks/no_answer/lsof.txt
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import platformdirs

sys.path.insert(0, str(Path(__file__).resolve().parent))

from retrieval_study import QUESTION_OPENERS  # noqa: E402

DOCS = Path("/usr/share/doc")

# An answer shorter than this is a section title's empty body or a pointer
# ("See 3.2."): not a passage a question can be judged against.
MIN_ANSWER_WORDS = 12
# A heading runs on for at most this many lines before its answer begins.
MAX_HEADING_LINES = 3

# "1.2.3  Question", "2.1. Question", " 7. Question": a number at the margin
# (at most two spaces in, for zlib's right-aligned numbers), then the heading.
NUMBERED = re.compile(r"^ {0,2}(\d+(?:\.\d+)*)\.?[ \t]+(\S.*)$")
RULE = re.compile(r"^[-_=~]{10,}\s*$")


@dataclass(frozen=True)
class Entry:
    question: str
    answer: str


def read(path: Path) -> str:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return raw.decode("utf-8", errors="replace")


def numbered_entries(text: str) -> Iterator[Entry]:
    """Sections that open with a number at the margin. A table of contents
    lists the same numbers first; a number's last heading is its section."""
    lines = text.splitlines()
    starts: dict[str, int] = {}
    for index, line in enumerate(lines):
        found = NUMBERED.match(line)
        if found:
            starts[found.group(1)] = index
    ordered = sorted(starts.values())
    for position, start in enumerate(ordered):
        end = ordered[position + 1] if position + 1 < len(ordered) else len(lines)
        yield split_heading(lines[start:end])


def split_heading(section: list[str]) -> Entry:
    found = NUMBERED.match(section[0])
    assert found is not None
    heading = [found.group(2).strip()]
    body_from = 1
    # The heading goes on, indented or not, until a blank line, a line that
    # ends the question, or MAX_HEADING_LINES.
    while (body_from < len(section) and body_from < MAX_HEADING_LINES
           and section[body_from].strip() and not heading[-1].endswith(("?", ":"))):
        heading.append(section[body_from].strip())
        body_from += 1
    body = [line for line in section[body_from:] if not RULE.match(line)]
    return Entry(" ".join(heading), "\n".join(body).strip())


def plain_entries(text: str) -> Iterator[Entry]:
    """Questions alone on a line at the margin, answers indented (procps)."""
    for block in re.split(r"^(?=\S.*\?\s*$)", text, flags=re.MULTILINE):
        question, _, answer = block.partition("\n")
        if question.strip():
            yield Entry(question.strip(), answer.strip())


def question_answer_entries(text: str) -> Iterator[Entry]:
    """``Q:`` then ``A:`` blocks (the xz FAQ)."""
    for block in re.split(r"^Q:\s+", text, flags=re.MULTILINE)[1:]:
        question, _, answer = block.partition("\nA:")
        yield Entry(" ".join(question.split()), answer.strip())


@dataclass(frozen=True)
class Source:
    name: str  # the passages' id prefix
    path: Path
    parse: str  # "numbered", "plain" or "qa"


SETS: dict[str, list[Source]] = {
    "lsof": [Source("lsof", DOCS / "lsof/00FAQ.gz", "numbered")],
    "unixtools": [Source("sed", DOCS / "sed/sedfaq.txt.gz", "numbered"),
                  Source("procps", DOCS / "procps/FAQ.gz", "plain")],
    "heldout": [
        Source("valgrind", DOCS / "valgrind/FAQ.txt.gz", "numbered"),
        Source("zlib", DOCS / "zlib1g-dev/FAQ.gz", "numbered"),
        Source("xz", DOCS / "xz-utils/faq.txt.gz", "qa"),
    ],
}


def entries(source: Source) -> list[Entry]:
    text = read(source.path)
    parse = {"numbered": numbered_entries, "plain": plain_entries, "qa": question_answer_entries}[source.parse]
    found = parse(text)
    return [e for e in found if len(e.answer.split()) >= MIN_ANSWER_WORDS and len(e.question.split()) >= 2]


def is_question(heading: str) -> bool:
    """A heading is asked as a query only when it is a question: a section
    titled "GNU sed v1.03" or "More detailed explanation" stays a passage only."""
    return "?" in heading or heading.split()[0].lower() in QUESTION_OPENERS


def write_set(name: str, sources: list[Source], out: Path) -> tuple[int, int] | None:
    missing = [s.path for s in sources if not s.path.is_file()]
    if missing:
        print(f"{name}: skipped, not on this machine: {', '.join(map(str, missing))}")
        return None
    target = out / name
    (target / "qrels").mkdir(parents=True, exist_ok=True)
    corpus, queries, qrels = [], [], []
    for source in sources:
        for number, entry in enumerate(entries(source)):
            doc_id, query_id = f"faq-{source.name}-{number}", f"q-{source.name}-{number}"
            corpus.append({"_id": doc_id, "title": "", "text": entry.answer})
            if is_question(entry.question):
                queries.append({"_id": query_id, "text": entry.question})
                qrels.append(f"{query_id}\t{doc_id}\t1")
    (target / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in corpus), encoding="utf-8")
    (target / "queries.jsonl").write_text("".join(json.dumps(row) + "\n" for row in queries), encoding="utf-8")
    (target / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(q + "\n" for q in qrels),
                                               encoding="utf-8")
    return len(corpus), len(queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(platformdirs.user_cache_dir("kbtui")) / "faq-sets")
    parser.add_argument("sets", nargs="*", help=f"which sets, of {', '.join(SETS)} (default: all)")
    args = parser.parse_args()
    unknown = set(args.sets) - set(SETS)
    if unknown:
        parser.error(f"no such set: {', '.join(sorted(unknown))}")
    for name in args.sets or SETS:
        written = write_set(name, SETS[name], args.out)
        if written:
            print(f"{name}: {written[0]} passages, {written[1]} questions in {args.out / name}")


if __name__ == "__main__":
    main()
