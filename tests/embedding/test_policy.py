"""Vector policy and identity: what makes two vectors comparable."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kbtui.embedding import VectorIdentity, make_provider
from kbtui.embedding.policy import (
    MATRYOSHKA_TRANSFORM,
    NATIVE_TRANSFORM,
    matryoshka_512,
    policy_for,
)
from kbtui.errors import KbtuiError


def test_matryoshka_on_known_numbers():
    # mean 2.5, population variance 1.25: the layer norm gives (x - 2.5) / sqrt(1.25 + 1e-5),
    # and L2 normalisation of (-1.5, -0.5, 0.5, 1.5) gives (-3, -1, 1, 3) / sqrt(20).
    out = matryoshka_512(np.array([[1.0, 2.0, 3.0, 4.0]]))
    assert np.allclose(out, np.array([[-3, -1, 1, 3]]) / math.sqrt(20), atol=1e-6)


def test_matryoshka_normalises_over_the_full_vector_then_keeps_the_first_512():
    full = np.arange(768, dtype=np.float64)  # mean 383.5 over all 768 components
    out = matryoshka_512(full[None, :])[0]
    assert out.shape == (512,) and out.dtype == np.float32
    expected = [i - 383.5 for i in range(512)]  # centred on the full mean, then cut
    norm = math.sqrt(sum(v * v for v in expected))
    assert np.allclose(out, [v / norm for v in expected], atol=1e-6)
    # Not the same as cutting first and normalising the cut part.
    cut_first = np.arange(512) - 255.5
    assert not np.allclose(out, cut_first / np.linalg.norm(cut_first), atol=1e-3)


def test_nomic_v1_5_gets_matryoshka_and_intent_prefixes_unless_native():
    policy = policy_for("nomic-embed-text:v1.5", "matryoshka512")
    assert policy.transform == MATRYOSHKA_TRANSFORM and policy.output_dim(768) == 512
    assert (policy.document_prefix, policy.query_prefix) == ("search_document: ", "search_query: ")
    native = policy_for("nomic-ai/nomic-embed-text-v1.5-GGUF:F16", "native")
    assert native.transform == NATIVE_TRANSFORM and native.output_dim(768) == 768
    assert native.query_prefix == "search_query: "


def test_other_models_stay_native_and_unprefixed():
    # A bare tag is not known to be v1.5: prefixes yes (every nomic-embed-text wants them), transform no.
    latest = policy_for("nomic-embed-text:latest", "matryoshka512")
    assert latest.transform == NATIVE_TRANSFORM and latest.document_prefix == "search_document: "
    minilm = policy_for("all-minilm:l6-v2", "matryoshka512")
    assert minilm.transform == NATIVE_TRANSFORM and minilm.document_prefix == minilm.query_prefix == ""


def test_an_unknown_vector_mode_is_refused():
    with pytest.raises(KbtuiError, match="vector mode"):
        policy_for("nomic-embed-text:v1.5", "matryoshka256")


def test_identity_changes_with_digest_transform_and_width():
    base = VectorIdentity("ollama", "nomic-embed-text:v1.5", "0a1b2c3d4e5f6071", MATRYOSHKA_TRANSFORM, 512)
    variants = [
        VectorIdentity("ollama", "nomic-embed-text:v1.5", "ffffffffffffffff", MATRYOSHKA_TRANSFORM, 512),
        VectorIdentity("ollama", "nomic-embed-text:v1.5", "0a1b2c3d4e5f6071", NATIVE_TRANSFORM, 512),
        VectorIdentity("ollama", "nomic-embed-text:v1.5", "0a1b2c3d4e5f6071", MATRYOSHKA_TRANSFORM, 768),
        VectorIdentity("local", "nomic-embed-text:v1.5", "0a1b2c3d4e5f6071", MATRYOSHKA_TRANSFORM, 512),
    ]
    canon = {v.canonical() for v in variants} | {base.canonical()}
    assert len(canon) == 5


def test_unknown_provider_names_and_vector_modes_are_refused_at_start():
    with pytest.raises(KbtuiError, match="unknown embedding provider"):
        make_provider("openai")
    with pytest.raises(KbtuiError, match="vector mode"):
        make_provider("local", vector_mode="Matryoshka")
