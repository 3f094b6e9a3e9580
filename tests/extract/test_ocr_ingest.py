"""Scans through the whole pipeline: indexed, found by a sentence of the page,
shown with the pages OCR read and how confidently; read again after an
upgrade when they failed as no_text before OCR existed."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from actors.events import ScanForStale
from kbtui.config import Config
from kbtui.extract import OcrSettings
from kbtui.node import Node
from kbtui.tui.screens.document import metadata_text
from kbtui.tui.widgets.ingest_header import IngestView, header_text
from store import catalog
from store.db import database
from store.models import Document
from tests.actors.conftest import wait_until
from tests.extract.scans import blank_page, encoded, scanned_pdf, text_page

FAILOVER = "The quarterly failover drill restores the billing replica from a snapshot."
ROTATION = "Rotate the ingress certificates before the window closes on Friday."
PAYROLL = "Payroll exports are archived nightly to the cold storage bucket."


def offline(*command: str, home: Path) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in a network namespace of its own: no interface but a loopback that is down."""
    env = {**os.environ, "KBTUI_HOME": str(home), "KBTUI_EMBEDDING_PROVIDER": "hash", "KBTUI_NODE_API": "off"}
    return subprocess.run(
        ["unshare", "--net", *command], capture_output=True, text=True, env=env, timeout=600, check=False
    )


@pytest.fixture
def listening_port():
    """A TCP server on the host's loopback: reachable here, unreachable from a blocked namespace."""
    server = socket.create_server(("127.0.0.1", 0))
    accepting = threading.Thread(target=lambda: server.accept()[0].close(), daemon=True)
    accepting.start()
    yield server.getsockname()[1]
    server.close()


def test_scans_are_indexed_and_found_by_a_sentence_with_the_network_blocked(home, tmp_path, listening_port):
    assert shutil.which("unshare"), "util-linux's unshare is needed to block the network"
    probe = f"import socket; socket.create_connection(('127.0.0.1', {listening_port}), timeout=5)"
    socket.create_connection(("127.0.0.1", listening_port), timeout=5).close()  # the host's network works
    blocked = offline(sys.executable, "-c", probe, home=home)
    assert blocked.returncode != 0 and "Error" in blocked.stderr, blocked.stderr  # and from the namespace it does not

    docs = tmp_path / "scans"
    docs.mkdir()
    (docs / "drill.pdf").write_bytes(scanned_pdf([text_page([FAILOVER], title="Disaster recovery"), blank_page()]))
    (docs / "whiteboard.jpg").write_bytes(encoded(text_page([ROTATION]).convert("RGB"), "JPEG", quality=75))
    (docs / "runbook.png").write_bytes(encoded(text_page([PAYROLL]), "PNG"))

    added = offline(sys.executable, "-m", "kbtui", "add", str(docs), "--json", home=home)
    assert added.returncode == 0, added.stderr
    outcome = {d["display_name"]: (d["status"], d["failure_reason"]) for d in json.loads(added.stdout)}
    assert outcome == {n: ("Indexed", None) for n in ("drill.pdf", "whiteboard.jpg", "runbook.png")}

    for sentence, name, page, heading in (
        (FAILOVER, "drill.pdf", 1, "Disaster recovery"),
        (ROTATION, "whiteboard.jpg", 1, "page 1"),
        (PAYROLL, "runbook.png", 1, "page 1"),
    ):
        searched = offline(sys.executable, "-m", "kbtui", "search", sentence, "--json", home=home)
        assert searched.returncode == 0, searched.stderr
        top = json.loads(searched.stdout)["hits"][0]
        assert sentence in top["text"], name
        assert (top["page"], top["heading_path"]) == (page, heading)

    shown = offline(sys.executable, "-m", "kbtui", "show", "drill.pdf", "--json", home=home)
    pages = {p["page"]: p for p in json.loads(shown.stdout)["ocr_pages"]}
    assert pages[1]["confidence"] > 0.8 and pages[1]["reason"] is None and not pages[1]["low_confidence"]
    assert (pages[2]["confidence"], pages[2]["reason"]) == (None, "ocr_no_text")


