"""A plain numpy forward pass of the fp32 all-MiniLM-L6-v2 (BERT) weights.

The reference the int8 ONNX model is checked against: no ONNX, no torch,
just the safetensors file read by hand and the BERT equations.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

HEADS = 12
LAYERS = 6
LAYER_NORM_EPS = 1e-12


def load_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Read a safetensors file (8-byte header length, JSON header, raw tensors)."""
    data = path.read_bytes()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + header_len])
    base = 8 + header_len
    dtypes = {"F32": "<f4", "I64": "<i8"}
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        tensors[name] = np.frombuffer(data[base + start : base + end], dtype=dtypes[info["dtype"]]).reshape(info["shape"])
    return tensors


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + LAYER_NORM_EPS) * weight + bias


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): numpy has no erf.
    sign = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-x * x))


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / np.sqrt(2.0)))


class NumpyMiniLM:
    def __init__(self, weights_path: Path) -> None:
        self.w = load_safetensors(weights_path)  # float32, as the model was trained

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.w[f"{name}.weight"].T + self.w[f"{name}.bias"]

    def sentence_vector(self, ids: list[int]) -> np.ndarray:
        """Mean-pooled, L2-normalised sentence vector of one token sequence."""
        w = self.w
        n = len(ids)
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
        x = x + w["embeddings.token_type_embeddings.weight"][0]
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        head = x.shape[1] // HEADS
        for layer in range(LAYERS):
            p = f"encoder.layer.{layer}"
            q = self._linear(x, f"{p}.attention.self.query").reshape(n, HEADS, head).transpose(1, 0, 2)
            k = self._linear(x, f"{p}.attention.self.key").reshape(n, HEADS, head).transpose(1, 0, 2)
            v = self._linear(x, f"{p}.attention.self.value").reshape(n, HEADS, head).transpose(1, 0, 2)
            scores = q @ k.transpose(0, 2, 1) / np.sqrt(head)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            attention = scores / scores.sum(-1, keepdims=True)
            context = (attention @ v).transpose(1, 0, 2).reshape(n, -1)
            x = _layer_norm(
                self._linear(context, f"{p}.attention.output.dense") + x,
                w[f"{p}.attention.output.LayerNorm.weight"],
                w[f"{p}.attention.output.LayerNorm.bias"],
            )
            inner = _gelu(self._linear(x, f"{p}.intermediate.dense"))
            x = _layer_norm(
                self._linear(inner, f"{p}.output.dense") + x,
                w[f"{p}.output.LayerNorm.weight"],
                w[f"{p}.output.LayerNorm.bias"],
            )
        pooled = x.mean(axis=0)
        return pooled / np.linalg.norm(pooled)
