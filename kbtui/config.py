"""Configuration: defaults, overridden by ``$KBTUI_HOME/config.toml`` and env vars."""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import platformdirs

from kbtui.chunking import ChunkSettings
from kbtui.errors import KbtuiError
from kbtui.extract.limits import ExtractionLimits

CONFIG_FILE_NAME = "config.toml"


def kbtui_home() -> Path:
    """The data directory: ``$KBTUI_HOME`` or the platform user-data dir."""
    configured = os.environ.get("KBTUI_HOME")
    if configured:
        return Path(configured).expanduser()
    return platformdirs.user_data_path("kbtui", appauthor=False)


@dataclass(frozen=True)
class Config:
    home: Path
    embedding_provider: str = "local"  # local | ollama | hash
    embedding_model: str = ""  # ollama: the model tag (default nomic-embed-text:v1.5)
    embedding_vector_mode: str = "matryoshka512"  # matryoshka512 | native (rollback)
    ollama_host: str = "http://127.0.0.1:11434"
    max_embedding_batch_size: int = 32
    embedding_threads: int = 0  # local: onnxruntime threads (0: one per core, at most 4)
    embedding_timeout_s: float = 60.0  # one batch of document chunks
    embedding_query_timeout_s: float = 5.0  # one query, so search degrades quickly
    embedding_connect_timeout_s: float = 2.0
    embedding_identity_ttl_s: float = 60.0  # re-read the server's model digest this often
    embedding_cache_ttl_s: float = 900.0
    embedding_cache_max_entries: int = 20_000
    embedding_cache_max_bytes: int = 64 * 1024 * 1024
    max_document_bytes: int = 256 * 1024 * 1024
    # Repository imports: a larger file is skipped; a scan stops once its files total more.
    repository_max_file_bytes: int = 16 * 1024 * 1024
    repository_max_total_bytes: int = 1024 * 1024 * 1024
    chunking: ChunkSettings = field(default_factory=ChunkSettings)
    extraction: ExtractionLimits = field(default_factory=ExtractionLimits)
    # Ingestion pipeline (actors)
    admission_queue_capacity: int = 256
    max_in_flight: int = 8
    shutdown_drain_timeout_s: float = 30.0
    drain_sweep_interval_s: float = 0.5
    reindex_interval_s: float = 600.0  # 0 turns the scheduled stale-document scan off
    embedding_retry_initial_s: float = 5.0  # back-off after the provider was unavailable
    storage_retry_s: float = 30.0  # pause after the disk was full
    search_limit: int = 10
    candidate_pool_multiplier: int = 4
    minimum_candidate_pool: int = 40
    search_fusion: str = "convex"  # rrf | score_aware | convex (see kbtui.retrieval.fusion)
    # Optional cross-encoder rerank: a llama-server on loopback ("" turns it off).
    reranker_url: str = ""
    reranker_model: str = ""
    search_latency_budget_ms: float = 500.0  # also the rerank stage's hard deadline
    adaptive_reranking: bool = True
    rerank_max_candidates: int = 20
    # Ask: the Ollama chat model that answers questions with the knowledge tools.
    chat_model: str = "llama3.2"
    chat_host: str = ""  # empty: ollama_host
    chat_timeout_s: float = 120.0
    # The knowledge tools are offered only to node-local models unless this is true.
    allow_cloud_model_access: bool = False

    @classmethod
    def load(cls, home: Path | None = None) -> Config:
        home = home or kbtui_home()
        values: dict[str, object] = {}
        path = home / CONFIG_FILE_NAME
        if path.exists():
            try:
                values = tomllib.loads(path.read_text(encoding="utf-8"))
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                raise KbtuiError(f"{CONFIG_FILE_NAME} is not valid TOML: {exc}") from None
        chunking = ChunkSettings(**_known(ChunkSettings, values.pop("chunking", {}) or {}))
        try:
            extraction = ExtractionLimits(**_known(ExtractionLimits, values.pop("extraction", {}) or {}))
        except (TypeError, ValueError) as exc:
            raise KbtuiError(f"{CONFIG_FILE_NAME}: {exc}") from None
        env_provider = os.environ.get("KBTUI_EMBEDDING_PROVIDER")
        if env_provider:
            values["embedding_provider"] = env_provider
        return cls(home=home, chunking=chunking, extraction=extraction, **_known(cls, values))


def _known(kind: type, values: dict[str, object]) -> dict[str, object]:
    names = {f.name for f in dataclasses.fields(kind)} - {"home", "chunking", "extraction"}
    unknown = sorted(set(values) - names)
    if unknown:
        raise KbtuiError(f"unknown setting(s) in {CONFIG_FILE_NAME}: {', '.join(unknown)}")
    return values
