"""Gemini: the parametersJsonSchema subset, functionCall parts without ids, functionResponse."""

from __future__ import annotations

import pytest
from google.genai import types as genai_types

from toolkeeper.core.states import CallStatus
from toolkeeper.core.values import ToolResult, ToolSpec
from toolkeeper.dialects import Action, Gemini, ToolChoice

from .fixtures import load


def test_parse_synthesizes_ids_stable_within_a_turn_and_distinct_across_turns() -> None:
    """The same response (by its responseId, or the caller's `turn`) parsed again replays;
    an identical call in another turn is another call. Without either, ids were the same in
    every turn: a later `get_weather(Paris)` replayed the first one's stale result."""
    payload = load("gemini_parallel.json")
    first = Gemini().parse(payload, turn="t1")
    again = Gemini().parse(load("gemini_parallel.json"), turn="t1")
    later = Gemini().parse(load("gemini_parallel.json"), turn="t2")
    assert [c.name for c in first] == ["power_disco_ball", "start_music", "dim_lights"]
    assert [c.call_id for c in first] == [c.call_id for c in again]
    assert len({c.call_id for c in first}) == 3
    assert not {c.call_id for c in first} & {c.call_id for c in later}
    assert all(c.metadata["synthetic_id"] for c in first)
    with_id = Gemini().parse({**payload, "responseId": "r-9"})
    assert [c.call_id for c in with_id] == [
        c.call_id for c in Gemini().parse({**payload, "responseId": "r-9"})
    ]
    unnamed = [Gemini().parse(payload) for _ in range(2)]
    assert not {c.call_id for c in unnamed[0]} & {c.call_id for c in unnamed[1]}


def test_ids_gemini_gives_are_kept_and_sent_back() -> None:
    part = {"functionCall": {"id": "fc-1", "name": "f", "args": {}}}
    [call] = Gemini().parse([part])
    assert call.call_id == "fc-1"
    result = ToolResult(call_id="fc-1", tool="f", status=CallStatus.SUCCEEDED, data={"ok": 1})
    assert Gemini().format_result(result)["functionResponse"]["id"] == "fc-1"


def test_synthetic_ids_are_left_out_of_the_function_response() -> None:
    [call, *_] = Gemini().parse(load("gemini_parallel.json"))
    result = ToolResult(
        call_id=call.call_id, tool=call.name, status=CallStatus.SUCCEEDED, data=True
    )
    assert Gemini().format_result(result) == {
        "functionResponse": {"name": "power_disco_ball", "response": {"output": True}}
    }


def test_an_error_payload_has_no_calls() -> None:
    assert Gemini().parse(load("gemini_error.json")) == []


def test_the_sdks_function_calls_and_a_part_on_its_own_parse_as_the_calls_they_hold() -> None:
    """`response.function_calls`, google-genai's way to the calls, lists `FunctionCall`s
    without their parts: it parsed to no calls, as did one part or one call on its own."""
    response = genai_types.GenerateContentResponse.model_validate(
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [
                            {"text": "Both at once."},
                            {"functionCall": {"id": "fc-1", "name": "f", "args": {"a": 1}}},
                            {"functionCall": {"id": "fc-2", "name": "g", "args": {}}},
                        ],
                    }
                }
            ]
        }
    )
    whole = Gemini().parse(response)
    parts = response.candidates[0].content.parts
    assert [c.call_id for c in whole] == ["fc-1", "fc-2"]
    assert Gemini().parse(response.function_calls) == whole
    assert [c for part in parts for c in Gemini().parse(part)] == whole
    assert [c for part in parts[1:] for c in Gemini().parse(part.function_call)] == whole
    assert Gemini().parse({"name": "f", "args": {"a": 1}, "id": "fc-1"}) == whole[:1]


def test_a_candidate_on_its_own_or_the_candidates_parse_as_the_calls_they_hold() -> None:
    """`response.candidates[0]` parsed to no calls: its parts, under `content`, were never
    looked at."""
    response = genai_types.GenerateContentResponse.model_validate(load("gemini_parallel.json"))
    whole = Gemini().parse(response, turn="t1")
    assert len(whole) == 3
    assert response.candidates is not None
    assert Gemini().parse(response.candidates[0], turn="t1") == whole
    assert Gemini().parse(response.candidates, turn="t1") == whole


def test_unsupported_keywords_move_into_the_description() -> None:
    spec = ToolSpec(
        name="f",
        input_schema={
            "type": "object",
            "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$", "const": "EUR"}},
        },
    )
    out = Gemini().export_tool(spec)
    code = out.value["parametersJsonSchema"]["properties"]["code"]
    assert code["enum"] == ["EUR"]
    assert "pattern" in code["description"]
    assert [(loss.keyword, loss.action) for loss in out.losses] == [
        ("pattern", Action.MOVED_TO_DESCRIPTION)
    ]


