"""The extraction worker process: ``python -m kbtui.extract.worker``.

It reads requests from stdin and writes replies to a private copy of stdout;
file descriptors 1 and 2 point at /dev/null so nothing a parser prints or logs
(parsers put document text in their warnings) escapes. Framing, both ways:
an 8-byte big-endian length, then that many bytes.

- request: a JSON header ``{"format": ..., "limits": {...}, "ocr": {...},
  "size": N}``, then a frame of N document bytes;
- while OCR runs: ``{"ocr_page": N}`` before each page image is OCR'd (a
  heartbeat: the parent extends its deadline by the page's timeout);
- reply: JSON ``{"ok": true, "elements": [[kind, text, level, start, end,
  page, language, symbol], ...], "ocr_pages": [[page, confidence, words,
  seconds, reason], ...]}`` or ``{"ok": false, "code": reason}``
  (with ``"retire": true`` when the worker exits after answering).

Replies are JSON rather than pickle so the parent never unpickles data from
a process that has just parsed a hostile file.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import sys
import warnings
from typing import BinaryIO

FRAME_HEADER = struct.Struct(">Q")


def write_frame(stream: BinaryIO, payload: bytes) -> None:
    stream.write(FRAME_HEADER.pack(len(payload)))
    stream.write(payload)
    stream.flush()


def read_frame(stream: BinaryIO) -> bytes | None:
    """One frame, or None at end of input."""
    header = stream.read(FRAME_HEADER.size)
    if len(header) < FRAME_HEADER.size:
        return None
    (size,) = FRAME_HEADER.unpack(header)
    payload = stream.read(size)
    if len(payload) < size:
        return None
    return payload


def _silence() -> BinaryIO:
    """Point fds 1 and 2 at /dev/null; return a private stream for replies."""
    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")
    replies = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
    return replies


def _apply_limits(memory_bytes: int, timeout_seconds: float) -> None:
    try:
        import resource
    except ImportError:  # not on this platform: the parent's deadline still holds
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    soft = memory_bytes if hard == resource.RLIM_INFINITY else min(memory_bytes, hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    # A CPU-time backstop in case the parent is gone and cannot kill us.
    used = int(sum(os.times()[:2]))
    _, cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)
    wanted = used + int(timeout_seconds * 2) + 5
    if cpu_hard == resource.RLIM_INFINITY or wanted <= cpu_hard:
        resource.setrlimit(resource.RLIMIT_CPU, (wanted, cpu_hard))


def serve(requests: BinaryIO, replies: BinaryIO) -> None:
    """Answer requests until end of input; return after a MemoryError (heap suspect)."""
    from kbtui.extract import (
        EXTRACT_CORRUPT,
        EXTRACT_TOO_LARGE,
        ExtractionFailed,
        ExtractionLimits,
        OcrSettings,
        extract_document,
    )

    def heartbeat(page: int) -> None:
        write_frame(replies, json.dumps({"ocr_page": page}).encode())

    while True:
        header = read_frame(requests)
        if header is None:
            return
        data = read_frame(requests)
        if data is None:
            return
        request = json.loads(header)
        retire = False
        try:
            limits = ExtractionLimits(**request["limits"])
            ocr = OcrSettings(**request["ocr"])
            ocr_seconds = ocr.document_timeout_seconds if ocr.enabled else 0.0
            _apply_limits(limits.max_memory_bytes, limits.deadline_seconds(len(data)) + ocr_seconds)
            extraction = extract_document(data, request["format"], limits, ocr, heartbeat)
            del data
            reply = json.dumps(
                {
                    "ok": True,
                    "elements": [
                        [e.kind, e.text, e.level, e.start, e.end, e.page, e.language, e.symbol]
                        for e in extraction.elements
                    ],
                    "ocr_pages": [
                        [p.page, p.confidence, p.words, p.seconds, p.reason] for p in extraction.ocr_pages
                    ],
                },
                ensure_ascii=False,
            ).encode("utf-8")
        except ExtractionFailed as exc:
            reply = json.dumps({"ok": False, "code": exc.code}).encode()
        except MemoryError:
            # The heap may be in a poor state: answer, then exit for a fresh worker.
            reply, retire = json.dumps({"ok": False, "code": EXTRACT_TOO_LARGE, "retire": True}).encode(), True
        except RecursionError:
            reply = json.dumps({"ok": False, "code": EXTRACT_TOO_LARGE}).encode()
        except Exception:  # noqa: BLE001 - a parser bug on a hostile file is that file's failure
            reply = json.dumps({"ok": False, "code": EXTRACT_CORRUPT}).encode()
        write_frame(replies, reply)
        if retire:
            return


def main() -> None:
    replies = _silence()
    # Import the parsers before the first request, while nobody waits.
    import kbtui.extract.code  # noqa: F401
    import kbtui.extract.docx  # noqa: F401
    import kbtui.extract.html  # noqa: F401
    import kbtui.extract.image  # noqa: F401
    import kbtui.extract.pdf  # noqa: F401
    import kbtui.extract.text  # noqa: F401

    serve(sys.stdin.buffer, replies)


if __name__ == "__main__":
    main()
