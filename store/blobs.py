"""Encrypted blob store: AES-256-GCM in fixed-size segments (STREAM construction).

File layout::

    header   = MAGIC(4) | version(1) | segment_size(4, big-endian) | salt(16) | nonce_prefix(7)
    segments = AES-GCM(key, nonce_prefix | counter(4) | last(1), plaintext[i], aad=header|blob_id)

The per-blob key is HKDF-SHA256(node key, salt, info=label|blob_id), and the
blob id (the document id) is bound into every segment as associated data, so a
blob copied over another document's file fails authentication. The counter in
the nonce rejects reordered segments and the ``last`` flag rejects truncation
at a segment boundary. Memory stays bounded by one segment for any file size.
"""

from __future__ import annotations

import hashlib
import io
import os
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from store.errors import BlobCorrupt, StoreError
from store.files import SourceFile, replace_durably

MAGIC = b"KBTB"
FORMAT_VERSION = 1
SEGMENT_SIZE = 64 * 1024
TAG_SIZE = 16
HEADER_SIZE = 4 + 1 + 4 + 16 + 7
_BLOB_LABEL = b"kbtui blob v1|"
_NAME_LABEL = b"kbtui name v1|"
_TEMP_PREFIX = ".tmp-"


def _derive_key(node_key: bytes, salt: bytes | None, label: bytes, context_id: str) -> bytes:
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=label + context_id.encode())
    return hkdf.derive(node_key)


# The format's pieces, shared by every blob store (files here, rows in store.postgres.blobs).


def new_header() -> bytes:
    """A fresh blob header: the format, the segment size, a random salt and nonce prefix."""
    return MAGIC + bytes([FORMAT_VERSION]) + SEGMENT_SIZE.to_bytes(4, "big") + secrets.token_bytes(16 + 7)


def read_header(header: bytes) -> int:
    """The segment size a stored header names; :class:`BlobCorrupt` when it is not one."""
    if len(header) != HEADER_SIZE or header[:4] != MAGIC or header[4] != FORMAT_VERSION:
        raise BlobCorrupt("the stored source of this document is damaged (bad header)")
    return int.from_bytes(header[5:9], "big")


@dataclass(frozen=True)
class SegmentCipher:
    """The AEAD of one blob: its key (from the node key, the header's salt and
    the blob id) and the associated data that binds every segment to both."""

    aead: AESGCM
    aad: bytes
    prefix: bytes

    @classmethod
    def of(cls, node_key: bytes, header: bytes, blob_id: str) -> SegmentCipher:
        salt, prefix = header[9:25], header[25:32]
        return cls(AESGCM(_derive_key(node_key, salt, _BLOB_LABEL, blob_id)), header + blob_id.encode(), prefix)

    def _nonce(self, counter: int, last: bool) -> bytes:
        if counter >= 2**32:
            raise StoreError("file is too large for the blob format")
        return self.prefix + counter.to_bytes(4, "big") + (b"\x01" if last else b"\x00")

    def seal(self, counter: int, last: bool, plaintext: bytes) -> bytes:
        return self.aead.encrypt(self._nonce(counter, last), plaintext, self.aad)

    def open(self, counter: int, last: bool, record: bytes) -> bytes:
        """Decrypt one record; :class:`BlobCorrupt` when it fails authentication."""
        try:
            return self.aead.decrypt(self._nonce(counter, last), record, self.aad)
        except InvalidTag:
            raise BlobCorrupt(
                "the stored source of this document failed authentication "
                "(tampered, truncated or written with another key)"
            ) from None


@dataclass(frozen=True)
class SealedBlob:
    """What :meth:`BlobStore.seal` stored: the plaintext size and its SHA-256."""

    size: int
    sha256: str


class FileChanged(StoreError):
    """The source file changed while it was being stored."""


