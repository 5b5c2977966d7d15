"""OpenAI Chat Completions: strict export, parallel calls, bad JSON, names mapped back."""

from __future__ import annotations

import json
from typing import Annotated, Any

import msgspec
import pytest
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionFunctionMessageParam,
    ChatCompletionFunctionTool,
)
from openai.types.shared import FunctionDefinition
from pydantic import BaseModel, Field, TypeAdapter

from toolkeeper import CallStatus, Effect, Keeper, Tool
from toolkeeper.core.values import ToolResult, ToolSpec
from toolkeeper.dialects import Action, LossError, OpenAIChat
from toolkeeper.schema.validate import compile_validator

from ..conftest import APP
from .fixtures import load
from .sdk import DEFINITION

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


def test_a_choice_on_its_own_or_the_choices_parse_as_the_calls_they_hold() -> None:
    """`completion.choices[0]`, the usual way to a message in the SDK, parsed to no calls
    (its tool calls, or its legacy function_call, under `message` were never looked at), and
    the list of choices to one call without a name."""
    completion = ChatCompletion.model_validate(load("openai_chat_parallel.json"))
    whole = OpenAIChat().parse(completion)
    assert len(whole) == 3
    assert OpenAIChat().parse(completion.choices[0]) == whole
    assert OpenAIChat().parse(completion.choices) == whole
    legacy = {
        "index": 0,
        "finish_reason": "function_call",
        "message": {
            "role": "assistant",
            "content": None,
            "function_call": {"name": "get_weather", "arguments": '{"location": "Oslo"}'},
        },
    }
    [call] = OpenAIChat().parse(legacy)
    assert (call.name, call.arguments) == ("get_weather", {"location": "Oslo"})


def test_a_legacy_function_call_is_answered_with_a_function_message() -> None:
    """A legacy `function_call` has no id; its result went out as a `role: "tool"` message
    naming a made-up `tool_call_id`, which OpenAI refuses (a tool message must answer a
    `tool_calls` entry). It is answered as the API asks: `role: "function"` with the name."""
    message = {
        "role": "assistant",
        "content": None,
        "function_call": {"name": "weather_get", "arguments": '{"location": "Oslo"}'},
    }
    [call] = OpenAIChat().parse(message, tools=[WEATHER], turn="t1")
    result = ToolResult(call_id=call.call_id, tool=call.name, status=CallStatus.SUCCEEDED, data=1)
    answer = OpenAIChat().format_result(result, tools=[WEATHER])
    assert answer == {"role": "function", "name": "weather_get", "content": "1"}
    adapter: TypeAdapter[Any] = TypeAdapter(ChatCompletionFunctionMessageParam)
    assert adapter.validate_python(answer) == answer
    [tool_call] = OpenAIChat().parse(load("openai_chat_parallel.json"))[:1]
    result = msgspec.structs.replace(result, call_id=tool_call.call_id)
    assert OpenAIChat().format_result(result)["tool_call_id"] == tool_call.call_id


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


def test_a_described_reference_is_inlined_for_strict_mode_and_root_recursion_kept() -> None:
    # OpenAI: "$ref cannot have keywords {'description'}" (its SDK inlines such refs too).
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
    assert params["properties"]["a"] == {"type": "string", "description": "an A"}
    assert params["properties"]["child"] == {"anyOf": [{"$ref": "#"}, {"type": "null"}]}
    assert "$defs" not in params


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

    keeper = Keeper(principal=APP, ledger="memory://")

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


