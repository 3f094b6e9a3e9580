"""The record of each document's last extraction: the parser that read it and
the pages OCR ran on (tables of migration 0008).

Written once per extraction, whatever its outcome, so the detail view can say
which pages were OCR'd (and why a page gave no text) for an Indexed document
and a Failed one alike.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from store.db import database
from store.records import OcrPage, PageReport


def record_extraction(document_id: str, parser_version: int, pages: Sequence[PageReport]) -> None:
    """Replace the document's extraction record and OCR pages (nothing when it was deleted)."""
    with database.atomic():
        exists = database.execute_sql("SELECT 1 FROM document WHERE id = ?", (document_id,)).fetchone()
        if exists is None:
            return
        database.execute_sql(
            "INSERT OR REPLACE INTO document_extraction(document_id, parser_version, extracted_at) VALUES (?, ?, ?)",
            (document_id, parser_version, time.time()),
        )
        database.execute_sql("DELETE FROM ocr_page WHERE document_id = ?", (document_id,))
        for page in pages:
            database.execute_sql(
                "INSERT OR REPLACE INTO ocr_page(document_id, page, confidence, words, seconds, reason)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (document_id, page.page, page.confidence, page.words, page.seconds, page.reason),
            )


def ocr_pages(document_id: str) -> list[OcrPage]:
    """The pages OCR ran on at the document's last extraction, in page order."""
    rows = database.execute_sql(
        "SELECT page, confidence, words, seconds, reason FROM ocr_page WHERE document_id = ? ORDER BY page",
        (document_id,),
    ).fetchall()
    return [OcrPage(*row) for row in rows]


def low_confidence_document_ids(threshold: float, collection_id: str | None = None) -> list[str]:
    """Documents with at least one OCR'd page whose mean confidence is under ``threshold``."""
    sql = (
        "SELECT d.id FROM document d WHERE EXISTS ("
        " SELECT 1 FROM ocr_page p WHERE p.document_id = d.id AND p.confidence < ?)"
    )
    params: list[object] = [threshold]
    if collection_id is not None:
        sql += " AND d.collection_id = ?"
        params.append(collection_id)
    rows = database.execute_sql(sql + " ORDER BY d.created_at, d.id", params).fetchall()
    return [row[0] for row in rows]


def ocr_pages_read_recently(collection_id: str, window_s: float = 60.0) -> int:
    """Pages OCR read text from in the collection's extractions of the last ``window_s`` seconds."""
    row = database.execute_sql(
        "SELECT count(*) FROM document_extraction e"
        " JOIN document d ON d.id = e.document_id"
        " JOIN ocr_page p ON p.document_id = e.document_id"
        " WHERE e.extracted_at >= ? AND d.collection_id = ? AND p.confidence IS NOT NULL",
        (time.time() - window_s, collection_id),
    ).fetchone()
    return int(row[0])


def no_text_document_ids(parser_version: int, limit: int) -> list[str]:
    """Failed documents that gave no text to a parser older than ``parser_version``
    (or to one from before parsers were recorded): a newer parser may read them
    (a scanned PDF, once there is OCR). Each is read once per parser version."""
    rows = database.execute_sql(
        "SELECT id FROM document WHERE status = 'Failed' AND failure_reason = 'no_text' AND id NOT IN ("
        " SELECT document_id FROM document_extraction WHERE parser_version = ?)"
        " ORDER BY updated_at, id LIMIT ?",
        (parser_version, limit),
    ).fetchall()
    return [row[0] for row in rows]
