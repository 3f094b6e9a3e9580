"""Asking git itself about a working tree: its top level, and which files count.

git is run with a scrubbed environment (no inherited ``GIT_*`` redirections)
and with the options that could run a configured program switched off, so a
hostile repository's config cannot execute anything during a scan. Error
messages never carry git's stderr: it names paths.

git opens the files it reads (its config files, the files they include,
``core.excludesFile``, ``core.attributesFile``, ``info/exclude``, tracked
``.gitignore`` files) with a blocking open: a FIFO in their place would stall
a scan until git's timeout. So each is checked first by the rules every
source file meets (a regular file, after symlinks as git follows them, of a
bounded size), without opening it; anything else stops the scan with one
line (:class:`GitFileRefused`) and nothing is removed.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

from kbtui.errors import KbtuiError
from store.files import SourceRefused, open_source

GIT_TIMEOUT_S = 120.0
MAX_GIT_FILE_BYTES = 16 << 20
# Bounds the walk over includes (a config including itself, or thousands).
MAX_CONFIG_FILES = 64
_RULE_FILES = r"^core\.(excludesfile|attributesfile)$"

# core.fsmonitor names a program git would run while listing files.
_SAFE_OPTIONS = ("-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false", "-c", "core.quotePath=false")


class NotAGitTopLevel(KbtuiError):
    """The folder is not (or no longer) the top level of a Git working tree."""


class GitUnavailable(KbtuiError):
    pass


class GitFileRefused(KbtuiError):
    """A file git would read is not a regular file of a sane size (a FIFO, a device, a huge file)."""


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    return env


def run_git(root: Path, *args: str, timeout: float = GIT_TIMEOUT_S) -> bytes:
    """Run ``git ARGS`` in ``root``; return stdout, or raise a content-free error.
    Git's own config files are checked first (:func:`refuse_unsafe_config_files`)."""
    refuse_unsafe_config_files(root)
    return _run_git(root, args, timeout=timeout)


