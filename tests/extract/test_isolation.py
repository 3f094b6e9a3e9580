"""Hostile files fail alone, in a worker process that is killed and replaced, never the caller."""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from kbtui.extract import ExtractionFailed, ExtractionLimits, extract_document
from kbtui.extract.isolation import ExtractionPool
from tests.extract.documents import (
    declare_uncompressed_size,
    docx_document,
    docx_with_external_entity,
    flate_bomb_pdf,
    pdf_with_declared_length,
    rewrite_docx,
    slow_pdf,
)

GOOD_MARKDOWN = b"# After\n\nThe next document extracts fine."
# Long enough that a cap (not the clock) stops the bombs on a loaded machine;
# the slow PDF parses for a minute, far past it.
DEADLINE = 5.0
# Time a failure may take beyond its deadline: killing, reaping, a busy 2-core machine.
SLACK = 4.0


@pytest.fixture(scope="module")
def pool():
    with ExtractionPool(1) as shared:
        yield shared


def _small_docx() -> bytes:
    return docx_document(lambda document: document.add_paragraph("Body text."))


def _too_many_entries() -> bytes:
    return rewrite_docx(_small_docx(), add={f"customXml/item{i}.bin": b"" for i in range(10_001)})


def _compressed_too_well() -> bytes:
    return rewrite_docx(_small_docx(), add={"word/media/padding.bin": b"\0" * (8 << 20)})


def _multi_gigabyte_document_xml() -> bytes:
    return declare_uncompressed_size(_small_docx(), "word/document.xml", 3_500_000_000)


