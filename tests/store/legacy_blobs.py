"""A writer of format-1 blobs (before labels), as kbtui wrote them, for the
tests that check old blobs keep being read and are upgraded."""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

SEGMENT_SIZE = 64 * 1024


def write_legacy_blob(root: Path, node_key: bytes, blob_id: str, data: bytes) -> Path:
    """Write ``data`` as format-1 blob ``blob_id`` under ``root`` (no label, no trailer)."""
    salt, prefix = os.urandom(16), os.urandom(7)
    header = b"KBTB" + bytes([1]) + SEGMENT_SIZE.to_bytes(4, "big") + salt + prefix
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=b"kbtui blob v1|" + blob_id.encode())
    aead = AESGCM(hkdf.derive(node_key))
    aad = header + blob_id.encode()
    parts = [data[i : i + SEGMENT_SIZE] for i in range(0, len(data), SEGMENT_SIZE)] or [b""]
    body = b"".join(
        aead.encrypt(prefix + n.to_bytes(4, "big") + (b"\x01" if n == len(parts) - 1 else b"\x00"), part, aad)
        for n, part in enumerate(parts)
    )
    root.mkdir(parents=True, exist_ok=True)
    path = root / blob_id
    path.write_bytes(header + body)
    return path
