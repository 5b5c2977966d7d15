"""The vendors' own types, used to check that what the dialects produce is what the SDKs accept.

A value conforms when the SDK's typed object built from it serializes back to the same JSON:
nothing rejected, nothing silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Union

import anthropic.types as anthropic_types
import mcp.types as mcp_types
import openai.types.chat as chat_types
import openai.types.responses as responses_types
from google.genai import types as genai_types
from mcp.types.jsonrpc import JSONRPCRequest
from openai.types.responses.response_input_item_param import FunctionCallOutput
from pydantic import BaseModel, TypeAdapter

Check = Callable[[Any], None]


def typed_dict(tp: Any) -> Check:
    adapter: TypeAdapter[Any] = TypeAdapter(tp)

    def check(value: Any) -> None:
        assert adapter.dump_python(adapter.validate_python(value), mode="json") == value

    return check


def model(cls: type[BaseModel]) -> Check:
    def check(value: Any) -> None:
        obj = cls.model_validate(value)
        assert obj.model_dump(mode="json", by_alias=True, exclude_unset=True) == value

    return check


DEFINITION: dict[str, Check] = {
    "openai_chat": typed_dict(chat_types.ChatCompletionFunctionToolParam),
    "openai_responses": typed_dict(responses_types.FunctionToolParam),
    "anthropic": typed_dict(anthropic_types.ToolParam),
    "gemini": model(genai_types.FunctionDeclaration),
    "mcp": model(mcp_types.Tool),
}
"""Checks one exported tool definition."""

RESULT: dict[str, Check] = {
    "openai_chat": typed_dict(chat_types.ChatCompletionToolMessageParam),
    "openai_responses": typed_dict(FunctionCallOutput),
    "anthropic": typed_dict(anthropic_types.ToolResultBlockParam),
    "gemini": model(genai_types.Part),
    "mcp": model(mcp_types.CallToolResult),
}
"""Checks one formatted result."""


def _field(name: str, check: Check) -> Check:
    def run(fields: Any) -> None:
        check(fields[name])

    return run


TOOL_CHOICE: dict[str, Check] = {
    "openai_chat": _field(
        "tool_choice", typed_dict(chat_types.ChatCompletionToolChoiceOptionParam)
    ),
    "openai_responses": _field(
        "tool_choice",
        typed_dict(
            Union[responses_types.ToolChoiceOptions, responses_types.ToolChoiceFunctionParam]  # noqa: UP007
        ),
    ),
    "anthropic": _field("tool_choice", typed_dict(anthropic_types.ToolChoiceParam)),
    "gemini": _field("toolConfig", model(genai_types.ToolConfig)),
    "mcp": _field("toolChoice", model(mcp_types.ToolChoice)),
}
"""Checks the request fields that carry tool_choice."""

RESPONSE: dict[str, Callable[[Any], Any]] = {
    "openai_chat": chat_types.ChatCompletion.model_validate,
    "openai_responses": responses_types.Response.model_validate,
    "anthropic": anthropic_types.Message.model_validate,
    "gemini": genai_types.GenerateContentResponse.model_validate,
    "mcp": TypeAdapter(list[JSONRPCRequest]).validate_python,
}
"""Builds the SDK's response object from a raw response payload."""