def test_import_reads_the_older_openapi_schema() -> None:
    declaration = {
        "name": "f",
        "parameters": {
            "type": "OBJECT",
            "properties": {"n": {"type": "INTEGER", "nullable": True}},
            "required": ["n"],
        },
    }
    spec = Gemini().import_tool(declaration).value
    assert spec.input_schema == {
        "type": "object",
        "properties": {"n": {"type": ["integer", "null"]}},
        "required": ["n"],
    }


def test_parallel_off_cannot_be_said_and_is_reported() -> None:
    out = Gemini().export_tool_choice(ToolChoice(mode="tool", name="f", parallel=False))
    assert out.value == {
        "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["f"]}}
    }
    assert out.losses[0].keyword == "parallel"


def test_a_rewritten_name_goes_back_as_the_model_called_it() -> None:
    # Gemini pairs a response without an id with its call by name.
    spec = ToolSpec(name="geo.lookup/v2", description="Look a place up.")
    [exported] = Gemini().export_tools([spec]).value
    wire = exported["name"]
    assert wire != spec.name
    part = {"functionCall": {"name": wire, "args": {}}}
    [call] = Gemini().parse([part], tools=[spec])
    assert call.name == spec.name
    result = ToolResult(call_id=call.call_id, tool=call.name, status=CallStatus.SUCCEEDED, data=1)
    assert Gemini().format_result(result)["functionResponse"]["name"] == wire


def test_the_same_call_in_another_response_gets_another_id() -> None:
    # Gemini gives no call ids: one response parsed twice keeps its ids (a retry replays),
    # but the same call asked for again in a later turn is a new call.
    def response(response_id: str) -> dict[str, object]:
        part = {"functionCall": {"name": "get_time", "args": {}}}
        return {"responseId": response_id, "candidates": [{"content": {"parts": [part]}}]}

    [first] = Gemini().parse(response("turn-1"))
    [again] = Gemini().parse(response("turn-1"))
    [later] = Gemini().parse(response("turn-2"))
    assert first.call_id == again.call_id != later.call_id


def test_nullable_in_gemini_schemas_lets_null_through_enums_and_any_of() -> None:
    from toolkeeper.schema.validate import compile_validator

    declaration = {
        "name": "pick",
        "description": "Pick one.",
        "parameters": {
            "type": "OBJECT",
            "properties": {
                "a": {"type": "STRING", "nullable": True, "enum": ["x", "y"]},
                "b": {"anyOf": [{"type": "STRING"}, {"type": "INTEGER"}], "nullable": True},
            },
        },
    }
    spec = Gemini().import_tool(declaration).value
    validator = compile_validator(spec.input_schema)
    assert validator.is_valid({"a": None, "b": None})
    assert validator.is_valid({"a": "x", "b": 3})
    assert not validator.is_valid({"a": "z"})


def test_a_result_answers_under_the_name_its_tool_was_exported_among_others() -> None:
    specs = [ToolSpec(name="a b"), ToolSpec(name="a_b")]
    wire = {name: w for w, name in Gemini().wire_names(specs).items()}
    assert wire["a b"] != "a_b"
    result = ToolResult(call_id="tk-gemini-1", tool="a b", status=CallStatus.SUCCEEDED, data=1)
    response = Gemini().format_result(result, tools=specs)["functionResponse"]
    assert response["name"] == wire["a b"]


def test_names_gemini_accepts_are_kept_up_to_128_characters_dots_and_colons_included() -> None:
    # google-genai FunctionDeclaration.name: letters, digits, _ . : -, at most 128.
    long_name = "crm.accounts:" + "x" * 100
    assert Gemini().safe_name(long_name) == long_name
    rewritten = Gemini().safe_name("crm.find account/" + "y" * 200)
    assert len(rewritten) == 128 and rewritten.startswith("crm.find_account_")


def test_a_result_holding_nan_or_infinity_is_sent_as_json() -> None:
    # A result built by hand may hold a float('nan'); JSON has no NaN.
    import json

    result = ToolResult(
        call_id="c1",
        tool="ratio",
        status=CallStatus.SUCCEEDED,
        data={"ratio": float("nan"), "top": [float("inf"), 1.5], "label": "NaN BaNaNa"},
    )
    body = Gemini().format_result(result)["functionResponse"]["response"]
    text = json.dumps(body, allow_nan=False)
    assert json.loads(text) == {
        "output": {"ratio": None, "top": [None, 1.5], "label": "NaN BaNaNa"}
    }


