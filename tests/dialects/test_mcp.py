"""MCP: annotations from effect, hints back in, tools/call params, CallToolResult."""

from __future__ import annotations

import dataclasses

import mcp.types as mcp_types

from toolkeeper.core.states import CallStatus
from toolkeeper.core.values import Effect, ToolResult, ToolSpec
from toolkeeper.dialects import MCP, ToolChoice

from .fixtures import load


def test_effect_and_idempotency_become_annotations() -> None:
    spec = ToolSpec(name="files.delete", effect=Effect.DESTRUCTIVE, idempotent=True)
    tool = MCP().export_tool(spec).value
    assert tool["annotations"] == {
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": True,
    }


def test_annotations_come_back_as_hints_local_configuration_overrides() -> None:
    tool = {
        "name": "lookup",
        "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True, "openWorldHint": True},
    }
    spec = MCP().import_tool(tool).value
    assert spec.effect is Effect.READ_ONLY
    assert spec.metadata["annotations"]["openWorldHint"] is True
    assert dataclasses.replace(spec, effect=Effect.WRITE).effect is Effect.WRITE


def test_a_tool_without_annotations_is_assumed_destructive() -> None:
    spec = MCP().import_tool({"name": "x", "inputSchema": {"type": "object"}}).value
    assert spec.effect is Effect.DESTRUCTIVE


def test_parse_reads_tools_call_requests_with_their_ids() -> None:
    calls = MCP().parse(load("mcp_call.json"))
    assert [(c.call_id, c.arguments) for c in calls] == [
        ("2", {"location": "New York"}),
        ("3", {"location": "London"}),
    ]


def test_sampling_tool_use_blocks_parse_with_their_ids_and_inputs() -> None:
    """A `ToolUseContent` (what a model asks for in MCP sampling) on its own was read as
    `tools/call` params: its `input` was never looked at, so the call ran with no arguments,
    under a made-up id; a `CreateMessageResult` holding such blocks parsed to no calls."""
    use = mcp_types.ToolUseContent(
        type="tool_use", id="toolu_1", name="weather", input={"location": "Oslo"}
    )
    other = mcp_types.ToolUseContent(type="tool_use", id="toolu_2", name="time", input={})
    sampled = mcp_types.CreateMessageResultWithTools(
        role="assistant",
        model="m",
        stop_reason="toolUse",
        content=[mcp_types.TextContent(type="text", text="Both."), use, other],
    )
    calls = [(c.call_id, c.name, c.arguments) for c in MCP().parse(sampled)]
    assert calls == [("toolu_1", "weather", {"location": "Oslo"}), ("toolu_2", "time", {})]
    assert [(c.call_id, c.name, c.arguments) for c in MCP().parse(use)] == calls[:1]
    lone = mcp_types.CreateMessageResultWithTools(
        role="assistant", model="m", stop_reason="toolUse", content=use
    )
    assert [(c.call_id, c.name, c.arguments) for c in MCP().parse(lone)] == calls[:1]


def test_a_resource_link_is_no_call() -> None:
    link = mcp_types.ResourceLink(type="resource_link", name="report", uri="file:///r.txt")
    assert MCP().parse(link) == []


def test_a_json_rpc_error_has_no_calls() -> None:
    assert MCP().parse(load("mcp_error.json")) == []


def test_structured_data_goes_into_structured_content() -> None:
    result = ToolResult(call_id="1", tool="t", status=CallStatus.SUCCEEDED, data={"n": 1})
    assert MCP().format_result(result) == {
        "content": [{"type": "text", "text": '{"n": 1}'}],
        "structuredContent": {"n": 1},
        "isError": False,
    }


def test_a_named_tool_choice_cannot_be_said_and_is_reported() -> None:
    out = MCP().export_tool_choice(ToolChoice(mode="tool", name="t"))
    assert out.value == {"toolChoice": {"mode": "required"}}
    assert out.losses[0].keyword == "name"


def test_an_output_schema_that_is_not_an_object_is_left_out_as_no_loss() -> None:
    # MCP output schemas describe structuredContent, an object; the SDK client also refuses a
    # result without structuredContent from a tool that declares one. The result goes as text,
    # what the model reads: nothing it would see is lost.
    spec = ToolSpec(name="count", output_schema={"type": "integer"})
    exported = MCP().export_tool(spec)
    assert "outputSchema" not in exported.value
    assert exported.losses == ()
    kept = MCP().export_tool(
        ToolSpec(name="get", output_schema={"type": "object", "properties": {}})
    )
    assert kept.value["outputSchema"] == {"type": "object", "properties": {}}
    assert kept.losses == ()


def test_structured_content_holding_nan_is_sent_as_json() -> None:
    import json

    result = ToolResult(
        call_id="c1", tool="stats", status=CallStatus.SUCCEEDED, data={"mean": float("nan")}
    )
    out = MCP().format_result(result)
    assert json.loads(json.dumps(out["structuredContent"], allow_nan=False)) == {"mean": None}


def test_an_untyped_object_output_schema_is_sent_with_type_object() -> None:
    # MCP output schemas are `type: "object"` at the root (clients parse tools/list so).
    spec = ToolSpec(name="get", output_schema={"properties": {"id": {"type": "string"}}})
    exported = MCP().export_tool(spec).value["outputSchema"]
    assert exported == {"type": "object", "properties": {"id": {"type": "string"}}}


def test_a_draft_07_tuple_from_a_typescript_server_is_still_checked_after_import() -> None:
    from toolkeeper.schema.validate import compile_validator

    tool = mcp_types.Tool(
        name="move",
        input_schema={  # as zod-to-json-schema writes a tuple
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "point": {
                    "type": "array",
                    "minItems": 2,
                    "maxItems": 2,
                    "items": [{"type": "number"}, {"type": "number"}],
                }
            },
            "required": ["point"],
        },
    )
    validator = compile_validator(MCP().import_tool(tool).value.input_schema)
    assert validator.is_valid({"point": [1, 2]})
    assert not validator.is_valid({"point": ["a", "b"]})


def test_a_tool_hinted_both_read_only_and_destructive_is_read_as_destructive() -> None:
    tool = mcp_types.Tool(
        name="purge",
        input_schema={"type": "object"},
        annotations=mcp_types.ToolAnnotations(read_only_hint=True, destructive_hint=True),
    )
    converted = MCP().import_tool(tool)
    assert converted.value.effect is Effect.DESTRUCTIVE
    assert [loss.keyword for loss in converted.losses] == ["readOnlyHint"]


def test_annotations_that_are_not_an_object_are_reported_and_read_as_none() -> None:
    tool = {"name": "purge", "inputSchema": {"type": "object"}, "annotations": ["readOnlyHint"]}
    converted = MCP().import_tool(tool)  # (it raised a bare ValueError, the CLI said no more)
    assert converted.value.effect is Effect.DESTRUCTIVE
    assert [loss.keyword for loss in converted.losses] == ["annotations"]
