"""`kbtui search` output (snippet, --explain) and `kbtui eval` on a small BEIR directory."""

from __future__ import annotations

import json
from pathlib import Path

from kbtui.retrieval.eval import load_beir
from kbtui.retrieval.snippets import snippet
from tests.conftest import write


def test_search_prints_a_short_snippet_with_the_query_terms_marked(run_cli, tmp_path):
    body = "Intro words. " * 40 + "The flange bearings overheat when lubrication fails. " + "Tail words. " * 40
    write(tmp_path / "pump.md", "# Pump\n\n" + body)
    assert run_cli("add", str(tmp_path / "pump.md")).code == 0
    out = run_cli("search", "bearing lubrication", "--format", "table").out
    line = next(line for line in out.splitlines() if "bearings" in line)
    assert "…" in line and len(line.strip()) < 260
    segments = snippet(body, "bearing lubrication")
    assert [s.text for s in segments if s.highlighted] == ["bearings", "lubrication"]


def test_search_explain_shows_arms_plan_and_timings(run_cli, tmp_path):
    write(tmp_path / "a.md", "# Alpha\n\nThe zebracorn budget is confidential.")
    write(tmp_path / "b.md", "# Beta\n\nSoup on Fridays.")
    run_cli("add", str(tmp_path))
    text = run_cli("search", "what is the zebracorn budget", "--explain").out
    assert "lexical #1" in text and "vector #" in text
    assert "ranked" in text and "left out" in text and "ms" in text
    payload = json.loads(run_cli("search", "what is the zebracorn budget", "--explain", "--json").out)
    plan = payload["explain"]["lexical_plan"]
    assert set(plan["ranked"]) == {"zebracorn", "budget"} and "the" in plan["pruned"] and "what" in plan["missing"]
    assert payload["explain"]["fusion"] == "convex"
    hit = payload["hits"][0]
    assert hit["lexical_rank"] == 1 and hit["lexical_score"] > 0 and hit["neighbors"] == []


def test_search_hostile_query_prints_no_sqlite_error(run_cli, tmp_path):
    write(tmp_path / "a.md", "# A\n\nalpha")
    run_cli("add", str(tmp_path / "a.md"))
    for query in ('"x', "(a OR", "NEAR(a b", "col:foo", "-a"):
        result = run_cli("search", "--", query)
        assert result.code == 0 and "fts5" not in (result.out + result.err).lower()


def write_beir(root: Path) -> Path:
    docs = [
        ("d1", "Wing flutter", "flutter of a swept wing at transonic speed"),
        ("d2", "Boundary layer", "laminar boundary layer transition on a flat plate"),
        ("d3", "Heat transfer", "heat transfer in hypersonic flow over a blunt body"),
        ("d4", "Shock waves", "shock wave interaction with a turbulent boundary layer"),
    ]
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in docs))
    queries = [("q1", "swept wing flutter"), ("q2", "boundary layer transition"), ("q3", "unjudged query")]
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\nq2\td4\t1\nq2\td3\t0\n")
    return root


def test_beir_loader_keeps_judged_queries_and_positive_grades(tmp_path):
    collection = load_beir(write_beir(tmp_path / "beir"))
    assert set(collection.queries) == {"q1", "q2"}
    assert collection.qrels["q2"] == {"d2": 1, "d4": 1}
    assert len(collection.documents) == 4


def test_kbtui_eval_reports_every_arm_without_touching_the_knowledge_base(run_cli, tmp_path, home):
    beir = write_beir(tmp_path / "beir")
    result = run_cli("eval", "--beir", str(beir), "--provider", "hash", "--fusion", "rrf", "--fusion", "score_aware", "--json")
    assert result.code == 0, result.err
    records = json.loads(result.out)
    assert [(r["mode"], r["fusion"]) for r in records] == [
        ("lexical", None), ("vector", None), ("hybrid", "rrf"), ("hybrid", "score_aware"),
    ]
    for record in records:
        assert {"ndcg_at_10", "recall_at_100", "mrr", "p50_ms", "p95_ms"} <= set(record)
        assert record["queries"] == 2
    lexical = records[0]
    assert lexical["mrr"] == 1.0 and lexical["recall_at_100"] == 1.0
    assert not home.exists()  # the operator's own knowledge base is untouched (not even created)
    table = run_cli("eval", "--beir", str(beir), "--provider", "hash").out
    assert "nDCG@10" in table and "hybrid (convex)" in table


