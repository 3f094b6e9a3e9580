"""OCR: which pages of a document were read by OCR, how confidently, and
which parser last read each document.

``document_extraction`` remembers the parser version of a document's last
extraction whatever came of it, so a document that failed as ``no_text``
under an older parser (a scanned PDF before OCR) is read again by a newer
one, once. ``ocr_page`` has a row per page OCR ran on: the mean word
confidence, or the reason the page gave no text. Both are replaced at each
extraction and go with their document.
"""

NAME = "ocr"

STATEMENTS = [
    """
    CREATE TABLE document_extraction (
        document_id    TEXT PRIMARY KEY REFERENCES document(id) ON DELETE CASCADE,
        parser_version INTEGER NOT NULL,
        extracted_at   REAL NOT NULL
    )
    """,
    """
    CREATE TABLE ocr_page (
        document_id TEXT NOT NULL REFERENCES document(id) ON DELETE CASCADE,
        page        INTEGER NOT NULL,           -- 1-based; an image file is page 1
        confidence  REAL,                       -- mean word confidence 0..1; NULL: no text
        words       INTEGER NOT NULL DEFAULT 0,
        seconds     REAL NOT NULL DEFAULT 0,    -- time OCR took on the page
        reason      TEXT,                       -- why it gave no text (ocr_no_text, ocr_timeout, ...)
        PRIMARY KEY (document_id, page)
    ) WITHOUT ROWID
    """,
    # The ingestion view's OCR rate counts the pages of recent extractions.
    "CREATE INDEX document_extraction_at ON document_extraction(extracted_at)",
]
