"""What each failure reason code means, in one line an operator can act on.

The pipeline records fixed, content-free codes (``extract_corrupt``,
``no_text``, ...); the CLI (``kbtui ls``, ``kbtui show``) and the terminal
UI (the failures panel) both explain them from this one table.
"""

from __future__ import annotations

REASONS: dict[str, str] = {
    "extract_timeout": (
        "the parser did not finish in time; a very large or malformed file "
        "(raise [extraction] timeout_seconds to try again)"
    ),
    "extract_too_large": "the file, its extracted text or its unpacked size is over the extraction limits",
    "extract_unsupported": "no reader for this file format",
    "extract_corrupt": "the parser could not read the file: it is damaged or not what its name says",
    "extract_encrypted": "the file is password-protected; add a decrypted copy",
    "extract_unsafe": "the file uses a construct refused on purpose (XML entities or DOCTYPE, a zip bomb)",
    "extract_crashed": "the parser's worker process died on this file",
    "extract_unavailable": "extraction was shut down while this file waited; re-index it",
    "no_text": "no text could be extracted (kbtui show lists what OCR made of each scanned page)",
    # Per page of a scanned PDF or an image (an image file fails with its page's reason).
    "ocr_no_text": "OCR found no text on the page (a blank page, or a picture without words)",
    "ocr_timeout": "OCR of the page took longer than [ocr] page_timeout_seconds",
    "ocr_budget_spent": "the document's OCR time ([ocr] document_timeout_seconds) ran out before this page",
    "ocr_image_too_large": "the image has more pixels than [ocr] max_image_pixels",
    "ocr_image_unreadable": "the page's image data could not be decoded",
    "ocr_failed": "Tesseract failed on the page (over [ocr] page_memory_bytes, or it crashed)",
    "ocr_unavailable": (
        "Tesseract or a language of [ocr] languages is not installed (make setup; apt-get install tesseract-ocr-<lang>)"
    ),
    "ocr_off": "OCR is turned off ([ocr] enabled = false); turn it on and re-index",
    "blob_corrupt": "the encrypted source failed authentication (damaged or swapped); add the file again",
    "internal_error": "kbtui failed on this document; the log has the error type; re-index to retry",
    "embedder_unavailable": "the embedding model was unavailable; it is retried with back-off",
    "embedder_error": "the embedding model failed on this document",
    "embedder_timeout": "the embedding model did not answer in time; it is retried",
    "embedder_changed": "the embedding model changed while embedding; it is embedded again",
    "embedder_not_local": (
        "the embedding server's host resolved to an address off this machine, so nothing was sent; "
        "it is retried (fix the name, or set allow_cloud_model_access = true)"
    ),
    "embedding_model_missing": "the local embedding model is not installed (run make setup)",
    "vector_dim_mismatch": "the model's vectors have another width than the index; re-index everything",
    "vector_not_finite": "the model returned invalid numbers for this document",
    "source_damaged": (
        "the encrypted source is missing or fails authentication (damaged, truncated or another document's): "
        "the index keeps serving, but it cannot be re-indexed; restore blobs/ from a backup or add the file again"
    ),
    "source_unreadable": "the encrypted source cannot be read (permissions?); kbtui doctor says more",
    "storage_full": "the disk was full; it is retried when space returns",
    "storage_error": "the outcome could not be recorded; it is retried",
    "storage_unavailable": "the database server could not be used (down, unreachable or too slow); it is retried",
    # Why a document went back to Pending on a knowledge base many nodes share.
    "lease_expired": "the node working on it stopped renewing its lease (died or lost the network); another took over",
    "node_stopped": "the node working on it stopped; any node takes it",
    "node_restarted": "its node restarted mid-way; it starts again",
}

INTERRUPTED = "interrupted — resumes at next start"


def explain_reason(code: str | None) -> str:
    """One line for ``code`` (an unknown code is shown as itself)."""
    if not code:
        return ""
    return REASONS.get(code, code.replace("_", " "))
