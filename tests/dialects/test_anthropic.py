"""Anthropic Messages: input_schema, input_examples, tool_use blocks, tool_result errors."""

from __future__ import annotations

from toolkeeper.core.errors import ErrorCode, ToolError
from toolkeeper.core.states import CallStatus
from toolkeeper.core.values import ToolResult, ToolSpec
from toolkeeper.dialects import Anthropic, ToolChoice

from .fixtures import load


def test_parse_reads_parallel_tool_use_blocks_and_skips_text() -> None:
    calls = Anthropic().parse(load("anthropic_parallel.json"))
    assert [(c.call_id, c.name) for c in calls] == [
        ("toolu_01A09q90qw90lq917835lq9", "get_weather"),
        ("toolu_01B19r01rx01mr028946mr0", "get_time"),
    ]
    assert calls[1].arguments == {"timezone": "America/Los_Angeles"}


def test_an_error_payload_has_no_calls() -> None:
    assert Anthropic().parse(load("anthropic_error.json")) == []


def test_examples_travel_as_input_examples() -> None:
    spec = ToolSpec(name="search", examples=({"q": "shoes"},))
    out = Anthropic().export_tool(spec)
    assert out.lossless
    assert out.value["input_examples"] == [{"q": "shoes"}]
    assert Anthropic().import_tool(out.value).value.examples == ({"q": "shoes"},)


def test_an_error_result_is_flagged_for_the_model() -> None:
    result = ToolResult(
        call_id="toolu_1",
        tool="search",
        status=CallStatus.FAILED,
        error=ToolError.of(ErrorCode.TIMEOUT, "the search took too long"),
    )
    block = Anthropic().format_result(result)
    assert block["is_error"] is True
    assert '"retryable": true' in block["content"]


def test_required_without_parallel_calls_maps_to_any_with_the_switch() -> None:
    out = Anthropic().export_tool_choice(ToolChoice(mode="required", parallel=False))
    assert out.value == {"tool_choice": {"type": "any", "disable_parallel_tool_use": True}}
    assert Anthropic().import_tool_choice(out.value) == ToolChoice(mode="required", parallel=False)


def test_a_root_choice_is_merged_into_one_object_and_reported() -> None:
    # Anthropic: "input_schema does not support oneOf, allOf, or anyOf at the top level".
    schema = {
        "oneOf": [
            {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            {"type": "object", "properties": {"email": {"type": "string"}}, "required": ["email"]},
        ],
        "allOf": [{"properties": {"note": {"type": "string"}}, "required": ["note"]}],
    }
    exported = Anthropic().export_tool(ToolSpec(name="find", input_schema=schema))
    params = exported.value["input_schema"]
    assert not {"oneOf", "allOf", "anyOf"} & set(params)
    assert params["type"] == "object"
    assert set(params["properties"]) == {"id", "email", "note"}
    assert params["required"] == ["note"]  # what every alternative (or any allOf part) needs
    assert [(loss.pointer, loss.keyword) for loss in exported.losses] == [
        ("/input_schema/allOf", "allOf"),
        ("/input_schema/oneOf", "oneOf"),
    ]
