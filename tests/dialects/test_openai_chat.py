"""OpenAI Chat Completions: strict export, parallel calls, bad JSON, names mapped back."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from toolkeeper.core.values import ToolSpec
from toolkeeper.dialects import Action, LossError, OpenAIChat

from .fixtures import load

WEATHER = ToolSpec(
    name="weather.get",
    description="Current weather.",
    input_schema={
        "type": "object",
        "properties": {
            "location": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["location"],
    },
)


def test_export_is_strict_with_optional_properties_made_nullable() -> None:
    out = OpenAIChat().export_tool(WEATHER)
    function = out.value["function"]
    assert function["strict"] is True
    params = function["parameters"]
    assert params["required"] == ["location", "unit"]
    assert params["additionalProperties"] is False
    assert params["properties"]["unit"] == {
        "type": ["string", "null"],
        "enum": ["celsius", "fahrenheit", None],
    }
    assert [(loss.keyword, loss.action) for loss in out.losses] == [("name", Action.REWRITTEN)]
    assert function["name"] == "weather_get"


def test_a_free_form_object_is_exported_non_strict_and_reported() -> None:
    spec = ToolSpec(name="put", input_schema={"type": "object", "additionalProperties": True})
    out = OpenAIChat().export_tool(spec)
    assert out.value["function"]["strict"] is False
    assert out.losses[0].keyword == "strict"
    with pytest.raises(LossError) as caught:
        OpenAIChat().export_tool(spec, strict=True)
    assert caught.value.losses[0].keyword == "strict"


def test_strict_mode_can_be_turned_off_without_loss() -> None:
    spec = ToolSpec(name="put", input_schema={"type": "object", "additionalProperties": True})
    out = OpenAIChat(strict_schema=False).export_tool(spec)
    assert out.lossless
    assert out.value["function"]["strict"] is False


def test_parse_returns_every_parallel_call_in_order() -> None:
    calls = OpenAIChat().parse(load("openai_chat_parallel.json"))
    assert [(c.call_id, c.name) for c in calls] == [
        ("call_12345xyz", "get_weather"),
        ("call_67890abc", "get_weather"),
        ("call_99999def", "send_email"),
    ]
    assert calls[1].arguments == {"location": "Bogotá, Colombia"}


def test_unparsable_arguments_stay_raw_text_instead_of_raising() -> None:
    [call] = OpenAIChat().parse(load("openai_chat_bad_arguments.json"))
    assert call.arguments == '{"location": "Paris, Fra'


def test_an_error_payload_has_no_calls() -> None:
    assert OpenAIChat().parse(load("openai_chat_error.json")) == []


def test_parse_maps_rewritten_names_back_and_drops_nulls_for_absent_arguments() -> None:
    message = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {
                    "name": "weather_get",
                    "arguments": '{"location": "Oslo", "unit": null}',
                },
            }
        ],
    }
    [call] = OpenAIChat().parse(message, tools=[WEATHER])
    assert call.name == "weather.get"
    assert call.arguments == {"location": "Oslo"}
    assert call.metadata["absent_nulls"] == ["/unit"]


def test_import_reads_a_definition_back() -> None:
    exported = OpenAIChat(strict_schema=False).export_tool(WEATHER).value
    spec = OpenAIChat().import_tool(exported).value
    assert spec.name == "weather_get"
    assert spec.input_schema == WEATHER.input_schema
    assert spec.metadata["strict"] is False


def test_references_stay_strict_with_their_siblings_and_root_recursion() -> None:
    spec = ToolSpec(
        name="tree",
        input_schema={
            "type": "object",
            "properties": {
                "a": {"$ref": "#/$defs/A", "description": "an A"},
                "child": {"$ref": "#"},
            },
            "required": ["a"],
            "additionalProperties": False,
            "$defs": {"A": {"type": "string"}},
        },
    )
    out = OpenAIChat().export_tool(spec, strict=True)
    params = out.value["function"]["parameters"]
    assert out.value["function"]["strict"] is True
    assert params["properties"]["a"] == {"$ref": "#/$defs/A", "description": "an A"}
    assert params["properties"]["child"] == {"anyOf": [{"$ref": "#"}, {"type": "null"}]}
    assert params["$defs"] == {"A": {"type": "string"}}


def test_a_null_for_an_argument_that_accepts_anything_is_kept() -> None:
    spec = ToolSpec(name="put", input_schema={"type": "object", "properties": {"value": {}}})
    message = {
        "tool_calls": [
            {
                "id": "c",
                "type": "function",
                "function": {"name": "put", "arguments": '{"value": null}'},
            }
        ]
    }
    [call] = OpenAIChat().parse(message, tools=[spec])
    assert call.arguments == {"value": None}


class Address(BaseModel):
    street: str
    zip: str = "00000"
    note: str | None = None


@pytest.mark.anyio
async def test_nulls_strict_mode_puts_in_nested_objects_are_dropped_and_the_call_runs() -> None:
    from toolkeeper import CallStatus, Keeper

    keeper = Keeper(ledger="memory://")

    @keeper.tool(effect="read_only")
    async def ship(to: Address, copies: list[Address] | None = None) -> str:
        return f"{to.street} {to.zip} {to.note} {len(copies or [])}"

    [spec] = keeper.catalog.specs()
    [tool] = OpenAIChat().export_tools([spec]).value
    assert tool["function"]["strict"] is True
    # What a strict-mode model must send: every property, null for the absent ones.
    arguments = {
        "to": {"street": "Main", "zip": None, "note": None},
        "copies": [{"street": "Side", "zip": None, "note": "x"}],
    }
    message = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "ship", "arguments": json.dumps(arguments)},
            }
        ],
    }
    [call] = OpenAIChat().parse(message, tools=[spec])
    assert call.metadata["absent_nulls"] == ["/to/zip", "/copies/0/zip"]
    async with keeper:
        result = await keeper.execute(call)
    assert result.status is CallStatus.SUCCEEDED, result.error
    assert result.data == "Main 00000 None 1"


@pytest.mark.parametrize(
    "schema",
    [
        {
            "anyOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]},
            ]
        },
        {
            "$ref": "#/$defs/Args",
            "$defs": {"Args": {"type": "object", "properties": {"a": {"type": "string"}}}},
        },
    ],
)
def test_a_root_that_is_a_choice_or_a_reference_is_exported_without_strict_mode(
    schema: dict[str, object],
) -> None:
    # OpenAI takes a strict schema only when its root is a plain object.
    exported = OpenAIChat().export_tool(ToolSpec(name="t", input_schema=schema))
    assert exported.value["function"]["strict"] is False
    [loss] = [loss for loss in exported.losses if loss.keyword == "strict"]
    assert "root" in loss.reason
