"""Property names Anthropic refuses: renamed on export, named back in calls, in every place a
schema puts properties."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import pytest

from toolkeeper.core.values import ToolSpec
from toolkeeper.dialects import Anthropic
from toolkeeper.dialects.keys import wire_keys
from toolkeeper.schema.validate import compile_validator

from ..conftest import APP

ALLOWED = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")
BASE = {"type": "object", "properties": {"id": {}}}

SHAPES: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    (
        "a nested object",
        {"properties": {"$filter": {"type": "object", "properties": {"a b": {}}}}},
        {"_filter": {"a_b": "v"}},
        {"$filter": {"a b": "v"}},
    ),
    (
        "objects in an array",
        {"properties": {"rows": {"type": "array", "items": {"properties": {"order by": {}}}}}},
        {"rows": [{"order_by": "x"}]},
        {"rows": [{"order by": "x"}]},
    ),
    (
        "a definitions reference",
        {
            "properties": {"f": {"$ref": "#/definitions/F"}},
            "definitions": {"F": {"type": "object", "properties": {"$eq": {}}}},
        },
        {"f": {"_eq": 1}},
        {"f": {"$eq": 1}},
    ),
    (
        "a reference with properties beside it",
        {
            "properties": {"f": {"$ref": "#/$defs/Base", "properties": {"extra key": {}}}},
            "$defs": {"Base": BASE},
        },
        {"f": {"id": 1, "extra_key": 2}},
        {"f": {"id": 1, "extra key": 2}},
    ),
    (
        "both parts of an allOf",
        {
            "properties": {
                "q": {"allOf": [{"$ref": "#/$defs/B"}, {"properties": {"page[size]": {}}}]}
            },
            "$defs": {"B": {"type": "object", "properties": {"$filter": {}}}},
        },
        {"q": {"_filter": "x", "page_size_": 10}},
        {"q": {"$filter": "x", "page[size]": 10}},
    ),
    (
        "a root allOf giving one object property twice",
        {
            "allOf": [
                {"properties": {"q": {"type": "object", "properties": {"$a": {}}}}},
                {"properties": {"q": {"type": "object", "properties": {"$b": {}}}}},
            ]
        },
        {"q": {"_a": 1, "_b": 2}},
        {"q": {"$a": 1, "$b": 2}},
    ),
    (
        "values of additionalProperties",
        {"properties": {"m": {"additionalProperties": {"properties": {"$v": {}}}}}},
        {"m": {"k1": {"_v": 1}}},
        {"m": {"k1": {"$v": 1}}},
    ),
    (
        "values of patternProperties",
        {"properties": {"m": {"patternProperties": {"^k": {"properties": {"$v": {}}}}}}},
        {"m": {"k1": {"_v": 1}}},
        {"m": {"k1": {"$v": 1}}},
    ),
    (
        "the keys of a free-form map (left as they are)",
        {"properties": {"headers": {"additionalProperties": {"type": "string"}}}},
        {"headers": {"X-A b": "1", "$x": "2"}},
        {"headers": {"X-A b": "1", "$x": "2"}},
    ),
    (
        "a tuple position",
        {"properties": {"t": {"type": "array", "prefixItems": [{"properties": {"$a": {}}}]}}},
        {"t": [{"_a": 1}]},
        {"t": [{"$a": 1}]},
    ),
    (
        "a then branch",
        {
            "properties": {"kind": {}},
            "if": {"properties": {"kind": {"const": "a"}}},
            "then": {"properties": {"$x": {}}},
        },
        {"kind": "a", "_x": 1},
        {"kind": "a", "$x": 1},
    ),
]


@pytest.mark.parametrize(
    ("schema", "sent", "expected"),
    [pytest.param(s, w, e, id=label) for label, s, w, e in SHAPES],
)
def test_names_the_model_was_given_are_named_back_wherever_the_schema_puts_them(
    schema: dict[str, Any], sent: dict[str, Any], expected: dict[str, Any]
) -> None:
    spec = ToolSpec(name="t", input_schema={"type": "object", **schema})
    exported = Anthropic().export_tool(spec).value
    message = {"content": [{"type": "tool_use", "id": "u1", "name": "t", "input": sent}]}
    [call] = Anthropic().parse(message, tools=[spec])
    assert call.arguments == expected
    assert compile_validator(exported["input_schema"]).is_valid(sent)


def test_a_refused_name_whose_renamings_are_all_taken_still_gets_a_name_of_its_own() -> None:
    refused = "p" * 60 + "$"
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "_", refused)[:64]
    hashed = f"{cleaned[:55]}_{hashlib.sha256(refused.encode()).hexdigest()[:8]}"
    taken = [cleaned, hashed, f"{hashed[:62]}_x"]  # names the tool itself has
    names = wire_keys([*taken, refused], ALLOWED, 64)
    assert len(set(names.values())) == 4 and all(ALLOWED.fullmatch(n) for n in names.values())


def test_examples_and_names_in_required_and_dependencies_use_the_exported_names() -> None:
    where = {
        "type": "object",
        "properties": {"$eq": {}, "$ne": {}},
        "anyOf": [{"required": ["$eq"]}, {"required": ["$ne"]}],
        "dependentRequired": {"$eq": ["$ne"]},
    }
    schema = {
        "type": "object",
        "properties": {"$filter": {"type": "string"}, "where": where, "top": {}},
        "required": ["$filter"],
    }
    example = {"$filter": "x", "where": {"$ne": 1}, "top": 5}
    spec = ToolSpec(name="t", input_schema=schema, examples=(example,))
    tool = Anthropic().export_tool(spec).value
    params = tool["input_schema"]
    assert tool["input_examples"] == [{"_filter": "x", "where": {"_ne": 1}, "top": 5}]
    exported_where = params["properties"]["where"]
    assert exported_where["anyOf"] == [{"required": ["_eq"]}, {"required": ["_ne"]}]
    assert exported_where["dependentRequired"] == {"_eq": ["_ne"]}
    validator = compile_validator(params)
    assert validator.is_valid(tool["input_examples"][0])
    assert not validator.is_valid({"_filter": "x", "where": {"_eq": 1}})  # $eq needs $ne


def test_a_name_ending_in_a_newline_is_renamed() -> None:
    # (`$` in a pattern matches before a final newline)
    spec = ToolSpec(name="search\n", input_schema={"type": "object", "properties": {"q\n": {}}})
    tool = Anthropic().export_tool(spec).value
    assert tool["name"] == "search_"
    assert list(tool["input_schema"]["properties"]) == ["q_"]


@pytest.mark.anyio
async def test_a_refusal_of_arguments_names_properties_as_the_model_was_shown_them() -> None:
    from toolkeeper import CallStatus, Keeper, Tool
    from toolkeeper.core.signals import ToolFailed

    class Upstream:
        async def invoke(self, spec: object, arguments: object, ctx: object) -> str:
            raise ToolFailed("no customer email on file; ask for the order by date")

    schema = {
        "type": "object",
        "properties": {
            "customer email": {"type": "string"},
            "@type": {"enum": ["person"]},
            "rows": {"type": "array", "items": {"properties": {"order by": {"type": "string"}}}},
        },
        "required": ["customer email"],
    }
    spec = ToolSpec(name="notify", input_schema=schema, effect="read_only")  # type: ignore[arg-type]
    keeper = Keeper(principal=APP, ledger="memory://")
    keeper.catalog.add(Tool(spec=spec, connector=Upstream()))
    sent = {"_type": "robot", "rows": [{"order_by": 3}]}
    message = {"content": [{"type": "tool_use", "id": "u1", "name": "notify", "input": sent}]}
    [call] = Anthropic().parse(message, tools=[spec])
    fine = {"customer_email": "a@b.c", "_type": "person"}
    again = {"content": [{"type": "tool_use", "id": "u2", "name": "notify", "input": fine}]}
    [ok_call] = Anthropic().parse(again, tools=[spec])
    async with keeper:
        refused = await keeper.execute(call)
        failed = await keeper.execute(ok_call)
    assert refused.status is CallStatus.REJECTED
    text = Anthropic().format_result(refused, tools=[spec])["content"]
    assert '/customer_email: \\"customer_email\\" is a required property' in text
    assert "/_type:" in text and "/rows/0/order_by:" in text
    assert "customer email" not in text and "@type" not in text and "order by" not in text
    # The tool's own words are its own: not rewritten.
    own = Anthropic().format_result(failed, tools=[spec])["content"]
    assert "no customer email on file; ask for the order by date" in own