def test_kbtui_eval_home_keeps_the_knowledge_base_and_reuses_it(run_cli, tmp_path, home):
    beir = write_beir(tmp_path / "beir")
    kept = tmp_path / "kept"
    first = run_cli("eval", "--beir", str(beir), "--provider", "hash", "--json", "--home", str(kept))
    assert first.code == 0, first.err
    assert (kept / "kb.sqlite3").exists()
    again = run_cli("eval", "--beir", str(beir), "--provider", "hash", "--json", "--home", str(kept))
    assert again.code == 0, again.err
    strip = lambda out: [{k: v for k, v in r.items() if not k.endswith("_ms")} for r in json.loads(out)]  # noqa: E731
    assert strip(again.out) == strip(first.out)
    import sqlite3

    with sqlite3.connect(kept / "kb.sqlite3") as db:
        assert db.execute("SELECT count(*) FROM document").fetchone()[0] == 4  # reused, not added twice
    other = run_cli("eval", "--beir", str(beir), "--provider", "local", "--home", str(kept))
    assert other.code != 0 and "another collection or provider" in other.err
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("mine")
    assert run_cli("eval", "--beir", str(beir), "--provider", "hash", "--home", str(stranger)).code != 0
    assert run_cli("eval", "--beir", str(beir), "--provider", "hash", "--home", str(home)).code != 0