def test_import_follows_references_of_the_openapi_schema_into_its_defs() -> None:
    from google.genai import types as genai_types

    from toolkeeper.schema.validate import compile_validator

    declaration = genai_types.FunctionDeclaration(
        name="adopt",
        parameters=genai_types.Schema(
            type=genai_types.Type.OBJECT,
            properties={"pet": genai_types.Schema(ref="#/defs/Pet")},
            defs={
                "Pet": genai_types.Schema(
                    type=genai_types.Type.OBJECT,
                    properties={"name": genai_types.Schema(type=genai_types.Type.STRING)},
                    required=["name"],
                )
            },
            required=["pet"],
        ),
    )
    converted = Gemini().import_tool(declaration)
    validator = compile_validator(converted.value.input_schema)
    assert converted.lossless
    assert validator.is_valid({"pet": {"name": "Rex"}})
    assert not validator.is_valid({"pet": {}})
    assert not validator.is_valid({"pet": "Rex"})


def test_an_unspecified_openapi_type_is_imported_as_any_value() -> None:
    from google.genai import types as genai_types

    from toolkeeper.schema.validate import compile_validator

    declaration = genai_types.FunctionDeclaration(
        name="store",
        parameters=genai_types.Schema(
            type=genai_types.Type.OBJECT,
            properties={"value": genai_types.Schema(type=genai_types.Type.TYPE_UNSPECIFIED)},
        ),
    )
    spec = Gemini().import_tool(declaration).value
    validator = compile_validator(spec.input_schema)  # (it raised SchemaError)
    assert validator.is_valid({"value": [1, "two"]})


def test_a_function_call_streamed_in_pieces_is_refused_not_run_without_its_arguments() -> None:
    """Vertex AI streams a call's arguments as partialArgs with willContinue: the first piece
    (a name, no args yet) parsed as a call with no arguments, ready to run."""
    first = {"functionCall": {"id": "fc-1", "name": "send", "willContinue": True}}
    rest = {
        "functionCall": {
            "partialArgs": [{"jsonPath": "$.to", "stringValue": "bob@example.com"}],
            "willContinue": True,
        }
    }
    for part in (first, rest):
        response = genai_types.GenerateContentResponse.model_validate(
            {"candidates": [{"content": {"role": "model", "parts": [part]}}]}
        )
        for given in (response, response.function_calls, part):
            with pytest.raises(ValueError, match="streamed in pieces"):
                Gemini().parse(given)
    whole = {"functionCall": {"id": "fc-1", "name": "send", "args": {"to": "bob@example.com"}}}
    assert [c.call_id for c in Gemini().parse(whole)] == ["fc-1"]


def test_import_reads_openapi_fields_by_their_python_names_and_counts_given_as_text() -> None:
    """google-genai takes a Schema's fields by their Python names (`any_of`, `min_items`) and
    its int64 counts as text, as the REST API writes them: such keys were kept as unknown
    keywords, so a choice or a limit was silently lost (the property took any value), and a
    count as text made the schema invalid."""
    from google.genai import types as genai_types

    from toolkeeper.schema.validate import compile_validator

    declaration = {
        "name": "tag",
        "parameters": {
            "type": "OBJECT",
            "properties": {
                "tags": {"type": "ARRAY", "items": {"type": "STRING"}, "min_items": 1},
                "id": {
                    "any_of": [{"type": "STRING", "max_length": "8"}, {"type": "INTEGER"}],
                    "nullable": True,
                },
                "meta": {
                    "type": "OBJECT",
                    "additional_properties": {"type": "INTEGER"},
                    "maxProperties": "2",
                },
            },
            "required": ["tags"],
        },
    }
    converted = Gemini().import_tool(declaration)
    as_the_sdk_reads_it = genai_types.FunctionDeclaration.model_validate(declaration)
    assert converted.value == Gemini().import_tool(as_the_sdk_reads_it).value
    assert converted.lossless
    validator = compile_validator(converted.value.input_schema)
    assert validator.is_valid({"tags": ["a"], "id": 7, "meta": {"a": 1}})
    assert validator.is_valid({"tags": ["a"], "id": None})
    assert not validator.is_valid({"tags": []})
    assert not validator.is_valid({"tags": ["a"], "id": "much too long"})
    assert not validator.is_valid({"tags": ["a"], "id": [1]})
    assert not validator.is_valid({"tags": ["a"], "meta": {"a": "x"}})
    assert not validator.is_valid({"tags": ["a"], "meta": {"a": 1, "b": 2, "c": 3}})
