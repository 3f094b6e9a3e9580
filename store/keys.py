"""The node key: 32 random bytes in ``node.key``, readable by the owner only.

Every blob key and the display-name keys are derived from it with HKDF, so
losing it loses the encrypted sources; replacing it silently would make them
unreadable. Both are refused with a clear message instead.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
from pathlib import Path

from store.errors import KeyProblem
from store.files import create_once

KEY_FILE_NAME = "node.key"
KEY_BYTES = 32
_CHECK_LABEL = b"kbtui node key check v1"
_CATALOG_LABEL = b"kbtui catalog id v1|"


def key_fingerprint(key: bytes) -> bytes:
    """A value stored beside the data that proves the right key without revealing it."""
    return hmac.new(key, _CHECK_LABEL, hashlib.sha256).digest()


def catalog_seal(key: bytes, catalog_id: str) -> bytes:
    """The catalog's id bound to the key: only the key's holder can make it,
    so a catalog that merely copies the key's (public) fingerprint cannot."""
    return hmac.new(key, _CATALOG_LABEL + catalog_id.encode("ascii"), hashlib.sha256).digest()


def seal_matches(key: bytes, catalog_id: str, seal: bytes) -> bool:
    return hmac.compare_digest(catalog_seal(key, catalog_id), seal)


def load_or_create_key(home: Path, *, data_exists: bool) -> bytes:
    """Return the node key, creating it (mode 0600) only when no data exists yet."""
    path = home / KEY_FILE_NAME
    if not path.exists():
        if data_exists:
            raise KeyProblem(
                f"the node key ({KEY_FILE_NAME}) is missing but encrypted data exists in "
                "the data directory; restore the key file (a new key would make the "
                "stored documents unreadable)"
            )
        return _create_key(path)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise KeyProblem(
            f"the node key ({KEY_FILE_NAME}) is readable by other users "
            f"(mode {mode:04o}); run: chmod 600 on it"
        )
    key = path.read_bytes()
    if len(key) != KEY_BYTES:
        raise KeyProblem(f"the node key ({KEY_FILE_NAME}) is damaged: wrong length")
    return key


def verify_key(key: bytes, stored_fingerprint: bytes | None) -> None:
    """Refuse to run when the key is not the one the data was written with."""
    if stored_fingerprint is not None and not hmac.compare_digest(
        key_fingerprint(key), stored_fingerprint
    ):
        raise KeyProblem(
            f"the node key ({KEY_FILE_NAME}) does not match the data in this data "
            "directory; restore the original key file"
        )


def _create_key(path: Path) -> bytes:
    key = os.urandom(KEY_BYTES)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not create_once(path, key):
        # Another process created the key first: never overwrite a key, use theirs.
        return load_or_create_key(path.parent, data_exists=True)
    return key