def test_low_confidence_pages_are_flagged_and_listed(run_cli, home, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    page = text_page([ROTATION, PAYROLL])
    (docs / "clean.png").write_bytes(encoded(page, "PNG"))
    # A fax-quality scan: a third of the resolution, half the words misread.
    (docs / "faint.png").write_bytes(encoded(page.resize((page.width * 35 // 100, page.height * 35 // 100)), "PNG"))
    (docs / "notes.md").write_text("# Notes\n\nNothing scanned here.\n")
    assert run_cli("add", str(docs)).code == 0

    listed = json.loads(run_cli("ls", "--ocr-low", "--json").out)
    assert [d["display_name"] for d in listed] == ["faint.png"]

    [faint] = json.loads(run_cli("show", "faint.png", "--json").out)["ocr_pages"]
    assert faint["low_confidence"] and faint["confidence"] < 0.7
    text = run_cli("show", "clean.png").out
    assert "OCR'd pages (1)" in text and "page 1: confidence 0.9" in text and ", low" not in text

    # The detail view flags the page; the ingestion header has OCR's own rate.
    node = Node.open(Config.load(home), read_only=True)
    try:
        [faint_id] = node.ocr_low_document_ids()
        assert "1 of 1 pages read" in metadata_text(node.detail(faint_id), 0.7).plain
        assert "low: p.1" in metadata_text(node.detail(faint_id), 0.7).plain
        read_recently = node.snapshot("DEFAULT", with_queue=False).ocr_pages_last_minute
    finally:
        node.close()
    assert read_recently == 2
    view = IngestView("node", "DEFAULT", None, ocr_pages_per_min=read_recently)
    assert "OCR 2 pages/min" in header_text(view, width=200).plain


def test_a_scan_that_failed_as_no_text_before_ocr_is_read_again_after_the_upgrade(make_node, home, tmp_path):
    scan = tmp_path / "scan.pdf"
    scan.write_bytes(scanned_pdf([text_page([FAILOVER])]))
    white = tmp_path / "white.pdf"
    white.write_bytes(scanned_pdf([blank_page()]))

    # Before OCR: a scanned PDF had no text, and the catalog (before migration
    # 0008) recorded no parser for a failed document.
    before = make_node(ocr=OcrSettings(enabled=False))
    ids = [
        catalog.add_document(before.store, "DEFAULT", path, display_name=path.name, fmt="pdf").document_id
        for path in (scan, white)
    ]
    assert before.index(ids) == {ids[0]: "Failed", ids[1]: "Failed"}
    assert {d.failure_reason for d in Document.select()} == {"no_text"}
    database.execute_sql("DELETE FROM document_extraction")
    before.close()

    node = make_node(ocr=Config.load(home).ocr)
    with node.pipeline() as runtime:
        assert runtime.reindexer.ask(ScanForStale()) == 2
        wait_until(lambda: Document.get_by_id(ids[0]).status == "Indexed" and Document.get_by_id(ids[1]).status == "Failed")
        # The white page fails again as no_text, now under this parser: it is not read a third time.
        assert runtime.reindexer.ask(ScanForStale()) == 0
    hits = node.search(FAILOVER, "DEFAULT").hits
    assert hits and FAILOVER in hits[0].text
    assert [p.reason for p in node.detail(ids[1]).ocr_pages] == ["ocr_no_text"]


def test_the_ocr_settings_come_from_the_config_file(home):
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[ocr]\nenabled = false\nlanguages = "eng+deu"\nlow_confidence = 0.5\n')
    ocr = Config.load(home).ocr
    assert (ocr.enabled, ocr.languages, ocr.low_confidence) == (False, "eng+deu", 0.5)
    assert dataclasses.replace(ocr, enabled=True).page_timeout_seconds == OcrSettings().page_timeout_seconds
