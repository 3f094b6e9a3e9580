"""The data directory: checked before anything in it is used, and tied to its catalog.

A data directory holds the node key, the encrypted sources (``blobs/``) and the
catalog (``kb.sqlite3``). The sources are the one thing that must survive
anything, and the catalog is what calls a source an orphan; so before a
command uses the catalog, this module establishes that it is whole and that it
is the catalog this directory was initialised with:

- ``node.fingerprint``, beside ``node.key``, records the key's fingerprint and
  the random id of the catalog made at initialisation. A catalog that is
  missing, empty, made with another key or belonging to another directory is
  told apart from a fresh directory by this file, not by the catalog's silence.
- A fresh catalog is made only in a fresh directory: no key, no fingerprint
  file, no blobs, and no catalog (or an empty one).

Everything here only looks, except :func:`prepare_home` (which creates a
missing directory for a command that writes) and
:func:`write_fingerprint_file`.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from store.db import catalog_uri
from store.errors import CatalogProblem, DataDirectoryProblem, KeyProblem, NoKnowledgeBase
from store.files import create_once
from store.keys import KEY_FILE_NAME, seal_matches
from store.migrations import LATEST_VERSION, newer_schema_problem

DB_FILE_NAME = "kb.sqlite3"
BLOB_DIR_NAME = "blobs"
FINGERPRINT_FILE_NAME = "node.fingerprint"
FINGERPRINT_KEY = "node_key_fingerprint"
CATALOG_ID_KEY = "catalog_id"
CATALOG_SEAL_KEY = "catalog_id_seal"  # store.keys.catalog_seal of the catalog id
_FINGERPRINT_FORMAT = 1
_SQLITE_HEADER = b"SQLite format 3\x00"
# The end of every refusal here: the operator's next step, and the reassurance.
DOCTOR_HINT = "(kbtui doctor explains; nothing was changed)"


@dataclass(frozen=True)
class Fingerprint:
    """What ``node.fingerprint`` records: the key's fingerprint and the catalog's id."""

    key_fingerprint: bytes
    catalog_id: str


@dataclass(frozen=True)
class CatalogFacts:
    """What ``kb.sqlite3`` is, read without changing it.

    ``state`` is ``missing``, ``empty`` (zero bytes), ``unreadable`` (not an
    SQLite database, or damaged: ``detail`` says how) or ``present``.
    """

    state: str
    detail: str = ""
    tables: int = 0
    version: int = 0
    key_fingerprint: bytes | None = None
    catalog_id: str | None = None
    catalog_seal: bytes | None = None
    has_documents: bool = False
    # Asked only when node.fingerprint is missing: does the catalog know (as a
    # document, or a removed one) any source in blobs/? None: not asked.
    knows_a_source: bool | None = None

    @property
    def records_nothing(self) -> bool:
        """No table at all, or a kbtui schema that was never initialised: nothing to lose."""
        if self.state in ("missing", "empty"):
            return True
        return self.state == "present" and self.key_fingerprint is None and not self.has_documents and (
            self.tables == 0 or self.version > 0
        )


@dataclass(frozen=True)
class DirectoryFacts:
    key_present: bool
    fingerprint: Fingerprint | None
    fingerprint_damaged: bool
    has_blobs: bool
    catalog: CatalogFacts
    # kb.sqlite3 missing or empty while its write-ahead log still holds pages.
    orphaned_wal: bool

    @property
    def fresh(self) -> bool:
        """Nothing here yet: the only state in which a new catalog may be made."""
        return (
            not self.key_present
            and self.fingerprint is None
            and not self.fingerprint_damaged
            and not self.has_blobs
            and not self.orphaned_wal
            and self.catalog.records_nothing
        )


def prepare_home(home: Path, *, create: bool) -> bool:
    """Check the data directory, creating it (mode 0700) when ``create`` and absent.

    Returns True when it was created here. The mode of a directory we did not
    create is never changed; one that others can write is refused (anyone who
    can write it can replace the catalog or the key).
    """
    try:
        info = home.stat()
    except FileNotFoundError:
        if not create:
            raise NoKnowledgeBase(
                f"no knowledge base in {home} (the data directory does not exist); "
                "add documents with kbtui add, or point KBTUI_HOME at the right directory"
            ) from None
        home.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(home, 0o700)
        except FileExistsError:
            return prepare_home(home, create=create)  # another process made it first
        os.chmod(home, 0o700)  # ours: exactly owner-only, whatever the umask
        return True
    except NotADirectoryError:
        raise DataDirectoryProblem(f"the data directory {home} is inside a file, not a directory; fix KBTUI_HOME") from None
    if not stat.S_ISDIR(info.st_mode):
        raise DataDirectoryProblem(f"the data directory {home} is a file, not a directory; fix KBTUI_HOME")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o022:
        raise DataDirectoryProblem(
            f"the data directory {home} is writable by other users (mode {mode:04o}); use a "
            "directory only you can write (chmod go-w it, or point KBTUI_HOME elsewhere)"
        )
    return False


def require_writable(home: Path) -> None:
    """Refuse up front, for a command that writes, a data directory (or the
    catalog or blobs/ in it) that cannot be written: a read-only mount, or
    modes that deny it. Otherwise the command would start and fail half-way."""
    for path in (home, home / DB_FILE_NAME, home / BLOB_DIR_NAME):
        if os.path.exists(path) and not os.access(path, os.W_OK):
            where = "the data directory" if path == home else f"{path.name} in the data directory"
            raise DataDirectoryProblem(
                f"{where} {home} cannot be written (read-only); this command writes, while "
                "search, ls, show, status and doctor only read; nothing was changed"
            )


def can_write(home: Path) -> bool:
    """Whether the derived files (the vector index cache, logs) can be written
    here; False on a read-only mount."""
    return all(os.access(path, os.W_OK) for path in (home, home / "vectors") if os.path.exists(path))


def observe(home: Path, *, snapshot: bool = False) -> DirectoryFacts:
    """Look at the data directory without changing it (``snapshot``: see
    :func:`connect_read_only`)."""
    fingerprint, damaged = read_fingerprint_file(home)
    db_path = home / DB_FILE_NAME
    has_blobs = any(True for _ in blob_names(home))
    # Without node.fingerprint the sources are the directory's remaining witness of its catalog.
    unvouched = fingerprint is None and not damaged and has_blobs
    catalog = inspect_catalog(db_path, snapshot=snapshot, sources=list(blob_names(home)) if unvouched else None)
    wal = db_path.with_name(db_path.name + "-wal")
    return DirectoryFacts(
        key_present=os.path.lexists(home / KEY_FILE_NAME),
        fingerprint=fingerprint,
        fingerprint_damaged=damaged,
        has_blobs=has_blobs,
        catalog=catalog,
        orphaned_wal=catalog.state in ("missing", "empty") and _size(wal) > 0,
    )


def blob_names(home: Path) -> Iterator[str]:
    """Names of the stored blobs (lazily: a first one answers "are there any")."""
    try:
        with os.scandir(home / BLOB_DIR_NAME) as entries:
            for entry in entries:
                if not entry.name.startswith("."):
                    yield entry.name
    except (FileNotFoundError, NotADirectoryError):
        return


def inspect_catalog(path: Path, *, snapshot: bool = False, sources: Sequence[str] | None = None) -> CatalogFacts:
    """What the catalog file holds, read through a read-only connection; with
    ``sources`` (blob names), whether it knows any of them."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return CatalogFacts("missing")
    except OSError as exc:
        return CatalogFacts("unreadable", os.strerror(exc.errno or 0).lower())
    if not stat.S_ISREG(info.st_mode):
        return CatalogFacts("unreadable", "not a regular file")
    if info.st_size == 0:
        return CatalogFacts("empty")
    try:
        with open(path, "rb") as handle:
            if handle.read(len(_SQLITE_HEADER)) != _SQLITE_HEADER:
                return CatalogFacts("unreadable", "not an SQLite database")
    except OSError as exc:
        return CatalogFacts("unreadable", os.strerror(exc.errno or 0).lower())
    try:
        connection = connect_read_only(path, snapshot=snapshot)
    except sqlite3.Error as exc:
        return CatalogFacts("unreadable", sqlite_detail(exc))
    try:
        return _catalog_facts(connection, sources)
    except sqlite3.Error as exc:
        return CatalogFacts("unreadable", sqlite_detail(exc))
    finally:
        connection.close()


