"""Which knowledge base a node serves, proved on every request.

A client talks only to its own node. What it connects to must be a socket
(not a link), owned by this user, in its own data directory; and the node
that answers must prove that it serves the knowledge base of that data
directory, not just any kbtui node that a link or a planted file led to.

The proof uses what the client already holds: the node key and the catalog
id that ``node.fingerprint`` records. Every request carries the *base id*
(a keyed hash of the catalog id: it names the knowledge base without
revealing the key) and a fresh challenge; a node serving another base refuses
the request before acting on it (``421 wrong_node``), and every answer
carries the node's proof: a keyed hash of the challenge, which only a holder
of the key can compute. A client that does not get a valid proof believes
nothing in the answer.

Only the standard library is imported: ``kbtui search`` through a node stays light.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from kbtui.errors import DataDirectoryProblem

# As store.keys and store.datadir name them (not imported: they bring the database library).
KEY_FILE_NAME = "node.key"
FINGERPRINT_FILE_NAME = "node.fingerprint"
_KEY_BYTES = 32
_MAX_FINGERPRINT_BYTES = 4096
_BASE_LABEL = b"kbtui knowledge base id v1|"
_PROOF_LABEL = b"kbtui node proof v1|"

BASE_HEADER = "x-kbtui-base"
CHALLENGE_HEADER = "x-kbtui-challenge"
PROOF_HEADER = "x-kbtui-proof"


class NotOurNode(DataDirectoryProblem):
    """What answers where our node should be is not our node (another user's,
    another knowledge base's, or no kbtui node at all): nothing it says is used,
    and the command stops with one line (exit 3) rather than carry on beside it."""


@dataclass(frozen=True)
class BaseIdentity:
    """The knowledge base a data directory holds: its key and its catalog's id."""

    key: bytes
    catalog_id: str

    @property
    def base_id(self) -> str:
        return hmac.new(self.key, _BASE_LABEL + self.catalog_id.encode(), hashlib.sha256).hexdigest()[:32]

    def proof(self, challenge: str) -> str:
        message = _PROOF_LABEL + self.base_id.encode() + b"|" + challenge.encode("ascii", "replace")
        return hmac.new(self.key, message, hashlib.sha256).hexdigest()

    def proves(self, challenge: str, proof: str | None) -> bool:
        return proof is not None and hmac.compare_digest(self.proof(challenge), proof)


def new_challenge() -> str:
    return secrets.token_hex(16)


def read_identity(home: Path) -> BaseIdentity | None:
    """The identity of the knowledge base in ``home``, or None when it has no
    usable key (then no node can be ours).

    The key is read as the node reads it: a regular file, not through a link,
    owned by this user. A missing or damaged ``node.fingerprint`` leaves the
    catalog id empty on both sides (a directory from before that file).
    """
    key = read_private_file(home / KEY_FILE_NAME, max_bytes=_KEY_BYTES)
    if key is None or len(key) != _KEY_BYTES:
        return None
    catalog_id = ""
    recorded = read_private_file(home / FINGERPRINT_FILE_NAME, max_bytes=_MAX_FINGERPRINT_BYTES)
    if recorded is not None:
        try:
            catalog_id = str(json.loads(recorded)["catalog_id"])
        except (ValueError, KeyError, TypeError):
            catalog_id = ""
    return BaseIdentity(key, catalog_id)


def read_private_file(path: Path, *, max_bytes: int) -> bytes | None:
    """The bytes of ``path`` if it is a regular file of this user, reached
    without following a link; None otherwise (missing, a link, a FIFO,
    another user's, too large)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_size > max_bytes:
            return None
        data = os.read(fd, max_bytes + 1)
        return data if len(data) <= max_bytes else None
    except OSError:
        return None
    finally:
        os.close(fd)


def is_own_socket(path: Path) -> bool:
    """Whether ``path`` is this user's socket, reached without a link.

    False for nothing there or a stale file of another kind (no node runs);
    :class:`NotOurNode` for a link (to another node's socket, say) or another
    user's socket: a command must not carry on in-process as if no node ran.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(info.st_mode):
        raise NotOurNode(f"{path.name} in the data directory is a link, not this node's socket; remove it")
    if not stat.S_ISSOCK(info.st_mode):
        return False
    if info.st_uid != os.getuid():
        raise NotOurNode(f"{path.name} in the data directory belongs to another user")
    return True