def test_an_eval_base_left_by_a_killed_run_is_swept_by_the_next(tmp_path, home):
    """SIGKILL leaves the temporary base (a key and the corpus's text in
    clear); the next eval removes it, and never the base of a run still alive."""
    import fcntl
    import os
    import signal
    import subprocess
    import sys
    import time

    from kbtui.retrieval.eval_homes import EVAL_HOME_PREFIX, LOCK_NAME
    from tests.faults.processes import kbtui_env

    beir = write_beir(tmp_path / "beir")
    with (beir / "corpus.jsonl").open("a") as corpus:  # long enough to be killed mid-ingestion
        for number in range(400):
            corpus.write(json.dumps({"_id": f"x{number}", "title": "Filler", "text": f"filler text {number}"}) + "\n")
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**kbtui_env(home), "TMPDIR": str(temp)}
    command = [sys.executable, "-m", "kbtui", "eval", "--beir", str(beir), "--provider", "hash", "--json"]

    killed = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not list(temp.glob(f"{EVAL_HOME_PREFIX}*/kb.sqlite3")):
        assert killed.poll() is None and time.monotonic() < deadline, "the eval base never appeared"
        time.sleep(0.01)
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    (left,) = temp.glob(f"{EVAL_HOME_PREFIX}*")
    assert (left / "node.key").exists()

    alive = temp / f"{EVAL_HOME_PREFIX}alive"  # another run, still going
    alive.mkdir(mode=0o700)
    lock = os.open(alive / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr
        assert not left.exists()
        assert list(temp.glob(f"{EVAL_HOME_PREFIX}*")) == [alive]
    finally:
        os.close(lock)


def test_kbtui_eval_on_postgresql_scores_as_on_sqlite_and_never_uses_the_operators_database(
    run_cli, tmp_path, home, postgres_server, monkeypatch
):
    beir = write_beir(tmp_path / "beir")
    on_sqlite = run_cli("eval", "--beir", str(beir), "--provider", "hash", "--fusion", "all", "--json")
    assert on_sqlite.code == 0, on_sqlite.err

    # The operator's base is on PostgreSQL: eval runs beside it, never in it.
    own = postgres_server.url(postgres_server.create_database())
    monkeypatch.setenv("KBTUI_DATABASE_URL", own)
    beside = run_cli("eval", "--beir", str(beir), "--provider", "hash", "--fusion", "all", "--json")
    assert beside.code == 0, beside.err
    assert run_cli("eval", "--beir", str(beir), "--provider", "hash", "--database-url", own).code == 2
    eval_database = postgres_server.url(postgres_server.create_database())
    on_postgres = run_cli(
        "eval", "--beir", str(beir), "--provider", "hash", "--fusion", "all", "--json", "--database-url", eval_database
    )
    assert on_postgres.code == 0, on_postgres.err
    import psycopg

    with psycopg.connect(own) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE tablename = 'document'").fetchone()[0] == 0
    with psycopg.connect(eval_database) as conn:
        assert conn.execute("SELECT count(*) FROM document").fetchone()[0] == 4

    def scores(out: str) -> list[tuple]:
        return [(r["mode"], r["fusion"], round(r["ndcg_at_10"], 2), round(r["mrr"], 2)) for r in json.loads(out)]

    assert scores(on_postgres.out) == scores(on_sqlite.out) == scores(beside.out)
    fresh = postgres_server.url(postgres_server.create_database())
    table = run_cli("eval", "--beir", str(beir), "--provider", "hash", "--database-url", fresh)
    assert table.code == 0 and "store postgresql" in " ".join(table.out.split())


def test_kbtui_eval_no_answer_reports_the_share_of_off_topic_questions_found_empty(run_cli, tmp_path, home):
    beir = write_beir(tmp_path / "beir")
    questions = write(tmp_path / "off_topic.txt", "# not about aircraft\nhow long to boil an egg\n\nbest banana bread\n")
    result = run_cli("eval", "--beir", str(beir), "--provider", "hash", "--no-answer", str(questions), "--json")
    assert result.code == 0, result.err
    records = json.loads(result.out)
    assert {r["off_topic_queries"] for r in records} == {2}
    # The hash embedder has no calibrated floor: neither question shares a word with the set,
    # so lexical search alone calls both unanswered and hybrid calls them "related".
    by_mode = {r["mode"]: r for r in records}
    assert by_mode["lexical"]["off_topic_none"] == 1.0 and by_mode["hybrid"]["off_topic_none"] == 0.0
    table = run_cli("eval", "--beir", str(beir), "--provider", "hash", "--no-answer", str(questions)).out
    assert "OFF-TOPIC" in table
    empty = write(tmp_path / "empty.txt", "# nothing\n\n")
    refused = run_cli("eval", "--beir", str(beir), "--provider", "hash", "--no-answer", str(empty))
    assert refused.code == 2 and "1 to 10,000 questions" in refused.err


def test_kbtui_eval_per_query_lists_the_queries_where_hybrid_loses_to_an_arm(run_cli, tmp_path, home):
    beir = write_beir(tmp_path / "beir")
    result = run_cli("eval", "--beir", str(beir), "--provider", "hash", "--fusion", "all", "--per-query", "--json")
    assert result.code == 0, result.err
    payload = json.loads(result.out)
    modes = {(r["mode"], r["fusion"]): r for r in payload["modes"]}
    assert modes[("lexical", None)]["ndcg_at_10"] == 1.0  # the words alone rank both queries perfectly
    # Each listed loss is a hybrid row below its better arm for that query, and every such row is listed.
    for loss in payload["hybrid_losses"]:
        assert loss["hybrid"] < max(loss["lexical"], loss["vector"]) and loss["query"]
    losing = {("hybrid", f) for f in {loss["fusion"] for loss in payload["hybrid_losses"]}}
    for (mode, fusion), record in modes.items():
        if mode == "hybrid" and record["ndcg_at_10"] < 1.0:
            assert (mode, fusion) in losing  # below perfect somewhere means below the lexical arm there
    table = run_cli("eval", "--beir", str(beir), "--provider", "hash", "--fusion", "all", "--per-query").out
    assert "queries where hybrid ranks below its better arm (of 2)" in " ".join(table.split())
