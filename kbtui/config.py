"""Configuration: defaults, overridden by ``$KBTUI_HOME/config.toml`` and env vars."""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbtui.chunking import ChunkSettings
from kbtui.embedding import VECTOR_MODES
from kbtui.errors import KbtuiError
from kbtui.extract.limits import ExtractionLimits, OcrSettings
from kbtui.loopback import is_loopback_url
from kbtui.nesting import nesting_depth
from kbtui.retrieval.fusion import FUSION_STRATEGIES
from kbtui.settings import CONFIG_FILE_NAME, InvalidSetting, setting, validate_settings
from store.files import Refusal, SourceRefused, open_source

EMBEDDING_PROVIDERS = ("local", "ollama", "hash")
# Where document text and queries go: on this machine unless allow_cloud_model_access.
MODEL_ENDPOINT_SETTINGS = ("ollama_host", "chat_host", "reranker_url")
DATABASE_URL_ENV = "KBTUI_DATABASE_URL"
POSTGRES_URL_SCHEMES = ("postgresql", "postgres")
# auto: file events where the filesystem delivers them, else a periodic scan.
SOURCE_WATCH_MODES = ("auto", "polling", "off")


def kbtui_home() -> Path:
    """The data directory: ``$KBTUI_HOME`` or the platform user-data dir."""
    configured = os.environ.get("KBTUI_HOME")
    if configured:
        return Path(configured).expanduser()
    import platformdirs  # only when needed: every command's start-up pays for its imports

    return platformdirs.user_data_path("kbtui", appauthor=False)


# config.toml is read like a document: a regular file (a FIFO never blocks, a
# device is refused), at most this many bytes, and no deeper than this many
# nested tables or arrays (the settings need two; TOML's parser recurses).
CONFIG_MAX_BYTES = 1 << 20
CONFIG_MAX_DEPTH = 8

HOUR_S = 3600.0
DAY_S = 86_400.0
GIB = 1 << 30
TIB = 1 << 40


@dataclass(frozen=True)
class Config:
    """Every setting, with its allowed range (checked at construction, so at load)."""

    home: Path
    # The store: empty for SQLite in the data directory (the default), or a
    # postgresql:// URL (KBTUI_DATABASE_URL wins). Kept out of repr: it may hold a password.
    database_url: str = setting("", secret=True)
    embedding_provider: str = setting("local", choices=EMBEDDING_PROVIDERS)
    embedding_model: str = setting("")  # ollama: the model tag (default nomic-embed-text:v1.5)
    embedding_vector_mode: str = setting("matryoshka512", choices=VECTOR_MODES)  # native: the rollback
    ollama_host: str = setting("http://127.0.0.1:11434")
    max_embedding_batch_size: int = setting(32, minimum=1, maximum=4096)
    # local: onnxruntime threads (0: one per core, at most 4)
    embedding_threads: int = setting(0, minimum=0, maximum=256)
    embedding_timeout_s: float = setting(60.0, minimum=0.001, maximum=DAY_S)  # one batch of document chunks
    # One query, so search degrades quickly.
    embedding_query_timeout_s: float = setting(5.0, minimum=0.001, maximum=HOUR_S)
    embedding_connect_timeout_s: float = setting(2.0, minimum=0.001, maximum=HOUR_S)
    # Re-read the server's model digest this often.
    embedding_identity_ttl_s: float = setting(60.0, minimum=0.0, maximum=DAY_S)
    embedding_cache_ttl_s: float = setting(900.0, minimum=0.0, maximum=30 * DAY_S)
    embedding_cache_max_entries: int = setting(20_000, minimum=0, maximum=100_000_000)
    embedding_cache_max_bytes: int = setting(64 * 1024 * 1024, minimum=0, maximum=TIB)
    max_document_bytes: int = setting(256 * 1024 * 1024, minimum=1, maximum=TIB)
    # Source scans (folders, files, repositories): a larger file is skipped; a
    # scan stops once its files total more. The names are from when only
    # repositories were scanned.
    repository_max_file_bytes: int = setting(16 * 1024 * 1024, minimum=1, maximum=TIB)
    repository_max_total_bytes: int = setting(GIB, minimum=1, maximum=1024 * TIB)
    # How a running node keeps its sources in sync, how often it scans those it
    # cannot watch, and how long a burst of saves may stay quiet before a rescan.
    source_watch: str = setting("auto", choices=SOURCE_WATCH_MODES)
    source_poll_interval_s: float = setting(60.0, minimum=0.1, maximum=DAY_S)
    source_watch_quiet_ms: int = setting(200, minimum=10, maximum=60_000)
    chunking: ChunkSettings = field(default_factory=ChunkSettings)
    extraction: ExtractionLimits = field(default_factory=ExtractionLimits)
    ocr: OcrSettings = field(default_factory=OcrSettings)  # the [ocr] table
    # Ingestion pipeline (actors). Zero capacity or zero in flight would admit nothing: add would hang.
    admission_queue_capacity: int = setting(256, minimum=1, maximum=1_000_000)
    max_in_flight: int = setting(8, minimum=1, maximum=1024)
    shutdown_drain_timeout_s: float = setting(30.0, minimum=0.0, maximum=DAY_S)
    # The drain sweep's tick: zero would spin a core.
    drain_sweep_interval_s: float = setting(0.5, minimum=0.01, maximum=HOUR_S)
    # Many nodes on one PostgreSQL store: how long a node's claim on a document
    # holds without a heartbeat (heartbeats come every third of it). A node that
    # dies loses its documents to the others within this, plus one drain tick.
    node_lease_s: float = setting(15.0, minimum=1.0, maximum=HOUR_S)
    # 0 turns the scheduled stale-document scan off.
    reindex_interval_s: float = setting(600.0, minimum=0.0, maximum=30 * DAY_S)
    # Back-off after the provider was unavailable, and the pause after the disk was full.
    embedding_retry_initial_s: float = setting(5.0, minimum=0.01, maximum=DAY_S)
    storage_retry_s: float = setting(30.0, minimum=0.01, maximum=DAY_S)
    search_limit: int = setting(10, minimum=1, maximum=1000)
    candidate_pool_multiplier: int = setting(4, minimum=1, maximum=100)
    minimum_candidate_pool: int = setting(40, minimum=1, maximum=100_000)
    search_fusion: str = setting("convex", choices=FUSION_STRATEGIES)  # see kbtui.retrieval.fusion
    # Optional cross-encoder rerank: a llama-server on loopback ("" turns it off).
    reranker_url: str = setting("")
    reranker_model: str = setting("")
    # Also the rerank stage's hard deadline.
    search_latency_budget_ms: float = setting(500.0, minimum=1.0, maximum=HOUR_S * 1000)
    adaptive_reranking: bool = setting(True)
    rerank_max_candidates: int = setting(20, minimum=1, maximum=1000)
    # Ask: the Ollama chat model that answers questions with the knowledge tools.
    chat_model: str = setting("llama3.2")
    chat_host: str = setting("")  # empty: ollama_host
    chat_timeout_s: float = setting(120.0, minimum=0.001, maximum=DAY_S)
    # Every model endpoint (embedder, reranker, chat) must be on loopback, and
    # the knowledge tools are offered only to node-local models, unless this is true.
    allow_cloud_model_access: bool = setting(False)

    def __post_init__(self) -> None:
        validate_settings(self)
        if not self.allow_cloud_model_access:
            for key in MODEL_ENDPOINT_SETTINGS:
                url = getattr(self, key)
                if url and not is_loopback_url(url):
                    raise InvalidSetting(
                        f"{CONFIG_FILE_NAME}: {key} must be on this machine (a loopback address or localhost); "
                        "set allow_cloud_model_access = true to send document text to another host"
                    )
        url = self.database_url.strip()
        if url and ("://" not in url or url.split("://", 1)[0].lower() not in POSTGRES_URL_SCHEMES):
            # The value itself is never shown: it may hold a password.
            raise InvalidSetting(
                f"{CONFIG_FILE_NAME}: database_url (or {DATABASE_URL_ENV}) must be a postgresql:// URL, "
                "or empty for the SQLite store in the data directory"
            )
        object.__setattr__(self, "database_url", url)

    @classmethod
    def load(cls, home: Path | None = None) -> Config:
        """Defaults, overridden by ``config.toml``, ``KBTUI_EMBEDDING_PROVIDER`` and
        ``KBTUI_DATABASE_URL``; every
        value checked (:class:`InvalidSetting`, exit 2, naming the key and what it accepts)."""
        home = home or kbtui_home()
        values = read_config_file(home / CONFIG_FILE_NAME)
        chunking = ChunkSettings(**_known(ChunkSettings, _table(values, "chunking")))
        extraction = ExtractionLimits(**_known(ExtractionLimits, _table(values, "extraction")))
        ocr = OcrSettings(**_known(OcrSettings, _table(values, "ocr")))
        env_provider = os.environ.get("KBTUI_EMBEDDING_PROVIDER")
        if env_provider:
            values["embedding_provider"] = env_provider
        env_database = os.environ.get(DATABASE_URL_ENV)
        if env_database:
            values["database_url"] = env_database
        return cls(home=home, chunking=chunking, extraction=extraction, ocr=ocr, **_known(cls, values))


