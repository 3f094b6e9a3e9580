"""Which paths of a source are never indexed, decided from the path alone:
one rule set for folders, single files and Git repositories.

The rules run before any file is opened. They are deliberately broad: a
secret left out costs nothing, a secret let in ends up as plain chunk text.
Only an explicit ``include_sensitive`` on the source lets sensitive names in;
version-control metadata and generated directories stay out regardless.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import PurePosixPath

from kbtui.extract import detect_format


class SkipReason(StrEnum):
    """Why a listed path was not indexed (fixed, content-free codes)."""

    VCS_METADATA = "vcs_metadata"
    SENSITIVE = "sensitive"
    GENERATED = "generated"
    UNSUPPORTED_FORMAT = "unsupported_format"
    UNSAFE_NAME = "unsafe_name"
    NAME_COLLISION = "name_collision"
    SYMLINK = "symlink"
    NOT_REGULAR = "not_regular"
    SWAPPED = "swapped"
    VANISHED = "vanished"
    UNREADABLE = "unreadable"
    EMPTY = "empty"
    TOO_LARGE = "too_large"
    AGGREGATE_LIMIT = "aggregate_limit"
    CHANGED_DURING_READ = "changed_during_read"
    PSEUDO_FILE = "pseudo_file"  # /proc and the like: no size, yet content
    BINARY_CONTENT = "binary_content"
    GITIGNORED = "gitignored"
    TOO_DEEP = "too_deep"


VCS_DIRECTORIES = frozenset({".git", ".hg", ".svn", ".bzr"})

SENSITIVE_DIRECTORIES = frozenset({".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker"})
SENSITIVE_NAMES = frozenset({
    ".netrc", "_netrc", ".pgpass", ".npmrc", ".pypirc", ".htpasswd", ".git-credentials",
    "credentials", "credentials.json", "authorized_keys", "known_hosts", "secrets.yaml", "secrets.yml",
    "shadow", "shadow-", "gshadow", "gshadow-", "master.passwd",
})
SENSITIVE_SUFFIXES = frozenset({
    ".pem", ".key", ".p12", ".pfx", ".crt", ".cer", ".der", ".csr", ".jks", ".keystore",
    ".kdbx", ".ppk", ".gpg", ".pgp", ".asc", ".tfstate", ".tfvars", ".env",
})
_PRIVATE_KEY_NAME = re.compile(r"id_(rsa|dsa|ecdsa|ed25519)(_sk)?(\..*)?\Z")

GENERATED_DIRECTORIES = frozenset({
    "node_modules", "bower_components", "__pycache__", ".venv", "venv", ".virtualenv", ".virtualenvs",
    ".tox", ".nox", ".eggs", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis",
    "build", "dist", "target", ".gradle", ".next", ".nuxt", ".parcel-cache", ".terraform",
    "htmlcov", ".cache",
})
GENERATED_DIRECTORY_SUFFIXES = (".egg-info", ".dist-info")
# A directory holding this file is a Python virtual environment, whatever its name.
VIRTUALENV_MARKER = "pyvenv.cfg"


def is_sensitive_name(name: str) -> bool:
    lowered = name.lower()
    return (
        lowered in SENSITIVE_NAMES
        or lowered.startswith(".env")
        or PurePosixPath(lowered).suffix in SENSITIVE_SUFFIXES
        or _PRIVATE_KEY_NAME.match(lowered) is not None
    )


def is_generated_directory(name: str) -> bool:
    lowered = name.lower()
    return lowered in GENERATED_DIRECTORIES or lowered.endswith(GENERATED_DIRECTORY_SUFFIXES)


def directory_skip_reason(directory: str, *, include_sensitive: bool = False) -> SkipReason | None:
    """The reason a walk never enters ``directory`` (one name), or None."""
    lowered = directory.lower()
    if lowered in VCS_DIRECTORIES:
        return SkipReason.VCS_METADATA
    if lowered in SENSITIVE_DIRECTORIES and not include_sensitive:
        return SkipReason.SENSITIVE
    if is_generated_directory(directory):
        return SkipReason.GENERATED
    return None


def path_skip_reason(source_path: str, *, include_sensitive: bool = False) -> SkipReason | None:
    """The reason ``source_path`` (normalised, ``/``-separated) is never indexed, or None.

    A name whose format only its content can tell passes here; the scan
    sniffs it (``binary_content``) once it is read.
    """
    *directories, name = source_path.split("/")
    for directory in directories:
        if directory.lower() in VCS_DIRECTORIES:
            return SkipReason.VCS_METADATA
    if name.lower() in VCS_DIRECTORIES:
        return SkipReason.VCS_METADATA
    sensitive = any(d.lower() in SENSITIVE_DIRECTORIES for d in directories) or is_sensitive_name(name)
    if sensitive and not include_sensitive:
        return SkipReason.SENSITIVE
    if any(is_generated_directory(d) for d in directories):
        return SkipReason.GENERATED
    if detect_format(name).reason is not None or (_is_bare_dotfile(name) and not sensitive):
        # An included sensitive dotfile (.env) is judged by its content like any other.
        return SkipReason.UNSUPPORTED_FORMAT
    return None


def _is_bare_dotfile(name: str) -> bool:
    # ``.gitignore``, ``.bashrc``: tool configuration that would pass for
    # extension-less plain text; ``.github/x.md``-style documents still count.
    return name.startswith(".") and PurePosixPath(name).suffix == ""