def connect_read_only(path: Path, *, snapshot: bool = False) -> sqlite3.Connection:
    """A read-only sqlite3 connection that never creates the catalog.

    ``mode=ro`` where SQLite can use or create the ``-wal``/``-shm`` files; on
    a read-only mount with no ``-wal`` content (closed cleanly), ``immutable``,
    which is then exact. ``snapshot`` (kbtui doctor, when no node is running)
    goes straight to ``immutable`` whenever the ``-wal`` holds nothing, so that
    not even SQLite's shared-memory file is touched.
    """
    wal = path.with_name(path.name + "-wal")
    nothing_in_wal = _size(wal) == 0
    modes = ["immutable"] if snapshot and nothing_in_wal else ["ro"]
    if modes == ["ro"] and nothing_in_wal:
        modes.append("immutable")
    error: sqlite3.Error | None = None
    for mode in modes:
        connection = sqlite3.connect(catalog_uri(path, mode), uri=True, timeout=15)
        try:
            connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return connection
        except sqlite3.Error as exc:
            connection.close()
            error = exc
    assert error is not None
    raise error


def _catalog_facts(connection: sqlite3.Connection, sources: Sequence[str] | None) -> CatalogFacts:
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    version = 0
    if "schema_version" in tables:
        version = connection.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] or 0
    meta: dict[str, bytes] = {}
    if "node_meta" in tables:
        meta = {
            key: bytes(value)
            for key, value in connection.execute(
                "SELECT key, value FROM node_meta WHERE key IN (?, ?, ?)",
                (FINGERPRINT_KEY, CATALOG_ID_KEY, CATALOG_SEAL_KEY),
            )
        }
    has_documents = "document" in tables and connection.execute("SELECT EXISTS (SELECT 1 FROM document)").fetchone()[0] == 1
    catalog_id = meta.get(CATALOG_ID_KEY)
    return CatalogFacts(
        "present",
        tables=len(tables),
        version=version,
        key_fingerprint=meta.get(FINGERPRINT_KEY),
        catalog_id=catalog_id.decode("ascii", "replace") if catalog_id is not None else None,
        catalog_seal=meta.get(CATALOG_SEAL_KEY),
        has_documents=has_documents,
        knows_a_source=None if sources is None else _knows_any(connection, tables, sources),
    )


