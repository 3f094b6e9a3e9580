"""Durable file operations shared by the blob store, the key file and the ANN index."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(directory: Path) -> None:
    """Make a rename or unlink inside ``directory`` survive a power loss."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_durably(tmp: Path, final: Path) -> None:
    """Rename an already fsynced temp file over ``final`` and persist the rename."""
    os.replace(tmp, final)
    fsync_dir(final.parent)