@pytest.mark.anyio
async def test_a_root_choice_is_merged_into_one_strict_object_and_its_calls_run() -> None:
    # OpenAI (and Anthropic) refuse anyOf/oneOf/allOf at the root of tool parameters.
    keeper = Keeper(principal=APP, ledger="memory://")
    seen: list[object] = []

    class Upstream:  # an imported tool: its schema is what its server declared
        async def invoke(self, spec: object, arguments: object, ctx: object) -> str:
            seen.append(arguments)
            return "ok"

    schema = {
        "anyOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"$ref": "#/$defs/B"},
        ],
        "$defs": {
            "B": {
                "type": "object",
                "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}},
                "required": ["b"],
            }
        },
    }
    spec = ToolSpec(name="pick", input_schema=schema, effect=Effect.READ_ONLY)
    keeper.catalog.add(Tool(spec=spec, connector=Upstream()))
    exported = OpenAIChat().export_tool(spec)
    function = exported.value["function"]
    assert function["strict"] is True
    params = function["parameters"]
    assert "anyOf" not in params and params["type"] == "object"
    assert params["properties"]["a"] == {
        "anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]
    }
    assert params["properties"]["b"] == {"type": ["integer", "null"]}
    [loss] = [loss for loss in exported.losses if loss.keyword == "anyOf"]
    assert loss.pointer == "/input_schema/anyOf" and "merged" in loss.reason
    assert compile_validator(params).is_valid({"a": None, "b": 7})
    message = {
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "pick", "arguments": '{"a": null, "b": 7}'},
            }
        ]
    }
    [call] = OpenAIChat().parse(message, tools=[spec])
    assert call.arguments == {"b": 7}
    async with keeper:
        result = await keeper.execute(call)
    assert result.status is CallStatus.SUCCEEDED, result.error
    assert seen == [{"b": 7}]


def test_a_root_reference_is_inlined_so_the_tool_stays_strict() -> None:
    schema = {
        "$ref": "#/$defs/Args",
        "$defs": {"Args": {"type": "object", "properties": {"a": {"type": "string"}}}},
    }
    exported = OpenAIChat().export_tool(ToolSpec(name="t", input_schema=schema))
    assert exported.value["function"]["strict"] is True
    assert exported.value["function"]["parameters"] == {
        "type": "object",
        "properties": {"a": {"type": ["string", "null"]}},
        "required": ["a"],
        "additionalProperties": False,
    }


def _exported_params(keeper: Keeper, **dialect: bool) -> tuple[dict[str, object], bool, list[str]]:
    [spec] = keeper.catalog.specs()
    exported = OpenAIChat(**dialect).export_tool(spec)
    function = exported.value["function"]
    return function["parameters"], function["strict"], [loss.keyword for loss in exported.losses]


def test_a_described_model_parameter_is_strict_without_siblings_beside_its_ref() -> None:
    keeper = Keeper(principal=APP, ledger="memory://")

    @keeper.tool(effect="read_only")
    async def ship(to: Annotated[Address, Field(description="where it goes")]) -> str:
        return to.street

    params, strict, _ = _exported_params(keeper)
    assert strict is True
    to = params["properties"]["to"]  # type: ignore[index]
    assert "$ref" not in to and to["description"] == "where it goes"
    assert to["type"] == "object" and to["additionalProperties"] is False


