"""Anthropic Messages: input_schema, input_examples, tool_use blocks, tool_result errors."""

from __future__ import annotations

import pytest
from anthropic.types import ToolParam

from toolkeeper.core.errors import ErrorCode, ToolError
from toolkeeper.core.states import CallStatus
from toolkeeper.core.values import ToolResult, ToolSpec
from toolkeeper.dialects import Action, Anthropic, LossError, OpenAIChat, ToolChoice

from ..conftest import APP
from .fixtures import load
from .sdk import DEFINITION


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


@pytest.mark.anyio
async def test_property_names_anthropic_refuses_are_renamed_and_named_back_in_calls() -> None:
    # Anthropic: "input_schema.properties: Property keys should match pattern
    # '^[a-zA-Z0-9_.-]{1,64}$'" (the whole request is refused).
    import re

    from toolkeeper import Keeper, Tool

    seen: list[object] = []

    class Upstream:  # an MCP server's tool, with OData- and JSON:API-style parameter names
        async def invoke(self, spec: object, arguments: object, ctx: object) -> str:
            seen.append(arguments)
            return "ok"

    long_name = "x" * 70
    schema = {
        "type": "object",
        "properties": {
            "$filter": {"type": "string"},
            "page[size]": {"type": "integer"},
            "order by": {"type": "string"},
            "order_by": {"type": "string"},
            long_name: {"type": "boolean"},
            "where": {
                "type": "array",
                "items": {"type": "object", "properties": {"field name": {"type": "string"}}},
            },
        },
        "required": ["$filter"],
        "additionalProperties": False,
    }
    spec = ToolSpec(name="list_items", input_schema=schema, effect="read_only")  # type: ignore[arg-type]
    exported = Anthropic().export_tool(spec)
    params = exported.value["input_schema"]
    allowed = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")

    def names(node: object) -> list[str]:
        if not isinstance(node, dict):
            return []
        found = list(node.get("properties", {}))
        for sub in (*node.get("properties", {}).values(), node.get("items")):
            found += names(sub)
        return found

    assert all(allowed.match(n) for n in names(params)), names(params)
    assert len(set(params["properties"])) == 6  # "order by" and "order_by" kept apart
    assert params["required"] == ["_filter"]
    assert len([loss for loss in exported.losses if loss.keyword == "properties"]) == 5
    order_space = next(n for n in params["properties"] if n.startswith("order_by_"))
    long_wire = next(n for n in params["properties"] if n.startswith("xxx"))
    wire = {
        "_filter": "status eq 'open'",
        "page_size_": 20,
        "order_by": "name",
        order_space: "date",
        long_wire: True,
        "where": [{"field_name": "a"}],
    }
    message = {"content": [{"type": "tool_use", "id": "t1", "name": "list_items", "input": wire}]}
    [call] = Anthropic().parse(message, tools=[spec])
    assert call.arguments == {
        "$filter": "status eq 'open'",
        "page[size]": 20,
        "order_by": "name",
        "order by": "date",
        long_name: True,
        "where": [{"field name": "a"}],
    }
    keeper = Keeper(principal=APP, ledger="memory://")
    keeper.catalog.add(Tool(spec=spec, connector=Upstream()))
    async with keeper:
        result = await keeper.execute(call)
    assert result.status is CallStatus.SUCCEEDED, result.error
    assert seen == [call.arguments]


def test_a_property_several_root_parts_give_keeps_what_each_says() -> None:
    # allOf: every part holds (a union would let 500 and "big" through); anyOf: either may,
    # each whole (an Optional's own anyOf keeps its description).
    schema = {
        "allOf": [
            {"type": "object", "properties": {"size": {"type": "integer"}}, "required": ["size"]},
            {"properties": {"size": {"minimum": 1, "maximum": 10}}},
        ],
        "anyOf": [
            {
                "type": "object",
                "properties": {
                    "order": {
                        "anyOf": [{"type": "string"}, {"type": "null"}],
                        "description": "the order id",
                    }
                },
            },
            {"type": "object", "properties": {"order": {"type": "integer"}}},
        ],
    }
    params = Anthropic().export_tool(ToolSpec(name="t", input_schema=schema)).value["input_schema"]
    from toolkeeper.schema.validate import compile_validator

    validator = compile_validator(params)
    assert params["properties"]["size"] == {"type": "integer", "minimum": 1, "maximum": 10}
    assert not validator.is_valid({"size": 500}) and not validator.is_valid({"size": "big"})
    assert params["properties"]["order"]["anyOf"][0]["description"] == "the order id"
    assert validator.is_valid({"size": 3, "order": 7})


