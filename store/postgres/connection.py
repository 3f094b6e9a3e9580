"""Connections to the PostgreSQL store: opened in bounded time, named without
their password, and failing with one line in the store's own words.

Every failure the operator can meet (server down, unreachable, wrong password,
missing database, a statement that took too long, a full disk, a connection
lost mid-transaction) becomes a :class:`ServerProblem` whose message names the
server (host, port, database) and never the password. The server's and
libpq's own texts are never passed on: they can echo parts of a connection
string or of a statement. The exit code is the storage one (3).

Connections are in autocommit mode: a read holds no transaction open, and
every write opens its own with ``conn.transaction()``.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import psycopg
from pgvector.psycopg import register_vector
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import PoolTimeout

from store.errors import StoreError, StoreUnavailable

log = logging.getLogger(__name__)

URL_SCHEMES = ("postgresql", "postgres")
DEFAULT_CONNECT_TIMEOUT_S = 5
DEFAULT_STATEMENT_TIMEOUT_MS = 30_000
# As long as the SQLite store waits for its write lock (store.db.BUSY_TIMEOUT_MS).
DEFAULT_LOCK_TIMEOUT_MS = 15_000
MASK = "***"
_CONNINFO_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


class ServerProblem(StoreUnavailable):
    """The PostgreSQL server cannot be used right now (unreachable, refused,
    too slow, full, or the connection was lost): a storage condition."""


def is_postgres_url(text: str) -> bool:
    """Whether ``text`` names a PostgreSQL store (``postgresql://`` or ``postgres://``)."""
    return text.split("://", 1)[0].lower() in URL_SCHEMES and "://" in text


def masked_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (in the user part, in a
    ``password=`` query parameter, or in a ``key=value`` connection string)."""
    if "://" not in url:
        return _CONNINFO_PASSWORD.sub(lambda m: m.group(1) + MASK, url)
    scheme, rest = url.split("://", 1)
    end = len(rest)
    for stop in "/?#":
        position = rest.find(stop)
        if position != -1:
            end = min(end, position)
    authority, tail = rest[:end], rest[end:]
    # The last "@" ends the user part: an unencoded "@" in a password stays masked.
    user_part, at, host = authority.rpartition("@")
    if at and ":" in user_part:
        authority = f"{user_part.split(':', 1)[0]}:{MASK}@{host}"
    return f"{scheme}://{authority}{_QUERY_PASSWORD.sub(lambda m: m.group(1) + MASK, tail)}"


def server_name(url: str) -> str:
    """How messages name the server: ``host:port/database`` (a socket directory
    stands as the host), never the user's password."""
    try:
        info = conninfo_to_dict(url)
    except psycopg.Error:
        return "the PostgreSQL server (its URL could not be read)"
    host = str(info.get("host") or "localhost")
    port = str(info.get("port") or "5432")
    database = str(info.get("dbname") or info.get("user") or "postgres")
    return f"{host}:{port}/{database}"


@dataclass(frozen=True)
class PostgresSettings:
    """Where the store lives and how long to wait for it. ``repr`` masks the password."""

    url: str = field(repr=False)
    connect_timeout_s: int = DEFAULT_CONNECT_TIMEOUT_S
    statement_timeout_ms: int = DEFAULT_STATEMENT_TIMEOUT_MS
    lock_timeout_ms: int = DEFAULT_LOCK_TIMEOUT_MS
    application_name: str = "kbtui"
    read_only: bool = False

    def __post_init__(self) -> None:
        if not is_postgres_url(self.url):
            raise StoreError("a PostgreSQL store is named by a URL that starts with postgresql://")
        if self.connect_timeout_s < 1 or self.statement_timeout_ms < 1 or self.lock_timeout_ms < 1:
            raise StoreError("the PostgreSQL timeouts must be positive")

    @property
    def masked_url(self) -> str:
        return masked_url(self.url)

    @property
    def server(self) -> str:
        return server_name(self.url)

    def __repr__(self) -> str:
        return (
            f"PostgresSettings(url={self.masked_url!r}, connect_timeout_s={self.connect_timeout_s}, "
            f"statement_timeout_ms={self.statement_timeout_ms}, lock_timeout_ms={self.lock_timeout_ms})"
        )


def connection_arguments(settings: PostgresSettings) -> tuple[str, dict[str, object]]:
    """The connection string and ``psycopg.connect`` keywords of every connection
    to the store (a direct one, or a pool's)."""
    options = f"-c statement_timeout={settings.statement_timeout_ms} -c lock_timeout={settings.lock_timeout_ms}"
    if settings.read_only:
        # The server itself refuses a write from a command that only reads.
        options += " -c default_transaction_read_only=on"
    # TCP keepalives: a server that vanishes mid-query (cable, power) is noticed
    # in about idle + interval * count = 25 s instead of the kernel's two hours.
    keepalives = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3}
    keywords: dict[str, object] = {
        "autocommit": True,
        "connect_timeout": settings.connect_timeout_s,
        "application_name": settings.application_name,
        "options": options,
    }
    return make_conninfo(settings.url, **keepalives), keywords


def connect(settings: PostgresSettings) -> psycopg.Connection:
    """A new autocommit connection, or :class:`ServerProblem` within about
    ``connect_timeout_s`` (per address the host name resolves to)."""
    try:
        conninfo, keywords = connection_arguments(settings)
        conn = psycopg.connect(conninfo, **keywords)  # type: ignore[arg-type]
    except psycopg.Error as exc:
        raise connect_problem(settings, exc) from None
    log.debug("connected to the PostgreSQL store at %s", settings.server)
    return conn