class BlobStore:
    """Encrypted, atomically written blobs under one directory, one file per id."""

    def __init__(self, root: Path, node_key: bytes) -> None:
        self.root = root
        self._node_key = node_key
        root.mkdir(parents=True, exist_ok=True)

    def path_for(self, blob_id: str) -> Path:
        if not blob_id or "/" in blob_id or blob_id.startswith("."):
            raise ValueError("invalid blob id")
        return self.root / blob_id

    def seal(
        self, blob_id: str, source: BinaryIO | SourceFile, *, check: Callable[[str], None] | None = None
    ) -> SealedBlob:
        """Encrypt ``source`` into the blob ``blob_id`` in one pass, hashing what is encrypted.

        The SHA-256 returned is of exactly the bytes stored: nothing reads the
        source twice, so a file that changes between a hash and a copy cannot
        make them disagree. ``check(sha256)`` runs after the last byte was
        read and before the blob replaces anything (e.g. to call
        :meth:`SourceFile.finish`); if it raises, nothing is stored. Written to a temp file, fsynced and
        renamed, so a reader sees the old blob or the new one, never a part.
        """
        header = new_header()
        cipher = SegmentCipher.of(self._node_key, header, blob_id)
        digest = hashlib.sha256()
        final = self.path_for(blob_id)
        tmp = self.root / f"{_TEMP_PREFIX}{blob_id}-{secrets.token_hex(4)}"
        size = 0
        try:
            with open(tmp, "xb") as out:
                out.write(header)
                counter = 0
                current = source.read(SEGMENT_SIZE)
                while True:
                    following = source.read(SEGMENT_SIZE) if len(current) == SEGMENT_SIZE else b""
                    last = not following
                    digest.update(current)
                    size += len(current)
                    out.write(cipher.seal(counter, last, current))
                    if last:
                        break
                    counter += 1
                    current = following
                if check is not None:
                    check(digest.hexdigest())
                out.flush()
                os.fsync(out.fileno())
            replace_durably(tmp, final)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return SealedBlob(size, digest.hexdigest())

    def write(self, blob_id: str, source: BinaryIO, *, expected_sha256: str | None = None) -> int:
        """Encrypt ``source`` into the blob ``blob_id``; return the plaintext size.

        If ``expected_sha256`` is given and the bytes read differ, nothing is
        stored and :class:`FileChanged` is raised.
        """

        def unchanged(sha256: str) -> None:
            if expected_sha256 is not None and sha256 != expected_sha256:
                raise FileChanged("the file changed while it was being added; try again")

        return self.seal(blob_id, source, check=unchanged).size

    def write_bytes(self, blob_id: str, data: bytes) -> int:
        return self.write(blob_id, io.BytesIO(data))

    def iter_plaintext(self, blob_id: str) -> Iterator[bytes]:
        """Yield the decrypted segments; raise :class:`BlobCorrupt` on any tampering."""
        path = self.path_for(blob_id)
        try:
            handle = open(path, "rb")  # noqa: SIM115 - only the open is guarded; the with below closes it
        except FileNotFoundError:
            raise BlobCorrupt("the stored source of this document is missing") from None
        with handle:
            header = handle.read(HEADER_SIZE)
            record = read_header(header) + TAG_SIZE
            cipher = SegmentCipher.of(self._node_key, header, blob_id)
            counter = 0
            current = handle.read(record)
            while True:
                following = handle.read(record) if len(current) == record else b""
                last = not following
                yield cipher.open(counter, last, current)
                if last:
                    return
                counter += 1
                current = following

    def verify(self, blob_id: str) -> int:
        """Authenticate a whole blob without keeping it; return its plaintext size."""
        return sum(len(part) for part in self.iter_plaintext(blob_id))

    def read_bytes(self, blob_id: str, *, max_bytes: int | None = None) -> bytes:
        """Decrypt a whole blob; refuse one larger than ``max_bytes``."""
        parts: list[bytes] = []
        total = 0
        for part in self.iter_plaintext(blob_id):
            total += len(part)
            if max_bytes is not None and total > max_bytes:
                raise StoreError("the stored source is larger than the allowed limit")
            parts.append(part)
        return b"".join(parts)

    def delete(self, blob_id: str) -> bool:
        try:
            self.path_for(blob_id).unlink()
        except FileNotFoundError:
            return False
        return True

    def blob_ids(self) -> set[str]:
        return {p.name for p in self.root.iterdir() if not p.name.startswith(".")}

    def remove_temp_files(self, *, older_than: float) -> int:
        """Delete leftovers of writes interrupted by a crash (mtime before ``older_than``)."""
        removed = 0
        for path in self.root.glob(f"{_TEMP_PREFIX}*"):
            try:
                if path.stat().st_mtime < older_than:
                    path.unlink()
                    removed += 1
            except FileNotFoundError:
                continue
        return removed


def seal_name(node_key: bytes, context_id: str, name: str) -> bytes:
    """Encrypt a short string (a display name) bound to ``context_id``."""
    nonce = secrets.token_bytes(12)
    aead = AESGCM(_derive_key(node_key, None, _NAME_LABEL, context_id))
    return b"\x01" + nonce + aead.encrypt(nonce, name.encode("utf-8", "surrogateescape"), None)


def open_name(node_key: bytes, context_id: str, sealed: bytes) -> str:
    """Decrypt a value made by :func:`seal_name`; raise :class:`BlobCorrupt` if tampered."""
    if not sealed or sealed[0] != 1 or len(sealed) < 1 + 12 + TAG_SIZE:
        raise BlobCorrupt("an encrypted display name is damaged")
    aead = AESGCM(_derive_key(node_key, None, _NAME_LABEL, context_id))
    try:
        plain = aead.decrypt(sealed[1:13], sealed[13:], None)
    except InvalidTag:
        raise BlobCorrupt("an encrypted display name failed authentication") from None
    return plain.decode("utf-8", "replace")



def open_display_names(node_key: bytes, sealed: dict[str, bytes]) -> dict[str, str]:
    """Display names (document id -> sealed name) opened for the operator's eyes;
    a damaged one does not hide its document."""
    names = {}
    for document_id, name in sealed.items():
        try:
            names[document_id] = open_name(node_key, document_id, name)
        except Exception:  # noqa: BLE001 - any failure to open: say so, keep the document listed
            names[document_id] = f"(unreadable name) {document_id[:12]}"
    return names