def _knows_any(connection: sqlite3.Connection, tables: set[str], ids: Sequence[str]) -> bool:
    """Whether any of ``ids`` is a document of the catalog or one it recorded as removed."""
    lists = [table for table in ("document", "removed_document") if table in tables]
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        marks = ",".join("?" * len(part))
        for table in lists:
            if connection.execute(f"SELECT EXISTS (SELECT 1 FROM {table} WHERE id IN ({marks}))", part).fetchone()[0]:
                return True
    return False


# SQLite's words for a catalog that cannot be read or written: fixed strings
# that carry no data, so they may be shown.
SQLITE_CONDITIONS = (
    "file is not a database",
    "database disk image is malformed",
    "unable to open database file",
    "disk I/O error",
    "attempt to write a readonly database",
)


def sqlite_detail(exc: BaseException) -> str:
    """SQLite's words for why a catalog cannot be used, when they are one of
    :data:`SQLITE_CONDITIONS`; otherwise just the error's type."""
    message = str(exc).split("\n")[0]
    return message if message in SQLITE_CONDITIONS else type(exc).__name__


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def read_fingerprint_file(home: Path) -> tuple[Fingerprint | None, bool]:
    """The recorded fingerprint, and whether the file exists but cannot be understood."""
    path = home / FINGERPRINT_FILE_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, False
    except OSError:
        return None, True
    try:
        payload = json.loads(raw)
        if payload["format"] != _FINGERPRINT_FORMAT:
            return None, True
        fingerprint = Fingerprint(bytes.fromhex(payload["key_fingerprint"]), str(payload["catalog_id"]))
    except (ValueError, KeyError, TypeError):
        return None, True
    return fingerprint, False


def write_fingerprint_file(home: Path, fingerprint: Fingerprint) -> Fingerprint:
    """Record ``fingerprint`` beside the key (mode 0600, never overwritten).

    Returns what the file holds afterwards: another process may have written it first.
    """
    path = home / FINGERPRINT_FILE_NAME
    payload = json.dumps(
        {
            "format": _FINGERPRINT_FORMAT,
            "key_fingerprint": fingerprint.key_fingerprint.hex(),
            "catalog_id": fingerprint.catalog_id,
        }
    ).encode("ascii")
    create_once(path, payload)  # the first record stands
    recorded, damaged = read_fingerprint_file(home)
    if recorded is None or damaged:
        raise CatalogProblem(f"{FINGERPRINT_FILE_NAME} is damaged; restore it from a backup {DOCTOR_HINT}")
    return recorded


