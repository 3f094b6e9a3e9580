"""Searches as separate processes, many at once, while another process adds a
folder: not one of them fails.

Each ``kbtui search`` opens the catalog read-only, so it never waits for the
write lock the adding process holds for each commit (it used to: its
migrations took ``BEGIN IMMEDIATE`` on every open, and 17 of 200 searches
failed with "the database stayed locked").
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from tests.conftest import write
from tests.faults.processes import kbtui, kbtui_env

PARALLEL = 20
ROUNDS = 5  # 100 searches; each round is 20 kbtui processes at once


def test_twenty_parallel_searches_while_a_folder_is_added_never_fail(home, tmp_path):
    write(tmp_path / "seed" / "seed.md", "# Seed\n\nthe pangolin rotation runbook\n")
    assert kbtui(home, "add", str(tmp_path / "seed")).returncode == 0
    # Enough documents that the add outlasts the searches on a 2-core machine.
    for i in range(200):
        write(tmp_path / "folder" / f"note{i:03d}.md", f"# Note {i}\n\npangolin note {i} about topic{i % 17}\n")

    adding = subprocess.Popen(
        [sys.executable, "-m", "kbtui", "add", str(tmp_path / "folder"), "--json"],
        env=kbtui_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )

    def search(n: int) -> subprocess.CompletedProcess:
        return kbtui(home, "search", f"pangolin topic{n % 17}", "--json", timeout=120)

    results: list[subprocess.CompletedProcess] = []
    rounds_during_add = 0
    with ThreadPoolExecutor(PARALLEL) as pool:
        for round_number in range(ROUNDS):
            rounds_during_add += adding.poll() is None
            results += pool.map(search, range(round_number * PARALLEL, (round_number + 1) * PARALLEL))
    out, err = adding.communicate(timeout=300)

    assert adding.returncode == 0, err
    assert {d["status"] for d in json.loads(out)} == {"Indexed"}
    assert rounds_during_add >= 3, f"only {rounds_during_add} rounds of searches started while the folder was being added"
    failures = [r for r in results if r.returncode != 0 or "hits" not in json.loads(r.stdout or "{}")]
    assert not failures, f"{len(failures)} of {len(results)} searches failed: {failures[0].stderr.strip()}"
    assert all(r.stderr == "" for r in results), next(r.stderr for r in results if r.stderr)
