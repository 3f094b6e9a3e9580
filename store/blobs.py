"""Encrypted blob store: AES-256-GCM in fixed-size segments (STREAM construction).

File layout (format 2; format 1 is the same without the label and trailer)::

    header   = MAGIC(4) | version(1) | segment_size(4, big-endian) | salt(16) | nonce_prefix(7)
    segments = AES-GCM(key, nonce_prefix | counter(4) | last(1), plaintext[i], aad=header|blob_id)
    label    = nonce(12) | AES-GCM(label_key, nonce, label_json, aad=header|blob_id)
    trailer  = len(label) (4, big-endian)

The per-blob key is HKDF-SHA256(node key, salt, info=label|blob_id), and the
blob id (the document id) is bound into every segment as associated data, so a
blob copied over another document's file fails authentication. The counter in
the nonce rejects reordered segments and the ``last`` flag rejects truncation
at a segment boundary. Memory stays bounded by one segment for any file size.

The label (format 2) carries, sealed with a key of its own, what the catalog
needs to bring the document back from the blob and the key alone
(:class:`StoredLabel`: collection, display name, source path, format, content
hash). It is written after the content because the content hash is known only
once the last byte has been read; its random nonce lets it be replaced (a
rename) without touching the content. A reader checks the content against the
label's hash, so a label cannot be moved onto other bytes of the same
document. Format 1 blobs are still read; :meth:`BlobStore.reseal` upgrades one.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from store.errors import BlobCorrupt, StoreError
from store.files import replace_durably

MAGIC = b"KBTB"
FORMAT_VERSION = 2
LEGACY_VERSION = 1  # no label: read, and upgraded by BlobStore.reseal
SEGMENT_SIZE = 64 * 1024
TAG_SIZE = 16
HEADER_SIZE = 4 + 1 + 4 + 16 + 7
_TRAILER_SIZE = 4
_NONCE_SIZE = 12
_MAX_LABEL_RECORD = 64 * 1024  # names and paths are short; a bigger length is damage
_BLOB_LABEL = b"kbtui blob v1|"
_LABEL_LABEL = b"kbtui blob label v2|"
_NAME_LABEL = b"kbtui name v1|"
_TEMP_PREFIX = ".tmp-"
_COPY_BLOCK = 1 << 20

_AUTH_FAILED = (
    "the stored source of this document failed authentication (tampered, truncated or written with another key)"
)


def _derive_key(node_key: bytes, salt: bytes | None, label: bytes, context_id: str) -> bytes:
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=label + context_id.encode())
    return hkdf.derive(node_key)


def _nonce(prefix: bytes, counter: int, last: bool) -> bytes:
    if counter >= 2**32:
        raise StoreError("file is too large for the blob format")
    return prefix + counter.to_bytes(4, "big") + (b"\x01" if last else b"\x00")


# The segment format's pieces, shared with the rows of store.postgres.blobs (which
# writes the unlabelled format 1: a PostgreSQL row carries its document beside it).


def new_header(version: int = FORMAT_VERSION) -> bytes:
    """A fresh blob header: the format, the segment size, a random salt and nonce prefix."""
    return MAGIC + bytes([version]) + SEGMENT_SIZE.to_bytes(4, "big") + secrets.token_bytes(16 + 7)


def read_header(header: bytes, version: int = FORMAT_VERSION) -> int:
    """The segment size a stored header names; :class:`BlobCorrupt` when it is not one."""
    if len(header) != HEADER_SIZE or header[:4] != MAGIC or header[4] != version:
        raise BlobCorrupt("the stored source of this document is damaged (bad header)")
    return int.from_bytes(header[5:9], "big")


@dataclass(frozen=True)
class SegmentCipher:
    """The AEAD of one blob's segments: its key (from the node key, the header's
    salt and the blob id) and the associated data that binds every segment to both."""

    aead: AESGCM
    aad: bytes
    prefix: bytes

    @classmethod
    def of(cls, node_key: bytes, header: bytes, blob_id: str) -> SegmentCipher:
        salt, prefix = header[9:25], header[25:32]
        return cls(AESGCM(_derive_key(node_key, salt, _BLOB_LABEL, blob_id)), header + blob_id.encode(), prefix)

    def seal(self, counter: int, last: bool, plaintext: bytes) -> bytes:
        return self.aead.encrypt(_nonce(self.prefix, counter, last), plaintext, self.aad)

    def open(self, counter: int, last: bool, record: bytes) -> bytes:
        """Decrypt one record; :class:`BlobCorrupt` when it fails authentication."""
        try:
            return self.aead.decrypt(_nonce(self.prefix, counter, last), record, self.aad)
        except InvalidTag:
            raise BlobCorrupt(_AUTH_FAILED) from None


@dataclass(frozen=True)
class SealedBlob:
    """What :meth:`BlobStore.seal` stored: the plaintext size and its SHA-256."""

    size: int
    sha256: str


@dataclass(frozen=True)
class DocumentLabel:
    """What a caller tells a blob about its document, to be sealed inside it."""

    collection_id: str
    display_name: str
    source_path: str | None
    format: str


@dataclass(frozen=True)
class StoredLabel:
    """What a format-2 blob says about its document: enough to rebuild its catalog row."""

    document_id: str
    label: DocumentLabel
    content_hash: str
    size: int
    sealed_at: float

    def to_json(self) -> bytes:
        fields = {"document_id": self.document_id, **asdict(self.label), "content_hash": self.content_hash,
                  "size": self.size, "sealed_at": self.sealed_at}
        return json.dumps(fields, sort_keys=True).encode("ascii")  # ASCII: lone surrogates survive as escapes

    @classmethod
    def from_json(cls, raw: bytes) -> StoredLabel:
        try:
            data = json.loads(raw)
            label = DocumentLabel(
                str(data["collection_id"]), str(data["display_name"]),
                None if data["source_path"] is None else str(data["source_path"]), str(data["format"]),
            )
            return cls(str(data["document_id"]), label, str(data["content_hash"]), int(data["size"]),
                       float(data["sealed_at"]))
        except (ValueError, KeyError, TypeError):
            raise BlobCorrupt("the label of a stored source cannot be understood") from None


class Readable(Protocol):
    """Anything a blob can be sealed from: an open file, a :class:`SourceFile`."""

    def read(self, size: int = -1, /) -> bytes: ...


class FileChanged(StoreError):
    """The source file changed while it was being stored."""


@dataclass(frozen=True)
class _Layout:
    """Where the parts of one opened blob file are."""

    header: bytes
    segment_size: int
    prefix: bytes
    content_end: int
    label_record: bytes | None  # format 2 only


def _read_layout(handle: BinaryIO, size: int) -> _Layout:
    header = handle.read(HEADER_SIZE)
    if len(header) != HEADER_SIZE or header[:4] != MAGIC or header[4] not in (LEGACY_VERSION, FORMAT_VERSION):
        raise BlobCorrupt("the stored source of this document is damaged (bad header)")
    version = header[4]
    segment_size = int.from_bytes(header[5:9], "big")
    content_end, record = size, None
    if version == FORMAT_VERSION:
        if size < HEADER_SIZE + TAG_SIZE + _TRAILER_SIZE:
            raise BlobCorrupt(_AUTH_FAILED)
        handle.seek(size - _TRAILER_SIZE)
        length = int.from_bytes(handle.read(_TRAILER_SIZE), "big")
        content_end = size - _TRAILER_SIZE - length
        if not _NONCE_SIZE + TAG_SIZE <= length <= _MAX_LABEL_RECORD or content_end < HEADER_SIZE + TAG_SIZE:
            raise BlobCorrupt(_AUTH_FAILED)
        handle.seek(content_end)
        record = handle.read(length)
        handle.seek(HEADER_SIZE)
    return _Layout(header, segment_size, header[25:32], content_end, record)


class _Sealer:
    """The keys and associated data of one blob (one header, one id)."""

    def __init__(self, node_key: bytes, blob_id: str, header: bytes) -> None:
        salt = header[9:25]
        self.blob_id = blob_id
        self.aad = header + blob_id.encode()
        self.prefix = header[25:32]
        self.segments = AESGCM(_derive_key(node_key, salt, _BLOB_LABEL, blob_id))
        self._node_key, self._salt = node_key, salt

    def _label_aead(self) -> AESGCM:
        return AESGCM(_derive_key(self._node_key, self._salt, _LABEL_LABEL, self.blob_id))

    def seal_label(self, stored: StoredLabel) -> bytes:
        nonce = secrets.token_bytes(_NONCE_SIZE)
        record = nonce + self._label_aead().encrypt(nonce, stored.to_json(), self.aad)
        if len(record) > _MAX_LABEL_RECORD:
            raise StoreError("the document's name or path is too long to store")
        return record + len(record).to_bytes(_TRAILER_SIZE, "big")

    def open_label(self, record: bytes) -> StoredLabel:
        try:
            raw = self._label_aead().decrypt(record[:_NONCE_SIZE], record[_NONCE_SIZE:], self.aad)
        except InvalidTag:
            raise BlobCorrupt(_AUTH_FAILED) from None
        stored = StoredLabel.from_json(raw)
        if stored.document_id != self.blob_id:
            raise BlobCorrupt(_AUTH_FAILED)
        return stored


def _encrypt_segments(source: Readable, out: BinaryIO, sealer: _Sealer) -> SealedBlob:
    """Encrypt ``source`` to ``out`` segment by segment, hashing what is encrypted."""
    digest = hashlib.sha256()
    size = 0
    counter = 0
    current = source.read(SEGMENT_SIZE)
    while True:
        following = source.read(SEGMENT_SIZE) if len(current) == SEGMENT_SIZE else b""
        last = not following
        digest.update(current)
        size += len(current)
        out.write(sealer.segments.encrypt(_nonce(sealer.prefix, counter, last), current, sealer.aad))
        if last:
            return SealedBlob(size, digest.hexdigest())
        counter += 1
        current = following


class BlobFile:
    """One blob file opened for reading (its name need not be its id: a backup's
    copies are named ``<id>.<checksum>``). Use as a context manager."""

    def __init__(self, path: Path, node_key: bytes, blob_id: str) -> None:
        try:
            self._handle = open(path, "rb")  # noqa: SIM115 - closed by close()/__exit__
        except FileNotFoundError:
            raise BlobCorrupt("the stored source of this document is missing") from None
        try:
            self.stat = os.fstat(self._handle.fileno())
            self._layout = _read_layout(self._handle, self.stat.st_size)
            self._sealer = _Sealer(node_key, blob_id, self._layout.header)
        except BaseException:
            self._handle.close()
            raise

    def label(self) -> StoredLabel | None:
        """The sealed label (authenticated), or None for a format-1 blob."""
        record = self._layout.label_record
        return None if record is None else self._sealer.open_label(record)

    def plaintext(self) -> Iterator[bytes]:
        """Yield the decrypted segments; raise :class:`BlobCorrupt` on any tampering,
        including (format 2) content that is not what the label's hash says."""
        layout = self._layout
        stored = self.label()
        digest = hashlib.sha256() if stored is not None else None
        record = layout.segment_size + TAG_SIZE
        self._handle.seek(HEADER_SIZE)
        remaining = layout.content_end - HEADER_SIZE
        counter = 0
        current = self._handle.read(min(record, remaining))
        remaining -= len(current)
        while True:
            following = self._handle.read(min(record, remaining)) if len(current) == record else b""
            remaining -= len(following)
            last = not following
            try:
                part = self._sealer.segments.decrypt(_nonce(layout.prefix, counter, last), current, self._sealer.aad)
            except InvalidTag:
                raise BlobCorrupt(_AUTH_FAILED) from None
            if digest is not None:
                digest.update(part)
            if last and stored is not None and digest is not None and digest.hexdigest() != stored.content_hash:
                raise BlobCorrupt(_AUTH_FAILED)
            yield part
            if last:
                return
            counter += 1
            current = following

    def authenticate(self) -> SealedBlob:
        """Decrypt the whole blob without keeping it: its plaintext size and SHA-256."""
        digest = hashlib.sha256()
        size = 0
        for part in self.plaintext():
            digest.update(part)
            size += len(part)
        return SealedBlob(size, digest.hexdigest())

    def copy_content(self, out: BinaryIO) -> None:
        """Copy the header and the encrypted segments as they are (no label, no trailer)."""
        self._handle.seek(0)
        remaining = self._layout.content_end
        while remaining > 0:
            block = self._handle.read(min(_COPY_BLOCK, remaining))
            if not block:
                raise BlobCorrupt(_AUTH_FAILED)
            out.write(block)
            remaining -= len(block)

    @property
    def sealer(self) -> _Sealer:
        return self._sealer

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> BlobFile:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _PlaintextReader:
    """The plaintext of a blob as a readable (to seal it again in one pass)."""

    def __init__(self, parts: Iterator[bytes]) -> None:
        self._parts = parts
        self._buffer = b""

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._buffer) < size:
            part = next(self._parts, None)
            if part is None:
                break
            self._buffer += part
        if size < 0:
            size = len(self._buffer)
        taken, self._buffer = self._buffer[:size], self._buffer[size:]
        return taken


