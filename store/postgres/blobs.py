"""Encrypted blobs in the PostgreSQL store: ``store.blobs.BlobStore`` with rows
for files.

The format and the cryptography are those of :mod:`store.blobs` (its own
functions, not a copy): the header (magic, version, segment size, salt, nonce
prefix) is the ``blob`` row, and each AES-GCM record of a 64 KiB segment is a
``blob_segment`` row numbered by its nonce counter. Header and records laid
end to end are byte for byte the file ``store.blobs`` would have written, so
a blob moves between the stores without being decrypted, and everything the
file format detects (a swapped blob, reordered, missing or truncated
segments, another key) is detected here the same way.

Writes stream the source through ``COPY`` and reads stream the records
through a server-side cursor: memory stays bounded by a few segments for any
file size. A write is one transaction: a reader sees the old blob or the new
one, never a part, and a write that fails (or whose ``check`` refuses the
bytes) leaves nothing behind. Given ``conn``, a write joins the caller's
transaction, so a document row and its blob can commit together.
"""

from __future__ import annotations

import hashlib
import io
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import BinaryIO

import psycopg

from store.blobs import (
    LEGACY_VERSION,
    SEGMENT_SIZE,
    TAG_SIZE,
    DocumentLabel,
    FileChanged,
    SealedBlob,
    SegmentCipher,
    new_header,
    read_header,
)
from store.errors import BlobCorrupt, StoreError
from store.files import SourceFile

# Where a blob store gets a connection: ``psycopg_pool.ConnectionPool.connection``,
# or a function returning a new connection (closed when the block ends).
ConnectionSource = Callable[[], AbstractContextManager[psycopg.Connection]]
# Records fetched from the server per round trip while reading (bounded memory).
_READ_BATCH = 8


class PostgresBlobStore:
    """Encrypted blobs in ``blob`` and ``blob_segment`` rows, one blob per id."""

    def __init__(self, connection: ConnectionSource, node_key: bytes, *, reader: ConnectionSource | None = None) -> None:
        """``reader`` (default ``connection``) is where a blob is read from as it
        is consumed: a connection held, with a transaction open, until the
        reading ends."""
        self._connection = connection
        self._reader = reader or connection
        self._node_key = node_key

    def seal(
        self,
        blob_id: str,
        source: BinaryIO | SourceFile,
        *,
        check: Callable[[str], None] | None = None,
        conn: psycopg.Connection | None = None,
    ) -> SealedBlob:
        """Encrypt ``source`` into the blob ``blob_id`` in one pass, hashing what
        is encrypted (see ``store.blobs.BlobStore.seal``). ``check(sha256)`` runs
        after the last byte was read and before the commit; if it raises,
        nothing is stored. An existing blob of that id is replaced."""
        if not blob_id:
            raise ValueError("invalid blob id")
        header = new_header(LEGACY_VERSION)
        cipher = SegmentCipher.of(self._node_key, header, blob_id)
        digest = hashlib.sha256()
        size = 0
        counter = 0
        given: AbstractContextManager[psycopg.Connection] = nullcontext(conn) if conn is not None else self._connection()
        with given as db, db.transaction():
            db.execute("DELETE FROM blob WHERE id = %s", (blob_id,))
            db.execute(
                "INSERT INTO blob(id, header, size, segments, created_at) VALUES (%s, %s, 0, 0, %s)",
                (blob_id, header, time.time()),
            )
            with db.cursor().copy("COPY blob_segment (blob_id, counter, record) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(["text", "int4", "bytea"])
                current = source.read(SEGMENT_SIZE)
                while True:
                    following = source.read(SEGMENT_SIZE) if len(current) == SEGMENT_SIZE else b""
                    last = not following
                    digest.update(current)
                    size += len(current)
                    copy.write_row((blob_id, counter, cipher.seal(counter, last, current)))
                    if last:
                        break
                    counter += 1
                    current = following
            if check is not None:
                check(digest.hexdigest())
            db.execute("UPDATE blob SET size = %s, segments = %s WHERE id = %s", (size, counter + 1, blob_id))
        return SealedBlob(size, digest.hexdigest())

    def write(
        self, blob_id: str, source: BinaryIO, *, label: DocumentLabel | None = None, expected_sha256: str | None = None
    ) -> int:
        """Encrypt ``source`` into the blob; return the plaintext size. Raises
        :class:`store.blobs.FileChanged` (storing nothing) when the bytes read
        do not hash to ``expected_sha256``.

        Takes the file store's call; ``label`` is not sealed yet, because the
        rows keep the unlabelled format 1 (see the module docstring of
        :mod:`store.blobs`)."""

        def unchanged(sha256: str) -> None:
            if expected_sha256 is not None and sha256 != expected_sha256:
                raise FileChanged("the file changed while it was being added; try again")

        return self.seal(blob_id, source, check=unchanged).size

    def write_bytes(self, blob_id: str, data: bytes, *, label: DocumentLabel | None = None) -> int:
        return self.write(blob_id, io.BytesIO(data), label=label)

    def iter_plaintext(self, blob_id: str) -> Iterator[bytes]:
        """Yield the decrypted segments; raise :class:`BlobCorrupt` on any tampering.

        The records come from one snapshot (a transaction held while the
        caller reads), so a blob replaced meanwhile is read whole as it was."""
        with self._reader() as conn, conn.transaction():
            row = conn.execute("SELECT header FROM blob WHERE id = %s", (blob_id,)).fetchone()
            if row is None:
                raise BlobCorrupt("the stored source of this document is missing")
            header = bytes(row[0])
            segment_size = read_header(header, LEGACY_VERSION)
            cipher = SegmentCipher.of(self._node_key, header, blob_id)
            with conn.cursor(name=f"blob_{secrets.token_hex(6)}") as cursor:
                cursor.itersize = _READ_BATCH
                cursor.execute("SELECT record FROM blob_segment WHERE blob_id = %s ORDER BY counter", (blob_id,))
                records = (bytes(r[0]) for r in cursor)
                counter = 0
                current = next(records, b"")
                while True:
                    following = next(records, None)
                    last = following is None
                    if len(current) > segment_size + TAG_SIZE:
                        raise BlobCorrupt("the stored source of this document is damaged (bad segment)")
                    yield cipher.open(counter, last, current)
                    if following is None:
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

    def delete(self, blob_id: str, *, conn: psycopg.Connection | None = None) -> bool:
        """Delete a blob (in the caller's transaction when ``conn`` is given)."""
        given: AbstractContextManager[psycopg.Connection] = nullcontext(conn) if conn is not None else self._connection()
        with given as db:
            return db.execute("DELETE FROM blob WHERE id = %s", (blob_id,)).rowcount > 0

    def blob_ids(self) -> set[str]:
        with self._connection() as conn:
            return {row[0] for row in conn.execute("SELECT id FROM blob").fetchall()}

    def remove_temp_files(self, *, older_than: float) -> int:
        """Nothing to do: an interrupted write is a rolled-back transaction (kept
        so the blob stores answer the same calls)."""
        return 0