def test_allof_parts_read_against_their_siblings_are_not_merged_into_one() -> None:
    schema = {
        "allOf": [
            {"properties": {"x": {"type": "object", "properties": {"a": {}}}}},
            {"properties": {"x": {"type": "object", "additionalProperties": False}}},
            {"properties": {"t": {"type": "array", "prefixItems": [{"type": "string"}]}}},
            {"properties": {"t": {"type": "array", "items": {"type": "integer"}}}},
        ]
    }
    params = Anthropic().export_tool(ToolSpec(name="t", input_schema=schema)).value["input_schema"]
    from toolkeeper.schema.validate import compile_validator

    validator = compile_validator(params)
    assert not validator.is_valid({"x": {"a": 1}})  # the original refuses it: no property allowed
    assert not validator.is_valid({"t": ["s"]})  # and this ("s" is no integer)


STRICT_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "format": "uri"},
        "days": {"type": "integer"},
        "stops": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    },
    "required": ["city"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("strict", [True, False])
def test_strict_tool_use_round_trips(strict: bool) -> None:
    definition = ToolParam(name="weather", input_schema=STRICT_SCHEMA, strict=strict)
    spec = Anthropic().import_tool(definition).value
    assert spec.metadata["strict"] is strict
    exported = Anthropic().export_tool(spec)
    assert exported.lossless
    assert exported.value == definition
    DEFINITION["anthropic"](exported.value)


def test_strict_tool_use_closes_objects_and_describes_what_it_cannot_take() -> None:
    schema = {
        "type": "object",
        "properties": {
            "days": {"type": "integer", "minimum": 1},
            "where": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    spec = ToolSpec(name="weather", input_schema=schema, metadata={"strict": True})
    exported = Anthropic().export_tool(spec)
    assert exported.value["strict"] is True
    params = exported.value["input_schema"]
    assert params["additionalProperties"] is False
    assert params["properties"]["where"]["additionalProperties"] is False
    assert "required" not in params  # optional properties stay optional
    assert "minimum" not in params["properties"]["days"]
    assert [(loss.pointer, loss.action) for loss in exported.losses] == [
        ("/input_schema/properties/days/minimum", Action.MOVED_TO_DESCRIPTION)
    ]
    DEFINITION["anthropic"](exported.value)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"data": {"type": "object"}}},  # free-form
        {"type": "object", "properties": {"x": {}}},  # untyped
        {  # recursive
            "type": "object",
            "properties": {"node": {"$ref": "#/$defs/node"}},
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {"next": {"$ref": "#/$defs/node"}},
                    "additionalProperties": False,
                }
            },
        },
    ],
    ids=["free_form", "untyped", "recursive"],
)
def test_a_declared_strict_the_schema_cannot_take_goes_out_non_strict_and_reported(
    schema: dict[str, object],
) -> None:
    spec = ToolSpec(name="put", input_schema=schema, metadata={"strict": True})
    exported = Anthropic().export_tool(spec)
    assert exported.value["strict"] is False
    assert exported.value["input_schema"] == {**schema}
    assert [loss.keyword for loss in exported.losses] == ["strict"]
    with pytest.raises(LossError):
        Anthropic().export_tool(spec, strict=True)


def test_strict_declared_for_openai_is_not_carried_to_anthropic() -> None:
    # Several SDKs mark every OpenAI tool strict; Anthropic refuses a request whose strict
    # schemas together compile to too large a grammar.
    definition = {
        "type": "function",
        "function": {"name": "weather", "parameters": STRICT_SCHEMA, "strict": True},
    }
    spec = OpenAIChat().import_tool(definition).value
    exported = Anthropic().export_tool(spec)
    assert "strict" not in exported.value and exported.lossless
