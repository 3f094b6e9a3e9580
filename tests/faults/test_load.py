"""Load: 10k documents admitted as fast as possible while searches run.

The queue never grows past its bound, every Busy is retried to success, search
stays inside its latency budget, memory stays bounded, and nothing is lost.
"""

from __future__ import annotations

import os
import resource
import threading
import time

import pytest

from actors.events import Accepted, AdmissionChanged, AlreadyQueued, Busy
from store import catalog
from store.db import database
from store.fts import integrity_check
from store.models import Document
from tests.actors.conftest import Recorder, wait_until

DOCUMENTS = int(os.environ.get("KBTUI_LOAD_DOCUMENTS", "10000"))
CAPACITY = 256


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# 10k documents through the whole pipeline take minutes on a busy 2-core machine:
# a budget of its own, far inside CI's limit, rather than the suite's 300 s.
@pytest.mark.timeout(1200)
def test_ten_thousand_documents_under_load(make_node, tmp_path):
    node = make_node(admission_queue_capacity=CAPACITY, max_in_flight=8, drain_sweep_interval_s=0.25)
    folder = tmp_path / "docs"
    folder.mkdir()
    paths = []
    for i in range(DOCUMENTS):
        path = folder / f"n{i:05d}.md"
        path.write_text(f"# Note {i}\n\nload note {i} about topic{i % 97} and item{i}\n")
        paths.append(path)

    latencies: list[float] = []
    stop_searching = threading.Event()

    def search_continuously() -> None:
        database.connect(reuse_if_open=True)
        n = 0
        while not stop_searching.is_set():
            started = time.perf_counter()
            node.search(f"topic{n % 97} note", "DEFAULT", limit=10)
            latencies.append((time.perf_counter() - started) * 1000)
            n += 1
        database.close()

    # The rows first (the queue of record), then admission as fast as it goes.
    ids = [
        catalog.add_document(node.store, "DEFAULT", path, display_name=path.name, fmt="markdown").document_id
        for path in paths
    ]
    recorder = Recorder.start()
    rss_before = rss_mib()
    rss_peak = rss_before
    busy_seen = retried = 0
    # A daemon searcher, stopped in `finally`: a failing or timed-out test must not
    # leave it spinning (and keep the test process alive).
    searcher = threading.Thread(target=search_continuously, daemon=True)
    with node.pipeline(listeners=[recorder]) as runtime:
        searcher.start()
        try:
            waiting: list[str] = []
            for n, document_id in enumerate(ids):
                answer = runtime.admit(document_id)
                assert isinstance(answer, (Accepted, AlreadyQueued, Busy))
                if isinstance(answer, Busy):
                    busy_seen += 1
                    waiting.append(document_id)
                if n % 500 == 0:
                    rss_peak = max(rss_peak, rss_mib())
            # Retry every Busy until the queue takes it (or the drain sweep already did).
            while waiting:
                time.sleep(0.2)
                still = []
                for document_id in waiting:
                    if isinstance(runtime.admit(document_id), Busy):
                        still.append(document_id)
                    else:
                        retried += 1
                waiting = still
                rss_peak = max(rss_peak, rss_mib())
            wait_until(lambda: Document.select().where(Document.status == "Indexed").count() == DOCUMENTS, timeout=1100)
        finally:
            stop_searching.set()
            searcher.join(timeout=30)
        events = recorder.ask("events")

    depths = [e.queue_depth for e in events if isinstance(e, AdmissionChanged)]
    latencies.sort()
    p95 = latencies[int(len(latencies) * 0.95)]
    budget = node.config.search_latency_budget_ms
    print(
        f"\nload: {DOCUMENTS} documents, busy {busy_seen}, retried {retried}, max depth {max(depths)}/{CAPACITY}, "
        f"{len(latencies)} searches p95 {p95:.1f} ms (budget {budget} ms), RSS {rss_before:.0f} -> peak {rss_peak:.0f} MiB"
    )
    assert busy_seen > 0, "the load must actually fill the queue"
    assert retried == busy_seen
    assert max(depths) <= CAPACITY
    assert len(latencies) > 20 and p95 < budget
    assert rss_peak - rss_before < 600, "memory must stay bounded, not grow with the backlog"
    assert catalog.status_counts() == {"Indexed": DOCUMENTS}
    assert integrity_check()
