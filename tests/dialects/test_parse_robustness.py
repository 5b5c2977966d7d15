"""Whatever a response holds, parse returns calls or nothing: it never raises and kills a turn.

(What is no response at all, a number say, is refused: see test_conformance.)"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolkeeper.core.values import ToolCall
from toolkeeper.dialects import DIALECTS, get_dialect

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
