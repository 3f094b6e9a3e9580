"""Logging set-up. kbtui logs counts, ids, statuses and exception *types* only:
never document text, chunk text, file names or queries. Third-party loggers
that would echo such text are silenced here."""

from __future__ import annotations

import logging
import logging.handlers
import os
from pathlib import Path

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# Libraries whose debug output can include document or query text.
_TEXT_BEARING_LOGGERS = ("trafilatura", "htmldate", "courlan", "justext", "pypdf", "docx", "markdown_it")


def configure_logging(home: Path, *, to_stderr_level: int | None = logging.WARNING, file_level: int = logging.INFO) -> Path:
    """Log to ``$KBTUI_HOME/logs/kbtui.log`` (mode 0600) and optionally stderr."""
    log_dir = home / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_file = log_dir / "kbtui.log"
    fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.close(fd)
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_kbtui", False):
            root.removeHandler(handler)
    file_handler = logging.handlers.RotatingFileHandler(log_file, maxBytes=5 << 20, backupCount=3)
    file_handler.setLevel(file_level)
    file_handler.setFormatter(logging.Formatter(LOG_FORMAT))
    file_handler._kbtui = True  # type: ignore[attr-defined]
    root.addHandler(file_handler)
    if to_stderr_level is not None:
        stderr_handler = logging.StreamHandler()
        stderr_handler.setLevel(to_stderr_level)
        stderr_handler.setFormatter(logging.Formatter("kbtui: %(levelname)s: %(message)s"))
        stderr_handler._kbtui = True  # type: ignore[attr-defined]
        root.addHandler(stderr_handler)
    root.setLevel(min(file_level, to_stderr_level or file_level))
    for name in _TEXT_BEARING_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    return log_file