def read_config_file(path: Path) -> dict[str, Any]:
    """The values in ``config.toml`` (none when there is no file), read like a
    document: a symlink is followed, but what is opened must be a regular file
    of at most :data:`CONFIG_MAX_BYTES`, read without ever blocking, and its
    values nested at most :data:`CONFIG_MAX_DEPTH` deep; anything else is one
    line (:class:`KbtuiError`, exit 2)."""
    try:
        with open_source(os.path.realpath(path), max_bytes=CONFIG_MAX_BYTES) as opened:
            data = opened.read()
            opened.finish()
    except SourceRefused as refused:
        if refused.reason is Refusal.VANISHED:
            return {}
        if refused.reason is Refusal.TOO_LARGE:
            raise KbtuiError(f"{CONFIG_FILE_NAME} is larger than {CONFIG_MAX_BYTES // 1024} KiB") from None
        raise KbtuiError(f"{CONFIG_FILE_NAME} cannot be read: {refused.reason.explanation}") from None
    try:
        values = tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise KbtuiError(f"{CONFIG_FILE_NAME} is not valid TOML: {exc}") from None
    except RecursionError:
        values = None
    if values is None or nesting_depth(values, limit=CONFIG_MAX_DEPTH) > CONFIG_MAX_DEPTH:
        raise KbtuiError(f"{CONFIG_FILE_NAME} nests tables or arrays more than {CONFIG_MAX_DEPTH} deep")
    return values


def _table(values: dict[str, Any], name: str) -> dict[str, Any]:
    table = values.pop(name, None)
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise InvalidSetting(f"{CONFIG_FILE_NAME}: {name} must be a table ([{name}])")
    return table


def _known(kind: type, values: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(kind)} - {"home", "chunking", "extraction", "ocr"}
    unknown = sorted(set(values) - names)
    if unknown:
        raise KbtuiError(f"unknown setting(s) in {CONFIG_FILE_NAME}: {', '.join(unknown)}")
    return values
