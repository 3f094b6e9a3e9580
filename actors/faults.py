"""A test seam for crash tests: pause the pipeline at a named point.

When ``KBTUI_FAULT_PAUSE_AT`` names a point, the actor reaching it writes the
file named by ``KBTUI_FAULT_MARKER`` and then blocks, so a test can kill -9
the process at exactly that step. Unset (always, outside tests) it costs one
string comparison.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

PAUSE_POINTS = ("extracting", "chunking", "embedding", "committing", "committed")


def pause_point(name: str) -> None:
    if os.environ.get("KBTUI_FAULT_PAUSE_AT") != name:
        return
    marker = os.environ.get("KBTUI_FAULT_MARKER")
    if marker:
        Path(marker).write_text(name)
    threading.Event().wait()  # until the process is killed
