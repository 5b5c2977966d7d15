"""Whatever a response holds, parse returns calls or nothing: it never raises and kills a turn.

(What is no response at all, a number say, is refused: see test_conformance.)"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkeeper.core.values import ToolCall
from toolkeeper.dialects import DIALECTS, get_dialect

from .fixtures import load
from .sdk import RESPONSE

KEYS = st.sampled_from(
    [
        "choices",
        "message",
        "tool_calls",
        "function",
        "name",
        "arguments",
        "id",
        "type",
        "output",
        "call_id",
        "content",
        "input",
        "candidates",
        "parts",
        "functionCall",
        "args",
        "method",
        "params",
        "function_call",
        "jsonrpc",
    ]
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.sampled_from(["function", "function_call", "tool_use", "tools/call", "{", "{}", "[1]"]),
    st.text(max_size=5),
)
JSON = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(KEYS, children, max_size=4)
    ),
    max_leaves=12,
)


RESPONSES = st.one_of(
    st.none(), st.lists(JSON, max_size=3), st.dictionaries(KEYS, JSON, max_size=4)
)


@settings(max_examples=300, deadline=None)
@given(response=RESPONSES)
def test_parse_never_raises(response: Any) -> None:
    for name in DIALECTS:
        calls = get_dialect(name).parse(response)
        assert all(isinstance(call, ToolCall) for call in calls)
        assert all(isinstance(call.arguments, dict | str) for call in calls)


DEEP_TEXT = "[" * 100_000 + "]" * 100_000
"""Argument text nested deeper than any JSON decoder goes."""
DEEP = json.loads('{"a": ' * 600 + "1" + "}" * 600)
"""Arguments deeper than pydantic writes JSON (255 levels) or a recursive copy goes."""


def _with_deep_arguments(name: str) -> Any:
    """A vendor fixture whose first call carries arguments nested hundreds of levels deep."""
    raw = load(
        {
            "openai_chat": "openai_chat_parallel.json",
            "openai_responses": "openai_responses_parallel.json",
            "anthropic": "anthropic_parallel.json",
            "gemini": "gemini_parallel.json",
            "mcp": "mcp_call.json",
        }[name]
    )
    if name == "openai_chat":
        raw["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = DEEP_TEXT
    elif name == "openai_responses":
        raw["output"][0]["arguments"] = DEEP_TEXT
    elif name == "anthropic":
        raw["content"][1]["input"] = DEEP
    elif name == "gemini":
        raw["candidates"][0]["content"]["parts"][0]["functionCall"]["args"] = DEEP
    else:
        raw[0]["params"]["arguments"] = DEEP
    return raw


@pytest.mark.parametrize("name", list(DIALECTS))
def test_arguments_nested_hundreds_deep_reach_the_executor_instead_of_stopping_the_parse(
    name: str,
) -> None:
    """A model that wrote `[[[[...` as arguments made parse raise RecursionError (or
    pydantic's serialization error for an SDK object), and the turn's other calls with it."""
    raw = _with_deep_arguments(name)
    dialect = get_dialect(name)
    calls = dialect.parse(raw, turn="t1")
    assert len(calls) >= 2
    assert calls[0].arguments in (DEEP_TEXT, DEEP)
    assert dialect.parse(RESPONSE[name](raw), turn="t1") == calls
