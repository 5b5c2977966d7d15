"""OpenAI Responses: function tools with output_schema, function_call items, outputs."""

from __future__ import annotations

import pytest
from openai.types.responses import FunctionTool

from toolkeeper.core.states import CallStatus
from toolkeeper.core.values import ToolResult, ToolSpec
from toolkeeper.dialects import OpenAIResponses, ToolChoice

from .fixtures import load
from .sdk import DEFINITION
from .test_openai_chat import OPEN_SCHEMA, STRICT_SCHEMA


def test_parse_reads_function_call_items_by_call_id() -> None:
    calls = OpenAIResponses().parse(load("openai_responses_parallel.json"))
    assert [c.call_id for c in calls] == [
        "call_unLAR8MvFNptuiZK6K6HCy5k",
        "call_Xk3uBnHtAaK2QmC9sjRtP0eE",
    ]
    assert calls[0].arguments == {"location": "Boston, MA", "unit": "celsius"}
    assert calls[0].metadata["item_id"].startswith("fc_")


def test_a_failed_response_has_no_calls() -> None:
    assert OpenAIResponses().parse(load("openai_responses_error.json")) == []


def test_output_schema_travels_with_the_definition() -> None:
    spec = ToolSpec(name="total", output_schema={"type": "number"})
    out = OpenAIResponses().export_tool(spec)
    assert out.lossless
    assert OpenAIResponses().import_tool(out.value).value.output_schema == {"type": "number"}


def test_result_is_a_function_call_output_item() -> None:
    result = ToolResult(call_id="call_1", tool="total", status=CallStatus.SUCCEEDED, data=3)
    assert OpenAIResponses().format_result(result) == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": "3",
    }


def test_a_named_tool_choice_is_flat() -> None:
    out = OpenAIResponses().export_tool_choice(ToolChoice(mode="tool", name="total"))
    assert out.value == {"tool_choice": {"type": "function", "name": "total"}}


@pytest.mark.parametrize(
    ("strict", "schema"), [(True, STRICT_SCHEMA), (False, OPEN_SCHEMA)], ids=["strict", "not"]
)
def test_a_definition_declaring_strict_round_trips_as_it_came(
    strict: bool, schema: dict[str, object]
) -> None:
    definition = FunctionTool(type="function", name="weather", parameters=schema, strict=strict)
    spec = OpenAIResponses().import_tool(definition).value
    exported = OpenAIResponses().export_tool(spec)
    assert exported.lossless
    assert exported.value == definition.model_dump(mode="json", exclude_none=True)
    DEFINITION["openai_responses"](exported.value)