@contextmanager
def directory_lock(home: Path, *, exclusive: bool) -> Iterator[None]:
    """Serialise initialisation against everything that looks at a directory
    mid-initialisation (an flock on the directory itself; works read-only)."""
    fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def recorded_key_fingerprint(facts: DirectoryFacts) -> bytes:
    """The key fingerprint this directory records, after refusing every state in
    which the catalog cannot be used at all: unreadable, not kbtui's, newer
    than this kbtui, or missing, empty or never initialised while the
    directory holds a key, sources or a fingerprint record.

    Called only for a directory that is not fresh. Raises
    :class:`CatalogProblem` (or :class:`KeyProblem` when key and catalog are
    both gone) with what to do.
    """
    catalog = facts.catalog
    if facts.fingerprint_damaged:
        raise CatalogProblem(
            f"{FINGERPRINT_FILE_NAME} is damaged, so the catalog cannot be checked against this "
            f"directory; restore it from a backup {DOCTOR_HINT}"
        )
    if catalog.state == "unreadable":
        raise CatalogProblem(
            f"the catalog ({DB_FILE_NAME}) cannot be read ({catalog.detail}); restore it from a "
            f"backup {DOCTOR_HINT}"
        )
    if catalog.state == "present" and catalog.tables and not catalog.version:
        raise CatalogProblem(f"{DB_FILE_NAME} is not a kbtui catalog; restore the real one from a backup {DOCTOR_HINT}")
    if catalog.version > LATEST_VERSION:
        raise newer_schema_problem(catalog.version)
    recorded = facts.fingerprint.key_fingerprint if facts.fingerprint else catalog.key_fingerprint
    if recorded is None and not facts.key_present:
        raise KeyProblem(
            f"the node key ({KEY_FILE_NAME}) and the catalog ({DB_FILE_NAME}) are missing but "
            f"encrypted sources exist; restore both from a backup {DOCTOR_HINT}"
        )
    if recorded is None or catalog.key_fingerprint is None:
        raise CatalogProblem(_missing_catalog_message(facts))
    return recorded


def refuse_foreign_catalog(facts: DirectoryFacts, key: bytes) -> None:
    """Refuse a catalog that is not this directory's own: one whose id is not
    sealed with ``key`` (it only copied the key's public fingerprint), one
    that is not the one ``node.fingerprint`` names (made with another key, or
    another directory's catalog), and, when ``node.fingerprint`` is missing,
    one that knows none of the sources in ``blobs/``. Call it after the key
    has been checked, so that a wrong key is reported as such."""
    recorded = facts.fingerprint
    catalog = facts.catalog
    if recorded is not None and (
        catalog.key_fingerprint != recorded.key_fingerprint
        or (catalog.catalog_id is not None and catalog.catalog_id != recorded.catalog_id)
    ):
        raise CatalogProblem(
            f"the catalog ({DB_FILE_NAME}) is not the one this data directory was initialised "
            f"with ({FINGERPRINT_FILE_NAME} names another); restore this directory's own from a "
            f"backup {DOCTOR_HINT}"
        )
    if catalog.catalog_id is not None and catalog.catalog_seal is not None and not seal_matches(
        key, catalog.catalog_id, catalog.catalog_seal
    ):
        raise CatalogProblem(
            f"the catalog ({DB_FILE_NAME}) was not made with this data directory's node key; restore this "
            f"directory's own from a backup {DOCTOR_HINT}"
        )
    # Without node.fingerprint (a directory from before it, or one whose record
    # was removed), the sources are the witness: an own catalog knows some.
    if recorded is None and catalog.knows_a_source is False:
        raise CatalogProblem(
            f"the catalog ({DB_FILE_NAME}) knows none of the encrypted sources in {BLOB_DIR_NAME}/ and "
            f"{FINGERPRINT_FILE_NAME} is missing, so it is not taken for this directory's own; restore "
            f"this directory's catalog (or {FINGERPRINT_FILE_NAME}) from a backup {DOCTOR_HINT}"
        )


def _missing_catalog_message(facts: DirectoryFacts) -> str:
    catalog = facts.catalog
    what = {"missing": "is missing", "empty": "is empty"}.get(catalog.state, "records no node key")
    if facts.orphaned_wal:
        what += " (its -wal file is still there)"
    held = [name for name, present in (
        ("encrypted sources", facts.has_blobs),
        ("a node key", facts.key_present),
        (FINGERPRINT_FILE_NAME, facts.fingerprint is not None),
    ) if present]
    holds = ", ".join(held[:-1]) + " and " + held[-1] if len(held) > 1 else (held[0] if held else "earlier data")
    return (
        f"the catalog ({DB_FILE_NAME}) {what}, but this data directory holds {holds}; "
        f"restore {DB_FILE_NAME} from a backup {DOCTOR_HINT}"
    )