def _run_git(root: Path, args: tuple[str, ...], *, timeout: float, nothing_found_ok: bool = False) -> bytes:
    """``nothing_found_ok``: exit status 1 (``git config`` matched nothing) is an empty answer."""
    try:
        completed = subprocess.run(
            ["git", *_SAFE_OPTIONS, *args],
            cwd=root,
            env=_environment(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        raise GitUnavailable("git is not installed (or not on PATH)") from None
    except NotADirectoryError:
        raise NotAGitTopLevel("the registered folder is not a directory") from None
    except subprocess.TimeoutExpired:
        raise KbtuiError(f"git did not answer within {timeout:.0f} s") from None
    if completed.returncode == 1 and nothing_found_ok:
        return b""
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
    applied by git, once each file it would read for them is checked.
    Untracked nested repositories come back as ``dir/``.
    """
    refuse_unsafe_ignore_files(root)
    output = run_git(root, "ls-files", "--cached", "--others", "--exclude-standard", "-z")
    # A path with unmerged index stages is listed once per stage.
    return sorted({path for path in output.split(b"\x00") if path})


def count_ignored_entries(root: Path) -> int:
    """How many untracked entries .gitignore hides (an ignored directory counts once)."""
    refuse_unsafe_ignore_files(root)
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
    """Whether git says ``folder`` is the top level of a working tree (False when
    git is missing); a file git would read that is refused is said, not guessed."""
    try:
        verify_top_level(folder)
    except GitFileRefused:
        raise
    except KbtuiError:
        return False
    return True


# -- the files git reads, checked before it reads them


def _refuse_unless_regular(path: Path, what: str) -> None:
    """Refuse ``path`` (when it exists) unless it is a regular file of at most
    MAX_GIT_FILE_BYTES; ``stat`` follows symlinks as git does and never blocks."""
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError:
        return  # git cannot read it either, and says so
    if not stat.S_ISREG(info.st_mode):
        raise GitFileRefused(f"git would read {what}, which is not a regular file (a FIFO or a device would stall "
                             "it); the scan stopped and nothing was removed")
    if info.st_size > MAX_GIT_FILE_BYTES:
        raise GitFileRefused(f"git would read {what}, which is larger than {MAX_GIT_FILE_BYTES >> 20} MiB; the "
                             "scan stopped and nothing was removed")


def _xdg_git(name: str) -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "git" / name


def _git_dirs(root: Path) -> list[Path]:
    """The repository's git directory (``.git``, or where a ``.git`` file points)
    and its common directory (a linked worktree's main repository)."""
    dot_git = root / ".git"
    if dot_git.is_dir():
        git_dir = dot_git
    else:
        try:
            with open_source(dot_git, max_bytes=4096) as source:
                line = source.read().decode("utf-8", "replace").strip()
        except (SourceRefused, OSError):
            return []
        if not line.startswith("gitdir:"):
            return []
        git_dir = (root / line.removeprefix("gitdir:").strip()).resolve()
    dirs = [git_dir]
    try:
        with open_source(git_dir / "commondir", max_bytes=4096) as source:
            dirs.append((git_dir / source.read().decode("utf-8", "replace").strip()).resolve())
    except (SourceRefused, OSError):
        pass
    return dirs


def refuse_unsafe_config_files(root: Path) -> None:
    """Every config file git reads for ``root`` (system, global, the
    repository's, and the files they include) must be a regular file. The
    includes are found by reading the config files here, safely: git itself
    follows them as soon as it starts, whatever the command."""
    home = Path(os.path.expanduser("~"))
    configs = [
        (Path("/etc/gitconfig"), "the system's Git config (/etc/gitconfig)"),
        (home / ".gitconfig", "your Git config (~/.gitconfig)"),
        (_xdg_git("config"), "your Git config (~/.config/git/config)"),
    ]
    for git_dir in _git_dirs(root):
        configs += [(git_dir / name, f"the repository's Git config (.git/{name})") for name in ("config", "config.worktree")]
    seen: set[Path] = set()
    while configs and len(seen) < MAX_CONFIG_FILES:
        path, what = configs.pop()
        if path in seen:
            continue
        seen.add(path)
        _refuse_unless_regular(path, what)
        configs += [(included, "a file your Git config includes") for included in _included_paths(path)]


_SECTION = re.compile(r"^\s*\[([^\]]*)\](.*)$")
_PATH_ENTRY = re.compile(r"^\s*path\s*=\s*(.*?)\s*$", re.IGNORECASE)


def _included_paths(config: Path) -> list[Path]:
    """The files ``[include]`` and ``[includeIf ...]`` sections of ``config``
    name (whatever their condition), read with the rules of a source file."""
    try:
        with open_source(os.path.realpath(config), max_bytes=MAX_GIT_FILE_BYTES) as source:
            text = source.read().decode("utf-8", "replace")
    except (SourceRefused, OSError):
        return []  # missing, or refused by _refuse_unless_regular before this
    included, in_include = [], False
    for line in text.splitlines():
        section = _SECTION.match(line)
        if section:
            name = section.group(1).strip().split(None, 1)[0].lower() if section.group(1).strip() else ""
            in_include = name in ("include", "includeif")
            line = section.group(2)  # a key may follow the header on its line
        entry = _PATH_ENTRY.match(line) if in_include else None
        if entry:
            value = re.split(r"\s[#;]", entry.group(1), maxsplit=1)[0].strip().strip('"')
            if value:
                included.append(config.parent / os.path.expanduser(value))
    return included


def refuse_unsafe_ignore_files(root: Path) -> None:
    """The files git reads for its ignore and attribute rules must be regular
    files: the config's includes, core.excludesFile and core.attributesFile
    (or their defaults), info/exclude and info/attributes, and the tracked
    .gitignore and .gitattributes files as they are on disk."""
    _refuse_unless_regular(_xdg_git("ignore"), "your Git excludes file (~/.config/git/ignore)")
    _refuse_unless_regular(_xdg_git("attributes"), "your Git attributes file (~/.config/git/attributes)")
    for git_dir in _git_dirs(root):
        for name in ("exclude", "attributes"):
            _refuse_unless_regular(git_dir / "info" / name, f"the repository's .git/info/{name}")
    refuse_unsafe_config_files(root)
    # Every file git's config comes from is checked now: asking git is safe.
    listing = _run_git(root, ("config", "-z", "--get-regexp", _RULE_FILES), timeout=GIT_TIMEOUT_S, nothing_found_ok=True)
    for entry in filter(None, listing.split(b"\x00")):
        key, _, value = os.fsdecode(entry).partition("\n")
        what = "core.excludesFile" if key.lower() == "core.excludesfile" else "core.attributesFile"
        _refuse_unless_regular(root / os.path.expanduser(value), what)
    tracked = run_git(root, "ls-files", "--cached", "-z", "--", ":(glob)**/.gitignore", ":(glob)**/.gitattributes")
    for path in filter(None, tracked.split(b"\x00")):
        on_disk = root / os.fsdecode(path)
        if on_disk.is_symlink():
            continue  # git does not follow a symlinked .gitignore
        _refuse_unless_regular(on_disk, "a tracked .gitignore or .gitattributes file")