class DriverLogs(logging.Filter):
    """psycopg's and its pool's own log records, kept to their first words.

    Their messages carry libpq's text (a socket path, a host, whatever the
    server said), which this module never passes on; a connection the pool
    could not make is the operator's business through the one-line error of
    the call that needed it, so its warning becomes an informational line
    of the log file instead of a second line on the terminal."""

    def filter(self, record: logging.LogRecord) -> bool:
        first_words = record.getMessage().split(": ", 1)[0]
        record.msg, record.args = first_words, None
        if record.levelno == logging.WARNING:
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


DRIVER_LOGGERS = ("psycopg", "psycopg.pool")
_driver_logs = DriverLogs()
for _name in DRIVER_LOGGERS:
    logging.getLogger(_name).addFilter(_driver_logs)


def register_types(conn: psycopg.Connection) -> None:
    """Teach a connection pgvector's types (numpy arrays in and out), once the
    schema exists (:func:`store.postgres.migrations.apply_migrations`); a
    pool's ``configure`` callback."""
    register_vector(conn)


def connect_problem(settings: PostgresSettings, exc: psycopg.Error) -> ServerProblem:
    """Why a connection could not be opened, in one line naming the server."""
    server = settings.server
    state = exc.sqlstate or ""
    words = str(exc).lower()
    # The operator gets the one line below; the log file keeps the type.
    log.info("cannot connect to the PostgreSQL store at %s (%s %s)", server, type(exc).__name__, state)
    if isinstance(exc, psycopg.ProgrammingError) and not state:
        return ServerProblem("the PostgreSQL URL cannot be read; check KBTUI_DATABASE_URL")
    # A failed connection carries no SQLSTATE: libpq's words tell the cases apart.
    if state in ("28P01", "28000") or "authentication failed" in words or "no password supplied" in words:
        return ServerProblem(
            f"the PostgreSQL server {server} refused the login; check the user and password in KBTUI_DATABASE_URL"
        )
    if state == "3D000" or ("database" in words and "does not exist" in words):
        return ServerProblem(f"the PostgreSQL server {server} has no such database; create it first")
    if state == "53300" or "too many clients" in words or "remaining connection slots" in words:
        return ServerProblem(f"the PostgreSQL server {server} has no free connection slot; try again")
    if state.startswith("57P") or "starting up" in words or "shutting down" in words:
        return ServerProblem(f"the PostgreSQL server {server} is starting or shutting down; try again")
    if "timeout" in words or "timed out" in words:
        return ServerProblem(
            f"the PostgreSQL server {server} did not answer within {settings.connect_timeout_s} s; "
            "check that it runs and is reachable"
        )
    if "refused" in words:
        return ServerProblem(f"the PostgreSQL server {server} refused the connection; check that it runs")
    return ServerProblem(f"the PostgreSQL server {server} cannot be reached; check that it runs and is reachable")


def storage_problem(exc: BaseException, settings: PostgresSettings) -> StoreError | None:
    """An operator-facing error for a server condition met by a statement, or
    None when ``exc`` is something else (a bug: let it rise). Mirrors
    :func:`store.errors.storage_problem`."""
    if not isinstance(exc, psycopg.Error):
        return None
    server = settings.server
    if isinstance(exc, pg_errors.QueryCanceled):
        return ServerProblem(
            f"the PostgreSQL server {server} did not finish within {settings.statement_timeout_ms} ms "
            "(statement timeout); nothing was changed"
        )
    if isinstance(exc, pg_errors.LockNotAvailable | pg_errors.DeadlockDetected | pg_errors.SerializationFailure):
        return ServerProblem(f"the PostgreSQL database {server} stayed locked by another kbtui process; try again")
    if isinstance(exc, pg_errors.DiskFull):
        return ServerProblem(f"no space left for the PostgreSQL database {server} (disk full); nothing was changed")
    if isinstance(exc, pg_errors.OutOfMemory | pg_errors.InsufficientResources):
        return ServerProblem(f"the PostgreSQL server {server} is out of resources; nothing was changed")
    if isinstance(exc, pg_errors.AdminShutdown | pg_errors.CrashShutdown | pg_errors.CannotConnectNow):
        return ServerProblem(f"the PostgreSQL server {server} shut down; the unfinished change was rolled back")
    if isinstance(exc, PoolTimeout):
        return ServerProblem(
            f"the PostgreSQL server {server} cannot be reached (no connection within {settings.connect_timeout_s} s); "
            "check that it runs and is reachable"
        )
    if isinstance(exc, pg_errors.ReadOnlySqlTransaction):
        return ServerProblem(f"this command only reads, but tried to change the PostgreSQL database {server}")
    if isinstance(exc, psycopg.OperationalError):
        return ServerProblem(
            f"the connection to the PostgreSQL server {server} was lost; the unfinished change was rolled back"
        )
    return None


@contextlib.contextmanager
def translated_errors(settings: PostgresSettings) -> Iterator[None]:
    """Server conditions met inside the block as one line naming the server
    (:func:`storage_problem`); any other error rises unchanged."""
    try:
        yield
    except psycopg.Error as exc:
        problem = storage_problem(exc, settings)
        if problem is None:
            raise
        raise problem from None