class BlobStore:
    """Encrypted, atomically written blobs under one directory, one file per id.

    Every change of a blob file (a rename over it, an unlink) happens under an
    flock on the directory, so :meth:`reseal` can replace a blob only if it is
    still the file it read: an update written meanwhile is never overwritten
    by the older bytes.
    """

    def __init__(self, root: Path, node_key: bytes) -> None:
        self.root = root
        self._node_key = node_key
        root.mkdir(parents=True, exist_ok=True)

    def path_for(self, blob_id: str) -> Path:
        if not blob_id or "/" in blob_id or blob_id.startswith("."):
            raise ValueError("invalid blob id")
        return self.root / blob_id

    def open(self, blob_id: str) -> BlobFile:
        """The blob ``blob_id`` opened for reading (:class:`BlobCorrupt` when missing or damaged)."""
        return BlobFile(self.path_for(blob_id), self._node_key, blob_id)

    def seal(
        self,
        blob_id: str,
        source: Readable,
        *,
        label: DocumentLabel,
        check: Callable[[str], None] | None = None,
    ) -> SealedBlob:
        """Encrypt ``source`` into the blob ``blob_id`` in one pass, hashing what is encrypted,
        with ``label`` (and the hash) sealed after the content.

        The SHA-256 returned is of exactly the bytes stored: nothing reads the
        source twice, so a file that changes between a hash and a copy cannot
        make them disagree. ``check(sha256)`` runs after the last byte was
        read and before the blob replaces anything (e.g. to call
        :meth:`SourceFile.finish`); if it raises, nothing is stored. Written to a temp file, fsynced and
        renamed, so a reader sees the old blob or the new one, never a part.
        """
        sealed, tmp = self._seal_to_temp(blob_id, source, label, check)
        self._install(tmp, blob_id)
        return sealed

    def _seal_to_temp(
        self, blob_id: str, source: Readable, label: DocumentLabel, check: Callable[[str], None] | None
    ) -> tuple[SealedBlob, Path]:
        header = new_header()
        sealer = _Sealer(self._node_key, blob_id, header)
        with self._temp_file(blob_id) as (tmp, out):
            out.write(header)
            sealed = _encrypt_segments(source, out, sealer)
            if check is not None:
                check(sealed.sha256)
            out.write(sealer.seal_label(StoredLabel(blob_id, label, sealed.sha256, sealed.size, time.time())))
        return sealed, tmp

    @contextmanager
    def _temp_file(self, blob_id: str) -> Iterator[tuple[Path, BinaryIO]]:
        """A new temp file beside the blobs, fsynced on success, removed on failure."""
        tmp = self.root / f"{_TEMP_PREFIX}{blob_id}-{secrets.token_hex(4)}"
        try:
            with open(tmp, "xb") as out:
                yield tmp, out
                out.flush()
                os.fsync(out.fileno())
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    @contextmanager
    def _changing(self) -> Iterator[None]:
        """Hold the directory's change lock (across processes and threads)."""
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _install(self, tmp: Path, blob_id: str, *, replacing: os.stat_result | None = None) -> bool:
        """Rename ``tmp`` over the blob; with ``replacing``, only if the blob is still that file."""
        final = self.path_for(blob_id)
        try:
            with self._changing():
                if replacing is not None:
                    try:
                        current = os.stat(final)
                    except FileNotFoundError:
                        current = None
                    if current is None or (current.st_dev, current.st_ino) != (replacing.st_dev, replacing.st_ino):
                        tmp.unlink()
                        return False
                replace_durably(tmp, final)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return True

    def write(
        self, blob_id: str, source: BinaryIO, *, label: DocumentLabel, expected_sha256: str | None = None
    ) -> int:
        """Encrypt ``source`` into the blob ``blob_id``; return the plaintext size.

        If ``expected_sha256`` is given and the bytes read differ, nothing is
        stored and :class:`FileChanged` is raised.
        """

        def unchanged(sha256: str) -> None:
            if expected_sha256 is not None and sha256 != expected_sha256:
                raise FileChanged("the file changed while it was being added; try again")

        return self.seal(blob_id, source, label=label, check=unchanged).size

    def write_bytes(self, blob_id: str, data: bytes, *, label: DocumentLabel) -> int:
        return self.write(blob_id, io.BytesIO(data), label=label)

    def reseal(self, blob_id: str, label: DocumentLabel, *, expected_sha256: str) -> bool:
        """Give the blob a new label (after a rename), upgrading a format-1 blob to
        format 2 on the way; False, with nothing changed, when it is gone or no
        longer holds the bytes ``expected_sha256`` names (updated meanwhile).

        A format-2 blob keeps its encrypted content as it is (only the label is
        sealed again); a format-1 blob is decrypted and sealed again whole.
        """
        try:
            current = self.open(blob_id)
        except BlobCorrupt:
            if not self.path_for(blob_id).exists():
                return False
            raise
        with current:
            stored = current.label()
            if stored is not None:
                if stored.content_hash != expected_sha256:
                    return False
                relabelled = StoredLabel(blob_id, label, stored.content_hash, stored.size, time.time())
                with self._temp_file(blob_id) as (tmp, out):
                    current.copy_content(out)
                    out.write(current.sealer.seal_label(relabelled))
            else:
                def same_bytes(sha256: str) -> None:
                    if sha256 != expected_sha256:
                        raise FileChanged("the stored source does not hold the bytes the catalog names")

                try:
                    _, tmp = self._seal_to_temp(blob_id, _PlaintextReader(current.plaintext()), label, same_bytes)
                except FileChanged:
                    return False
            return self._install(tmp, blob_id, replacing=current.stat)

    def format_version(self, blob_id: str) -> int | None:
        """The format of a stored blob (1 or 2), or None when it is missing or not a blob."""
        try:
            with open(self.path_for(blob_id), "rb") as handle:
                header = handle.read(5)
        except FileNotFoundError:
            return None
        return header[4] if len(header) == 5 and header[:4] == MAGIC else None

    def iter_plaintext(self, blob_id: str) -> Iterator[bytes]:
        """Yield the decrypted segments; raise :class:`BlobCorrupt` on any tampering."""
        with self.open(blob_id) as blob:
            yield from blob.plaintext()

    def verify(self, blob_id: str) -> int:
        """Authenticate a whole blob without keeping it; return its plaintext size."""
        with self.open(blob_id) as blob:
            return blob.authenticate().size

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
        path = self.path_for(blob_id)
        with self._changing():
            try:
                path.unlink()
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
