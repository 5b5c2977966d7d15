"""Model adapters by name: `"openai:NAME"`, `"openai-responses:NAME"`, `"anthropic:NAME"`,
`"gemini:NAME"`, each built with its vendor client's own environment defaults."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..core.errors import ConfigurationError
from .model import Model

__all__ = ["PROVIDERS", "resolve_model"]


def _openai_client(base_url: str | None) -> Any:
    from ._sdk import require

    openai = require("openai", "openai")
    if base_url is None:
        return openai.AsyncOpenAI(max_retries=0)
    # (a local OpenAI-compatible server often wants no key; the SDK insists on one)
    key = os.environ.get("OPENAI_API_KEY") or "not-needed"
    return openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0)


def _openai(name: str, base_url: str | None) -> Model:
    from .openai import OpenAIChatModel

    return OpenAIChatModel(name, client=_openai_client(base_url))


def _responses(name: str, base_url: str | None) -> Model:
    from .openai import OpenAIResponsesModel

    return OpenAIResponsesModel(name, client=_openai_client(base_url))


def _anthropic(name: str, base_url: str | None) -> Model:
    from ._sdk import require
    from .anthropic import AnthropicModel

    sdk = require("anthropic", "anthropic")
    return AnthropicModel(name, client=sdk.AsyncAnthropic(base_url=base_url, max_retries=0))


def _gemini(name: str, base_url: str | None) -> Model:
    from ._sdk import require
    from .gemini import GeminiModel

    genai = require("google.genai", "gemini")
    options = {"http_options": {"base_url": base_url}} if base_url else {}
    return GeminiModel(name, client=genai.Client(**options))


PROVIDERS: dict[str, Callable[[str, str | None], Model]] = {
    "openai": _openai,
    "openai-responses": _responses,
    "anthropic": _anthropic,
    "gemini": _gemini,
}
"""The prefixes a model string may have, and what each builds."""


def resolve_model(spec: str, *, base_url: str | None = None) -> Model:
    """The adapter a model string names, its client built from the environment (and
    `base_url`, when given, in place of the vendor's).

    Raises:
        ConfigurationError: the string is not `PROVIDER:NAME` with a known provider.
        ImportError: the provider's SDK is not installed (the message names the extra).
    """
    provider, _, name = spec.partition(":")
    build = PROVIDERS.get(provider)
    if build is None or not name:
        known = ", ".join(f"{p}:NAME" for p in PROVIDERS)
        raise ConfigurationError(f"model {spec!r} is not one of {known}")
    return build(name, base_url)
