"""Model adapters by name: `"openai:NAME"`, `"openai-responses:NAME"`, `"anthropic:NAME"`,
`"gemini:NAME"`, each built with its vendor client's own environment defaults."""

from __future__ import annotations

from collections.abc import Callable

from ..core.errors import ConfigurationError
from .model import Model

__all__ = ["PROVIDERS", "resolve_model"]


def _openai(name: str) -> Model:
    from .openai import OpenAIChatModel

    return OpenAIChatModel(name)


def _responses(name: str) -> Model:
    from .openai import OpenAIResponsesModel

    return OpenAIResponsesModel(name)


def _anthropic(name: str) -> Model:
    from .anthropic import AnthropicModel

    return AnthropicModel(name)


def _gemini(name: str) -> Model:
    from .gemini import GeminiModel

    return GeminiModel(name)


PROVIDERS: dict[str, Callable[[str], Model]] = {
    "openai": _openai,
    "openai-responses": _responses,
    "anthropic": _anthropic,
    "gemini": _gemini,
}
"""The prefixes a model string may have, and what each builds."""


def resolve_model(spec: str) -> Model:
    """The adapter a model string names.

    Raises:
        ConfigurationError: the string is not `PROVIDER:NAME` with a known provider.
        ImportError: the provider's SDK is not installed (the message names the extra).
    """
    provider, _, name = spec.partition(":")
    build = PROVIDERS.get(provider)
    if build is None or not name:
        known = ", ".join(f"{p}:NAME" for p in PROVIDERS)
        raise ConfigurationError(f"model {spec!r} is not one of {known}")
    return build(name)