@pytest.mark.parametrize("strict_schema", [True, False])
def test_tuples_and_bare_arrays_get_items_openai_requires(strict_schema: bool) -> None:
    # OpenAI refuses any array without `items`: "array schema missing items", strict or not.
    keeper = Keeper(principal=APP, ledger="memory://")

    @keeper.tool(effect="read_only")
    async def plot(figsize: tuple[float, float], cell: tuple[int, str], tags: list) -> str:  # type: ignore[type-arg]
        return "ok"

    params, strict, losses = _exported_params(keeper, strict_schema=strict_schema)
    props = params["properties"]  # type: ignore[index]
    figsize = props["figsize"]
    assert figsize["items"] == {"type": "number"} and "prefixItems" not in figsize
    assert figsize["minItems"] == figsize["maxItems"] == 2
    assert props["cell"]["items"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert losses.count("prefixItems") == 2
    assert "items" in props["tags"]  # an array of anything: `{}` (not strict)
    assert strict is False  # (`tags` may hold anything: strict mode cannot say that)


def test_a_tuple_alone_stays_strict() -> None:
    keeper = Keeper(principal=APP, ledger="memory://")

    @keeper.tool(effect="read_only")
    async def plot(figsize: tuple[float, float]) -> str:
        return "ok"

    params, strict, _ = _exported_params(keeper)
    assert strict is True
    assert params["properties"]["figsize"]["items"] == {"type": "number"}  # type: ignore[index]


class Card(BaseModel):
    card_number: str
    cvv: str | None = None


class Bank(BaseModel):
    iban: str
    reference: str = "none"


@pytest.mark.anyio
async def test_strict_nulls_are_dropped_in_the_union_branch_the_value_follows() -> None:
    keeper = Keeper(principal=APP, ledger="memory://")

    @keeper.tool(effect="read_only")
    async def pay(method: Card | Bank) -> str:
        return repr(method)

    [spec] = keeper.catalog.specs()
    arguments = {"method": {"iban": "DE89", "reference": None}}
    message = {
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "pay", "arguments": json.dumps(arguments)},
            }
        ]
    }
    [call] = OpenAIChat().parse(message, tools=[spec])
    assert call.metadata["absent_nulls"] == ["/method/reference"]
    async with keeper:
        result = await keeper.execute(call)
    assert result.status is CallStatus.SUCCEEDED, result.error
    assert "reference='none'" in result.data


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"value": True}},
        {"type": "object", "properties": {"values": {"type": "array", "items": True}}},
        {"type": "object", "properties": {"pick": {"enum": [f"v{i}" for i in range(1001)]}}},
        {
            "type": "object",
            "properties": {
                "code": {"type": "string", "enum": [f"{i:04d}-" + "x" * 60 for i in range(300)]}
            },
        },
    ],
)
def test_what_strict_mode_cannot_take_is_exported_non_strict(schema: dict[str, object]) -> None:
    # An untyped value (`true` as much as `{}`); more than 1,000 enum values; a string enum of
    # more than 250 values holding over 15,000 characters (OpenAI's published limits).
    exported = OpenAIChat().export_tool(ToolSpec(name="t", input_schema=schema))
    assert exported.value["function"]["strict"] is False
    assert [loss.keyword for loss in exported.losses] == ["strict"]


def test_nesting_deeper_than_strict_mode_takes_is_exported_non_strict() -> None:
    def nested(levels: int) -> dict[str, object]:
        node: dict[str, object] = {"type": "string"}
        for _ in range(levels):
            node = {"type": "object", "properties": {"x": node}, "required": ["x"]}
        return node

    assert (
        OpenAIChat()
        .export_tool(ToolSpec(name="t", input_schema=nested(10)))
        .value["function"]["strict"]
    )
    deep = OpenAIChat().export_tool(ToolSpec(name="t", input_schema=nested(11)))
    assert deep.value["function"]["strict"] is False
    assert "nesting" in deep.losses[0].reason


OPEN_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
    "required": ["city"],
}
STRICT_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": ["string", "null"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("strict", "schema"), [(True, STRICT_SCHEMA), (False, OPEN_SCHEMA)], ids=["strict", "not"]
)
def test_a_definition_declaring_strict_round_trips_as_it_came(
    strict: bool, schema: dict[str, object]
) -> None:
    definition = ChatCompletionFunctionTool(
        type="function",
        function=FunctionDefinition(name="weather", parameters=schema, strict=strict),
    )
    spec = OpenAIChat().import_tool(definition).value
    exported = OpenAIChat().export_tool(spec)
    assert exported.lossless
    assert exported.value == definition.model_dump(mode="json", exclude_none=True)
    DEFINITION["openai_chat"](exported.value)


def test_a_declared_strict_the_dialect_turns_off_is_reported() -> None:
    definition = {
        "type": "function",
        "function": {"name": "weather", "parameters": STRICT_SCHEMA, "strict": True},
    }
    spec = OpenAIChat().import_tool(definition).value
    exported = OpenAIChat(strict_schema=False).export_tool(spec)
    assert exported.value["function"]["strict"] is False
    assert [(loss.pointer, loss.keyword) for loss in exported.losses] == [
        ("/metadata/strict", "strict")
    ]
