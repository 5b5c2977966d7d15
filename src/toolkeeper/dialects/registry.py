"""Dialects and importers by name: `get_dialect("anthropic")`, `get_importer("bfcl")`."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..core.errors import ConfigurationError
from .anthropic import Anthropic
from .base import Dialect, Importer
from .bfcl import BFCL
from .gemini import Gemini
from .mcp import MCP
from .openai_chat import OpenAIChat
from .openai_responses import OpenAIResponses
from .sealtools import SealTools

__all__ = ["DIALECTS", "IMPORTERS", "get_dialect", "get_importer"]

DIALECTS: Mapping[str, Callable[[], Dialect]] = {
    "openai_chat": OpenAIChat,
    "openai_responses": OpenAIResponses,
    "anthropic": Anthropic,
    "gemini": Gemini,
    "mcp": MCP,
}
"""The five formats that convert both ways."""

IMPORTERS: Mapping[str, Callable[[], Importer]] = {**DIALECTS, "bfcl": BFCL, "sealtools": SealTools}
"""Every format tool definitions can be read from (the dialects, plus import-only corpora)."""


def get_dialect(name: str) -> Dialect:
    """A dialect with its default settings.

    Raises:
        ConfigurationError: no dialect has that name.
    """
    try:
        return DIALECTS[name]()
    except KeyError:
        raise ConfigurationError(
            f"unknown dialect {name!r}; known: {', '.join(sorted(DIALECTS))}"
        ) from None


def get_importer(name: str) -> Importer:
    """Something that reads tool definitions in format `name` into ToolSpecs.

    Raises:
        ConfigurationError: no format has that name.
    """
    try:
        return IMPORTERS[name]()
    except KeyError:
        raise ConfigurationError(
            f"unknown format {name!r}; known: {', '.join(sorted(IMPORTERS))}"
        ) from None
