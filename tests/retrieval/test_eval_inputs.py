"""``kbtui eval --beir`` refuses sets it would score wrongly, keeps duplicate texts apart,
and leaves no temporary knowledge base behind when stopped (issue 16, findings 6 and 9)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

DOCS = [
    ("d1", "Wing flutter", "flutter of a swept wing at transonic speed"),
    ("d2", "Boundary layer", "laminar boundary layer transition on a flat plate"),
    ("d3", "Heat transfer", "heat transfer in hypersonic flow over a blunt body"),
]
QUERIES = [("q1", "swept wing flutter"), ("q2", "boundary layer transition")]
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n"


def jsonl(records) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def write_set(
    root: Path, *, corpus: bytes | None = None, queries: bytes | None = None, qrels: bytes | None = None,
    with_qrels: bool = True,
) -> Path:
    root.mkdir(parents=True)
    (root / "corpus.jsonl").write_bytes(
        corpus if corpus is not None else jsonl({"_id": i, "title": t, "text": x} for i, t, x in DOCS)
    )
    (root / "queries.jsonl").write_bytes(queries if queries is not None else jsonl({"_id": q, "text": t} for q, t in QUERIES))
    if with_qrels:
        (root / "qrels").mkdir()
        (root / "qrels" / "test.tsv").write_bytes(qrels if qrels is not None else QRELS.encode())
    return root


GOOD_CORPUS_LINE = json.dumps({"_id": "d1", "title": "Wing", "text": "flutter"}).encode() + b"\n"

MALFORMED = {
    "no qrels": (dict(with_qrels=False), "the BEIR directory has no qrels/test.tsv"),
    "bad JSON line": (dict(corpus=GOOD_CORPUS_LINE + b'{"_id": "d2", "text": \n'), "BEIR corpus.jsonl line 2: not valid JSON"),
    "missing _id": (
        dict(corpus=GOOD_CORPUS_LINE + b'{"text": "no id"}\n'), "BEIR corpus.jsonl line 2: no _id (a string or an integer)"
    ),
    "not an object": (dict(queries=b'["q1", "text"]\n'), "BEIR queries.jsonl line 1: not a JSON object"),
    "grade NaN": (dict(qrels=b"q1\td1\tNaN\n" + b"q1\td2\tNaN\n"), "BEIR qrels/test.tsv line 2: the score is not an integer"),
    "invalid UTF-8": (dict(queries=b'{"_id": "q1", "text": "caf\xe9"}\n'), "BEIR queries.jsonl line 1: not valid UTF-8"),
    "duplicate document id": (
        dict(corpus=GOOD_CORPUS_LINE + json.dumps({"_id": "d1", "text": "other"}).encode() + b"\n"),
        "BEIR corpus.jsonl line 2: the _id of line 1 again",
    ),
    "duplicate query": (
        dict(queries=jsonl([{"_id": "q1", "text": "a"}, {"_id": "q1", "text": "b"}])),
        "BEIR queries.jsonl line 2: the _id of line 1 again",
    ),
    "duplicate judgement": (dict(qrels=b"q1\td1\t1\nq1\td1\t2\n"), "BEIR qrels/test.tsv line 2: the pair of line 1 again"),
    "empty corpus": (dict(corpus=b""), "BEIR corpus.jsonl holds no documents"),
    "no queries": (dict(queries=b"\n"), "BEIR queries.jsonl holds no queries"),
    "no judgements": (dict(qrels=b"query-id\tcorpus-id\tscore\n"), "BEIR qrels/test.tsv holds no judgements"),
    "nothing relevant": (
        dict(qrels=b"q1\td1\t0\nq9\td2\t1\n"),
        "BEIR qrels/test.tsv judges no query of queries.jsonl relevant to any document",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_set_is_one_line_and_exit_2(run_cli, tmp_path, case):
    layout, message = MALFORMED[case]
    beir = write_set(tmp_path / "beir", **layout)
    result = run_cli("eval", "--beir", str(beir), "--provider", "hash", "--json")
    assert (result.code, result.err) == (2, f"kbtui: {message}\n")
    assert result.out == ""


def test_two_ids_with_the_same_text_stay_two_documents(run_cli, tmp_path):
    # Both are relevant to q1: a ranker that returns both on top is perfect.
    # Merged by content hash they became one document labelled "twin", so the
    # perfect ranker scored nDCG@10 .61 and "d1" could never be found.
    same = "flutter of a swept wing at transonic speed"
    corpus = jsonl([
        {"_id": "d1", "title": "Wing flutter", "text": same},
        {"_id": "twin", "title": "Wing flutter", "text": same},
        {"_id": "d2", "title": "Boundary layer", "text": "laminar boundary layer transition on a flat plate"},
    ])
    beir = write_set(tmp_path / "beir", corpus=corpus, qrels=b"q1\td1\t1\nq1\ttwin\t1\nq2\td2\t1\n")
    kept = tmp_path / "kept"
    result = run_cli("eval", "--beir", str(beir), "--provider", "hash", "--json", "--home", str(kept))
    assert result.code == 0, result.err
    lexical = json.loads(result.out)[0]
    assert lexical["mode"] == "lexical"
    assert lexical["ndcg_at_10"] == 1.0 and lexical["recall_at_100"] == 1.0
    with sqlite3.connect(kept / "kb.sqlite3") as db:
        assert db.execute("SELECT count(*) FROM document").fetchone()[0] == 3
        assert db.execute("SELECT count(DISTINCT content_hash) FROM document").fetchone()[0] == 2


def _big_set(root: Path, documents: int) -> Path:
    words = ["pressure", "drag", "lift", "wing", "flutter", "boundary", "layer", "shock", "heat", "transfer"]
    corpus = jsonl(
        {"_id": f"d{n}", "title": f"Report {n}", "text": " ".join(words[(n + k) % len(words)] for k in range(400))}
        for n in range(documents)
    )
    return write_set(root, corpus=corpus, qrels=b"q1\td1\t1\nq2\td2\t1\n")


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stopped_eval_removes_its_temporary_knowledge_base(tmp_path, signum):
    beir = _big_set(tmp_path / "beir", 3000)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {
        **os.environ, "TMPDIR": str(scratch), "KBTUI_HOME": str(tmp_path / "own"),
        "KBTUI_EMBEDDING_PROVIDER": "hash", "PYTHONUNBUFFERED": "1",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "kbtui", "eval", "--beir", str(beir), "--provider", "hash", "--json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        # As from an operator's terminal: a suite started in the background (`make test &`)
        # has SIGINT ignored, and a child would inherit that and never see the Ctrl-C.
        preexec_fn=_interruptible,
    )
    try:
        deadline = time.monotonic() + 120
        ingesting = False
        while time.monotonic() < deadline and process.poll() is None:
            homes = list(scratch.glob("kbtui-eval-home-*"))
            blobs = homes[0] / "blobs" if homes else None
            if blobs is not None and blobs.is_dir() and len(list(blobs.iterdir())) >= 10:
                ingesting = True
                break
            time.sleep(0.02)  # polling for the condition, bounded by the deadline
        assert ingesting, "eval never started to ingest"
        assert (homes[0] / "node.key").exists()  # what must not be left behind
        process.send_signal(signum)
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130
    assert err.decode().strip().splitlines()[-1] == "kbtui: aborted"
    assert b"Traceback" not in err
    assert list(scratch.glob("kbtui-eval-home-*")) == []