HOSTILE = {
    "pdf that parses for a minute": (slow_pdf, "pdf", "extract_timeout"),
    "pdf flate bomb": (lambda: flate_bomb_pdf(100 << 20), "pdf", "extract_too_large"),
    "pdf with a huge declared stream": (lambda: pdf_with_declared_length(10**12), "pdf", "extract_too_large"),
    "docx with more than 10k entries": (_too_many_entries, "docx", "extract_too_large"),
    "docx entry compressed 1000:1": (_compressed_too_well, "docx", "extract_too_large"),
    "docx with a multi-GB document.xml": (_multi_gigabyte_document_xml, "docx", "extract_too_large"),
    "docx with a DOCTYPE entity": (lambda: docx_with_external_entity("file:///etc/hostname"), "docx", "extract_unsafe"),
    "html nested 100k deep": (
        lambda: b"<html><body>" + b"<div>" * 100_000 + b"x" + b"</div>" * 100_000 + b"</body></html>",
        "html",
        "extract_too_large",
    ),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_file_fails_alone_within_the_deadline_and_the_next_extracts(pool, case):
    build, fmt, expected = HOSTILE[case]
    data = build()
    limits = ExtractionLimits(timeout_seconds=DEADLINE, timeout_seconds_per_mib=0)
    started = time.monotonic()
    with pytest.raises(ExtractionFailed) as failure:
        pool.extract(data, fmt, limits)
    assert failure.value.code == expected
    assert time.monotonic() - started < DEADLINE + SLACK
    after = pool.extract(GOOD_MARKDOWN, "markdown", limits).elements
    assert [e.text for e in after] == ["After", "The next document extracts fine."]


def test_a_timeout_kills_the_worker_and_a_new_one_takes_over(pool):
    pool.extract(GOOD_MARKDOWN, "markdown", ExtractionLimits())
    [before] = pool.worker_pids()
    with pytest.raises(ExtractionFailed):
        pool.extract(slow_pdf(), "pdf", ExtractionLimits(timeout_seconds=0.5, timeout_seconds_per_mib=0))
    assert pool.worker_pids() == []
    with pytest.raises(ProcessLookupError):
        os.kill(before, 0)  # killed and reaped, not left running
    pool.extract(GOOD_MARKDOWN, "markdown", ExtractionLimits())
    assert pool.worker_pids() != [before]


def test_memory_cap_stops_a_blow_up_and_the_worker_is_replaced(pool):
    pool.extract(GOOD_MARKDOWN, "markdown", ExtractionLimits())
    [before] = pool.worker_pids()
    # 40 MB of text decoded and split under a 160 MB address-space cap.
    limits = ExtractionLimits(max_memory_bytes=160 << 20, max_extracted_chars=1 << 30)
    with pytest.raises(ExtractionFailed) as failure:
        pool.extract(b"word " * (8 << 20), "text", limits)
    assert failure.value.code == "extract_too_large"
    pool.extract(GOOD_MARKDOWN, "markdown", ExtractionLimits())
    assert pool.worker_pids() and pool.worker_pids() != [before]


def test_a_worker_killed_mid_document_fails_it_as_crashed(pool):
    pool.extract(GOOD_MARKDOWN, "markdown", ExtractionLimits())
    [pid] = pool.worker_pids()
    outcome: dict[str, str] = {}
    data = slow_pdf()

    def run() -> None:
        try:
            pool.extract(data, "pdf", ExtractionLimits(timeout_seconds=30))
        except ExtractionFailed as exc:
            outcome["code"] = exc.code

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    time.sleep(1.0)  # well into parsing
    os.kill(pid, signal.SIGKILL)  # as the kernel's OOM killer would
    thread.join(10)
    assert outcome == {"code": "extract_crashed"}
    assert [e.kind for e in pool.extract(GOOD_MARKDOWN, "markdown", ExtractionLimits()).elements] == ["heading", "paragraph"]


def test_a_worker_serves_many_documents():
    with ExtractionPool(1) as own:
        own.extract(GOOD_MARKDOWN, "markdown", ExtractionLimits())
        first = own.worker_pids()
        for _ in range(5):
            own.extract(GOOD_MARKDOWN, "markdown", ExtractionLimits())
        assert own.worker_pids() == first


def test_many_threads_share_a_small_pool_and_get_their_own_answers():
    documents = {i: f"# Doc {i}\n\nbody of document {i}".encode() for i in range(8)}
    with ExtractionPool(2) as shared, ThreadPoolExecutor(max_workers=6) as threads:
        results = dict(
            zip(
                documents,
                threads.map(lambda d: shared.extract(d, "markdown", ExtractionLimits()), documents.values()),
                strict=True,
            )
        )
        assert len(shared.worker_pids()) <= 2
    for i, data in documents.items():
        assert results[i] == extract_document(data, "markdown")


def test_close_stops_the_workers_and_refuses_new_work():
    own = ExtractionPool(2)
    own.extract(GOOD_MARKDOWN, "markdown", ExtractionLimits())
    pids = own.worker_pids()
    own.close()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    with pytest.raises(ExtractionFailed) as failure:
        own.extract(GOOD_MARKDOWN, "markdown", ExtractionLimits())
    assert failure.value.code == "extract_unavailable"


def test_isolated_result_equals_in_process_result_for_every_reader(pool):
    from tests.extract.test_html import PAGE
    from tests.extract.test_text_formats import RST

    samples = [
        (PAGE.encode(), "html"),
        (RST.encode(), "rst"),
        (b"def f():\n    return 1\n", "code:python"),
        (docx_document(lambda d: d.add_heading("Title", 1)), "docx"),
    ]
    for data, fmt in samples:
        assert pool.extract(data, fmt, ExtractionLimits()) == extract_document(data, fmt)


def test_the_shared_pool_shuts_down_and_starts_again_on_demand():
    from kbtui.extract import extract_isolated, shutdown_extraction
    from kbtui.extract.isolation import default_pool

    assert extract_isolated(GOOD_MARKDOWN, "markdown") == extract_document(GOOD_MARKDOWN, "markdown")
    pids = default_pool(ExtractionLimits()).worker_pids()
    shutdown_extraction()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert extract_isolated(GOOD_MARKDOWN, "markdown") == extract_document(GOOD_MARKDOWN, "markdown")
