"""Logging set-up. kbtui logs counts, ids, statuses and exception *types* only:
never document text, chunk text, file names or queries. Third-party loggers
that would echo such text are silenced here.

The node's own log lines also travel live (:class:`LogLine`, handed on by a
:class:`LogLineHandler`): to the terminal UI's events pane, in this process or
through the node's event stream. They are the same lines the log file gets
(the message only, never a traceback), so the rule above holds for them too.
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# Libraries whose debug output can include document or query text.
_TEXT_BEARING_LOGGERS = ("trafilatura", "htmldate", "courlan", "justext", "pypdf", "docx", "markdown_it")


class _PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """Every log file it opens, the one made after a rotation included, is 0600
    (the stock handler opens it with the process umask, typically 0644)."""

    def _open(self):
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        return os.fdopen(fd, "a", encoding=self.encoding, errors=self.errors)


def configure_logging(
    home: Path,
    *,
    to_stderr_level: int | None = logging.WARNING,
    file_level: int = logging.INFO,
    to_file: bool = True,
) -> Path | None:
    """Log to ``$KBTUI_HOME/logs/kbtui.log`` (mode 0600) and optionally stderr.

    The log file is best effort: nothing is created when the data directory
    does not exist (a command must not create it by logging), and a directory
    that cannot be written (a read-only mount) gets no log file; ``to_file``
    False asks for none. Returns the log file, or None when there is none.
    """
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_kbtui", False):
            root.removeHandler(handler)
            handler.close()
    log_file = _private_log_file(home) if to_file else None
    if log_file is not None:
        file_handler = _PrivateRotatingFileHandler(log_file, maxBytes=5 << 20, backupCount=3)
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


# The node's own loggers: what the events pane shows (libraries' lines stay in the file).
NODE_LOGGERS = ("kbtui", "actors", "store")


@dataclass(frozen=True)
class LogLine:
    """One log line of the node, as the events pane shows it."""

    name: ClassVar[str] = "log_line"
    at: float
    level: str
    logger: str
    message: str


class LogLineHandler(logging.Handler):
    """Hands each of the node's own log records at ``level`` or above to
    ``deliver`` as a :class:`LogLine`. ``deliver`` runs on the logging thread:
    it must hand off without blocking (``App.post_message``, a hub's publish)."""

    def __init__(self, deliver: Callable[[LogLine], object], level: int = logging.INFO) -> None:
        super().__init__(level)
        self._deliver = deliver

    def emit(self, record: logging.LogRecord) -> None:
        if not record.name.startswith(NODE_LOGGERS):
            return
        # getMessage() only: an exception's traceback can quote text, the message never does.
        # A record with bad arguments, or a closed loop: the line is simply not shown.
        with contextlib.suppress(TypeError, ValueError, RuntimeError):
            self._deliver(LogLine(record.created, record.levelname, record.name, record.getMessage()))

    def attach(self) -> LogLineHandler:
        """Listen on the root logger (which must pass ``level`` on) until :meth:`detach`."""
        root = logging.getLogger()
        root.addHandler(self)
        if root.level > self.level or root.level == logging.NOTSET:
            root.setLevel(self.level)
        return self

    def detach(self) -> None:
        logging.getLogger().removeHandler(self)


def _private_log_file(home: Path) -> Path | None:
    if not home.is_dir():
        return None
    log_dir = home / "logs"
    log_file = log_dir / "kbtui.log"
    try:
        log_dir.mkdir(mode=0o700, exist_ok=True)
        os.close(os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600))
    except OSError:
        return None
    return log_file
