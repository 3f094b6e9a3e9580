"""Parse documents in long-lived worker processes that can be killed.

Parsers have infinite loops and memory blow-ups on hostile input, and a
thread cannot be stopped, so extraction happens in a child process
(:mod:`kbtui.extract.worker`): the document's bytes go over a pipe (decrypted
text never touches the disk) and the elements come back as JSON. A worker
serves many documents; it is killed and replaced when a document overruns
its deadline, exhausts its memory cap (RLIMIT_AS, set in the child) or
crashes it.

Workers are started with ``subprocess`` (fork+exec of a fresh interpreter),
which is safe from a multi-threaded node and never re-imports the caller's
``__main__`` as multiprocessing's spawn and forkserver do.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import logging
import os
import queue
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from kbtui.extract import (
    DEFAULT_OCR,
    EXTRACT_CORRUPT,
    EXTRACT_CRASHED,
    EXTRACT_TIMEOUT,
    EXTRACT_UNAVAILABLE,
    OCR_REASONS,
    Element,
    Extraction,
    ExtractionFailed,
    ExtractionLimits,
    OcrSettings,
    PageOcr,
)
from kbtui.extract.worker import FRAME_HEADER

log = logging.getLogger(__name__)

STOP_GRACE_SECONDS = 2.0
# A worker is replaced after this many documents, so memory fragmentation
# from one huge document does not stay with it for good.
DOCUMENTS_PER_WORKER = 500
# Reason codes a worker may answer with; anything else is treated as corrupt.
KNOWN_CODES = frozenset(
    {
        "extract_timeout", "extract_too_large", "extract_unsupported", "extract_corrupt",
        "extract_encrypted", "extract_unsafe", "extract_crashed", "binary_content",
    }
) | OCR_REASONS
# Past a page's own OCR timeout, for the worker to give the page up and read on.
OCR_PAGE_GRACE_SECONDS = 10.0
_ELEMENT_KINDS = frozenset({"heading", "paragraph", "list_item", "table", "code"})
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def _worker_command() -> list[str]:
    return [sys.executable, "-m", "kbtui.extract.worker"]


def _worker_environment() -> dict[str, str]:
    env = dict(os.environ)
    # The worker must import this very kbtui, installed or run from a checkout.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p)
    return env


class ExtractionWorker:
    """One worker process, started on first use and replaced after a kill.

    Not thread-safe by itself: :class:`ExtractionPool` hands it to one caller
    at a time.
    """

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._served = 0

    @property
    def pid(self) -> int | None:
        """The worker process id while it runs, else None."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def start(self) -> None:
        """Start the process now if it is not running (otherwise the first document does)."""
        if self._process is not None and self._process.poll() is None and self._served < DOCUMENTS_PER_WORKER:
            return
        self.stop()
        self._process = subprocess.Popen(
            _worker_command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=_worker_environment(),
            close_fds=True,
        )
        self._served = 0

    def extract(
        self,
        data: bytes,
        fmt: str,
        limits: ExtractionLimits,
        ocr: OcrSettings,
        on_ocr_page: Callable[[int], None] | None = None,
    ) -> Extraction:
        """Send one document; raise :class:`ExtractionFailed` on failure or deadline."""
        self.start()
        process = self._process
        assert process is not None and process.stdin is not None and process.stdout is not None
        self._served += 1
        header = json.dumps(
            {"format": fmt, "limits": dataclasses.asdict(limits), "ocr": dataclasses.asdict(ocr), "size": len(data)}
        ).encode()
        try:
            for payload in (header, data):
                process.stdin.write(FRAME_HEADER.pack(len(payload)))
                process.stdin.write(payload)
            process.stdin.flush()
        except (OSError, ValueError):
            self._kill(EXTRACT_CRASHED)
            raise ExtractionFailed(EXTRACT_CRASHED) from None
        parsing = time.monotonic() + limits.deadline_seconds(len(data))
        deadline = parsing
        # OCR time comes on top of the parsing deadline: from the first page OCR
        # starts on, the time since, plus the page's own timeout; the document's
        # OCR budget at most.
        page_allowance = ocr.page_timeout_seconds + OCR_PAGE_GRACE_SECONDS
        first_page: float | None = None
        while True:
            reply = self._read_frame(process, deadline)
            try:
                message = json.loads(reply)
            except ValueError:
                self._kill(EXTRACT_CORRUPT)
                raise ExtractionFailed(EXTRACT_CORRUPT) from None
            page = message.get("ocr_page") if isinstance(message, dict) else None
            if type(page) is not int:
                break
            now = time.monotonic()
            first_page = now if first_page is None else first_page
            deadline = parsing + min(now - first_page, ocr.document_timeout_seconds) + page_allowance
            if on_ocr_page is not None:
                on_ocr_page(page)
        if isinstance(message, dict) and message.get("retire") is True:
            self.stop()  # it is exiting: wait for it, so the next document gets a new one
        return _decode_reply(message)

    def _read_frame(self, process: subprocess.Popen[bytes], deadline: float) -> bytes:
        fd = process.stdout.fileno()  # type: ignore[union-attr]
        buffer = bytearray()
        needed = FRAME_HEADER.size
        have_header = False
        while True:
            while len(buffer) < needed:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                    self._kill(EXTRACT_TIMEOUT)
                    raise ExtractionFailed(EXTRACT_TIMEOUT)
                chunk = os.read(fd, min(needed - len(buffer), 1 << 20))
                if not chunk:  # the worker died
                    self._kill(EXTRACT_CRASHED)
                    raise ExtractionFailed(EXTRACT_CRASHED)
                buffer += chunk
            if have_header:
                return bytes(buffer)
            (needed,) = FRAME_HEADER.unpack(buffer)
            buffer.clear()
            have_header = True

    def _kill(self, reason: str | None = None) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if reason is not None:
            log.warning("extraction worker %d killed: %s", process.pid, reason)
        if process.poll() is None:
            process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(STOP_GRACE_SECONDS)
        for stream in (process.stdin, process.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass

    def stop(self) -> None:
        """Close the worker's input so it exits; kill it if it does not within a grace period."""
        process = self._process
        if process is None:
            return
        try:
            if process.stdin is not None:
                process.stdin.close()
            process.wait(STOP_GRACE_SECONDS)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            pass
        self._kill()


def _decode_reply(message: object) -> Extraction:
    """Turn a worker's parsed JSON reply into elements and page reports, trusting nothing about its shape."""
    try:
        if not isinstance(message, dict):
            raise TypeError("reply is not an object")
        if not message["ok"]:
            code = message["code"]
            raise ExtractionFailed(code if code in KNOWN_CODES else EXTRACT_CORRUPT)
        elements = []
        for kind, text, level, start, end, page, language, symbol in message["elements"]:
            if kind not in _ELEMENT_KINDS or not isinstance(text, str):
                raise ValueError("bad element")
            elements.append(
                Element(
                    kind, text, level=int(level), start=int(start), end=int(end),
                    page=None if page is None else int(page),
                    language=None if language is None else str(language),
                    symbol=None if symbol is None else str(symbol),
                )
            )
        pages = []
        for page, confidence, words, seconds, reason in message["ocr_pages"]:
            if reason is not None and reason not in OCR_REASONS:
                raise ValueError("bad page reason")
            pages.append(
                PageOcr(
                    int(page), confidence=None if confidence is None else float(confidence),
                    words=int(words), seconds=float(seconds), reason=reason,
                )
            )
        return Extraction(elements, tuple(pages))
    except ExtractionFailed:
        raise
    except (ValueError, KeyError, TypeError):
        raise ExtractionFailed(EXTRACT_CORRUPT) from None


class ExtractionPool:
    """A fixed number of reusable workers; safe to call from many threads."""

    def __init__(self, size: int = 1) -> None:
        self.size = max(1, size)
        self._workers = [ExtractionWorker() for _ in range(self.size)]
        self._idle: queue.Queue[ExtractionWorker] = queue.Queue()
        for worker in self._workers:
            self._idle.put(worker)
        self._closed = threading.Event()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def extract(
        self,
        data: bytes,
        fmt: str,
        limits: ExtractionLimits,
        ocr: OcrSettings = DEFAULT_OCR,
        on_ocr_page: Callable[[int], None] | None = None,
    ) -> Extraction:
        """Extract one document in the next free worker (waiting for one)."""
        worker = self._acquire()
        try:
            return worker.extract(data, fmt, limits, ocr, on_ocr_page)
        finally:
            if self.closed:
                worker.stop()
            else:
                self._idle.put(worker)

    def _acquire(self) -> ExtractionWorker:
        while True:
            if self.closed:
                raise ExtractionFailed(EXTRACT_UNAVAILABLE)
            try:
                return self._idle.get(timeout=0.5)
            except queue.Empty:
                continue

    def worker_pids(self) -> list[int]:
        """Process ids of the workers running now (for tests and diagnostics)."""
        return [pid for pid in (w.pid for w in self._workers) if pid is not None]

    def close(self) -> None:
        """Stop idle workers now; a busy one stops when its document is done."""
        self._closed.set()
        while True:
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                break
            worker.stop()

    def __enter__(self) -> ExtractionPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


_default_pool: ExtractionPool | None = None
_default_lock = threading.Lock()


def default_pool(limits: ExtractionLimits) -> ExtractionPool:
    """The process-wide pool, created on first use with ``limits.worker_processes`` workers."""
    global _default_pool
    with _default_lock:
        if _default_pool is None or _default_pool.closed:
            _default_pool = ExtractionPool(limits.worker_processes)
        return _default_pool


def shutdown_default_pool() -> None:
    """Stop the process-wide pool's workers (a later extraction starts a new pool)."""
    global _default_pool
    with _default_lock:
        pool, _default_pool = _default_pool, None
    if pool is not None:
        pool.close()


atexit.register(shutdown_default_pool)
