"""Asking git itself about a working tree: its top level, and which files count.

git is run with a scrubbed environment (no inherited ``GIT_*`` redirections)
and with the options that could run a configured program switched off, so a
hostile repository's config cannot execute anything during a scan. Error
messages never carry git's stderr: it names paths.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from kbtui.errors import KbtuiError

GIT_TIMEOUT_S = 120.0

# core.fsmonitor names a program git would run while listing files.
_SAFE_OPTIONS = ("-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false", "-c", "core.quotePath=false")


class NotAGitTopLevel(KbtuiError):
    """The folder is not (or no longer) the top level of a Git working tree."""


class GitUnavailable(KbtuiError):
    pass


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    return env


def run_git(root: Path, *args: str) -> bytes:
    """Run ``git ARGS`` in ``root``; return stdout, or raise a content-free error."""
    try:
        completed = subprocess.run(
            ["git", *_SAFE_OPTIONS, *args],
            cwd=root,
            env=_environment(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        raise GitUnavailable("git is not installed (or not on PATH)") from None
    except NotADirectoryError:
        raise NotAGitTopLevel("the registered folder is not a directory") from None
    except subprocess.TimeoutExpired:
        raise KbtuiError(f"git did not answer within {GIT_TIMEOUT_S:.0f} s") from None
    if completed.returncode != 0:
        raise NotAGitTopLevel(
            "git does not accept the folder as a working tree (not a repository, "
            "a bare one, or owned by another user)"
        )
    return completed.stdout


def verify_top_level(folder: Path) -> Path:
    """Return the real path of ``folder`` if git says it is a working tree's top level."""
    if not folder.is_dir():
        raise NotAGitTopLevel("the folder does not exist or is not a directory")
    real = Path(os.path.realpath(folder))
    output = run_git(real, "rev-parse", "--show-toplevel").rstrip(b"\n")
    if not output or Path(os.path.realpath(os.fsdecode(output))) != real:
        raise NotAGitTopLevel("the folder is inside a Git repository but is not its top level")
    return real


def list_candidate_paths(root: Path) -> list[bytes]:
    """Tracked plus untracked-but-not-ignored paths, raw bytes relative to ``root``.

    Ignore rules (.gitignore, info/exclude, the user's excludes file) are
    applied by git. Untracked nested repositories come back as ``dir/``.
    """
    output = run_git(root, "ls-files", "--cached", "--others", "--exclude-standard", "-z")
    # A path with unmerged index stages is listed once per stage.
    return sorted({path for path in output.split(b"\x00") if path})


def count_ignored_entries(root: Path) -> int:
    """How many untracked entries .gitignore hides (an ignored directory counts once)."""
    output = run_git(root, "ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "-z")
    return sum(1 for path in output.split(b"\x00") if path)


def head_commit(root: Path) -> str | None:
    """The commit HEAD points at, or None (no commit yet, or git cannot tell)."""
    try:
        output = run_git(root, "rev-parse", "--verify", "--quiet", "HEAD")
    except KbtuiError:
        return None
    commit = output.strip().decode("ascii", "replace")
    return commit or None


def is_top_level(folder: Path) -> bool:
    """Whether git says ``folder`` is the top level of a working tree (False when git is missing)."""
    try:
        verify_top_level(folder)
    except KbtuiError:
        return False
    return True
