"""Every exported definition, formatted result and tool_choice is what the vendor's SDK accepts;
parse reads the SDK's response objects exactly as it reads the raw JSON."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import anthropic.types as anthropic_types
import openai.types.chat as chat_types
import openai.types.responses as responses_types
import pytest

from toolkeeper.core.errors import ErrorCode, ToolError
from toolkeeper.core.states import CallStatus
from toolkeeper.core.values import Effect, ToolResult, ToolSpec
from toolkeeper.dialects import DIALECTS, ToolChoice, get_dialect

from .sdk import DEFINITION, RESPONSE, RESULT, TOOL_CHOICE

FIXTURES = Path(__file__).parent / "fixtures"

RICH = ToolSpec(
    name="orders.get_detail",
    title="Order detail",
    description="Look up one order.",
    input_schema={
        "type": "object",
        "properties": {
            "order_id": {"type": "string", "pattern": "^o-[0-9]+$", "minLength": 3},
            "expand": {"type": "array", "items": {"$ref": "#/$defs/Part"}, "uniqueItems": True},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
            "mode": {"oneOf": [{"const": "fast"}, {"const": "full"}]},
            "note": {"type": ["string", "null"]},
        },
        "required": ["order_id"],
        "additionalProperties": False,
        "$defs": {"Part": {"type": "string", "enum": ["lines", "customer"]}},
    },
    output_schema={"type": "object", "properties": {"total": {"type": "number"}}},
    effect=Effect.READ_ONLY,
    idempotent=True,
    examples=({"order_id": "o-1"},),
)
FREE_FORM = ToolSpec(
    name="kv_put",
    input_schema={"type": "object", "properties": {"value": {}}, "additionalProperties": True},
)
RESULTS = [
    ToolResult(
        call_id="call_1",
        tool="orders.get_detail",
        status=CallStatus.SUCCEEDED,
        data={"total": 12.5},
    ),
    ToolResult(
        call_id="call_2", tool="orders.get_detail", status=CallStatus.SUCCEEDED, data="plain text"
    ),
    ToolResult(
        call_id="call_3",
        tool="orders.get_detail",
        status=CallStatus.REJECTED,
        error=ToolError.of(
            ErrorCode.INVALID_ARGUMENTS,
            "order_id does not match ^o-[0-9]+$",
            details={
                "violations": [
                    {"pointer": "/order_id", "keyword": "pattern", "message": "no match"}
                ]
            },
        ),
    ),
]
CHOICES = [
    ToolChoice(),
    ToolChoice(mode="required", parallel=False),
    ToolChoice(mode="none"),
    ToolChoice(mode="tool", name="orders.get_detail", parallel=True),
]


@pytest.mark.parametrize("name", list(DIALECTS))
@pytest.mark.parametrize("spec", [RICH, FREE_FORM], ids=["rich", "free_form"])
def test_exported_definitions_validate_as_sdk_objects(name: str, spec: ToolSpec) -> None:
    DEFINITION[name](get_dialect(name).export_tool(spec).value)


@pytest.mark.parametrize("name", list(DIALECTS))
@pytest.mark.parametrize("result", RESULTS, ids=["data", "text", "error"])
def test_formatted_results_validate_as_sdk_objects(name: str, result: ToolResult) -> None:
    RESULT[name](get_dialect(name).format_result(result))


@pytest.mark.parametrize("name", list(DIALECTS))
@pytest.mark.parametrize("choice", CHOICES, ids=["auto", "required", "none", "tool"])
def test_tool_choices_validate_as_sdk_objects(name: str, choice: ToolChoice) -> None:
    TOOL_CHOICE[name](get_dialect(name).export_tool_choice(choice).value)


@pytest.mark.parametrize("name", list(DIALECTS))
def test_formatted_errors_carry_code_message_and_retryable(name: str) -> None:
    text = json.dumps(get_dialect(name).format_result(RESULTS[2]))
    assert "INVALID_ARGUMENTS" in text
    assert "retryable" in text
    assert "/order_id" in text


def _fixture(name: str) -> object:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


PARALLEL = {
    "openai_chat": "openai_chat_parallel.json",
    "openai_responses": "openai_responses_parallel.json",
    "anthropic": "anthropic_parallel.json",
    "gemini": "gemini_parallel.json",
    "mcp": "mcp_call.json",
}


@pytest.mark.parametrize("name", list(DIALECTS))
def test_parse_reads_sdk_objects_like_raw_json(name: str) -> None:
    raw = _fixture(PARALLEL[name])
    dialect = get_dialect(name)
    from_raw = dialect.parse(raw, turn="t1")  # (Gemini's fixture has no responseId)
    from_sdk = dialect.parse(RESPONSE[name](raw), turn="t1")
    assert len(from_raw) >= 2
    assert from_sdk == from_raw
    assert len({call.call_id for call in from_raw}) == len(from_raw)


@pytest.mark.parametrize("name", list(DIALECTS))
def test_parse_reads_a_response_given_as_json_text_like_raw_json(name: str) -> None:
    raw = _fixture(PARALLEL[name])
    dialect = get_dialect(name)
    from_raw = dialect.parse(raw, turn="t1")
    assert dialect.parse(json.dumps(raw), turn="t1") == from_raw
    assert dialect.parse(json.dumps(raw).encode(), turn="t1") == from_raw


@pytest.mark.parametrize("name", list(DIALECTS))
@pytest.mark.parametrize(
    ("response", "refusal"), [("hello", ValueError), (42, TypeError), (True, TypeError)]
)
def test_parse_refuses_what_is_no_response_instead_of_finding_no_calls(
    name: str, response: object, refusal: type[Exception]
) -> None:
    with pytest.raises(refusal, match=f"the {name} response"):
        get_dialect(name).parse(response)


@pytest.mark.parametrize("name", list(DIALECTS))
def test_only_model_visible_fields_are_exported(name: str) -> None:
    spec = ToolSpec(
        name="pay",
        description="Pay an invoice.",
        permissions=("payments:SECRET_PERMISSION",),
        tags=("SECRET_TAG",),
        aliases=("SECRET_ALIAS",),
        tenants=frozenset({"SECRET_TENANT"}),
        environments=frozenset({"SECRET_ENV"}),
        source="SECRET_CONNECTOR",
        version="SECRET_VERSION",
        metadata={"token": "SECRET_TOKEN"},
    )
    text = json.dumps(get_dialect(name).export_tool(spec).value)
    assert "SECRET" not in text


@pytest.mark.parametrize(
    ("name", "response"),
    [
        (
            "openai_chat",
            {
                "id": "chatcmpl-42",
                "choices": [
                    {
                        "message": {
                            "role": "assistant",
                            "tool_calls": [
                                {"type": "function", "function": {"name": "f", "arguments": "{}"}}
                            ],
                        }
                    }
                ],
            },
        ),
        (
            "openai_responses",
            {
                "id": "resp_42",
                "output": [{"type": "function_call", "name": "f", "arguments": "{}"}],
            },
        ),
        (
            "anthropic",
            {"id": "msg_42", "content": [{"type": "tool_use", "name": "f", "input": {}}]},
        ),
    ],
)
def test_calls_without_ids_take_their_turn_from_the_responses_id(
    name: str, response: dict[str, object]
) -> None:
    """A server that gives tool calls no id: the same stored response parsed again replays
    (it got new ids and ran twice), while another response is another turn."""
    dialect = get_dialect(name)
    [first] = dialect.parse(response)
    [again] = dialect.parse(json.loads(json.dumps(response)))
    [other] = dialect.parse({**response, "id": "other-turn"})
    assert first.call_id == again.call_id != other.call_id


@pytest.mark.parametrize("name", ["anthropic", "openai_chat", "openai_responses", "gemini", "mcp"])
def test_a_tool_choice_forcing_a_tool_not_offered_is_refused(name: str) -> None:
    offered = [ToolSpec(name="orders.get")]
    choice = ToolChoice(mode="tool", name="admin.delete_user")
    with pytest.raises(ValueError, match="not among the tools offered"):
        get_dialect(name).export_tool_choice(choice, tools=offered)
    forced = get_dialect(name).export_tool_choice(replace(choice, name="orders.get"), tools=offered)
    assert "orders" in json.dumps(forced.value) or name == "mcp"  # (MCP cannot name one)


STREAM_PIECES = {
    "openai_chat": lambda: chat_types.ChatCompletionChunk.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": None,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": '{"city": "Par'},
                            }
                        ]
                    },
                }
            ],
        }
    ),
    "openai_responses": lambda: (
        responses_types.ResponseFunctionCallArgumentsDeltaEvent.model_validate(
            {
                "type": "response.function_call_arguments.delta",
                "item_id": "fc_1",
                "output_index": 0,
                "sequence_number": 3,
                "delta": '{"city": "Par',
            }
        )
    ),
    "anthropic": lambda: anthropic_types.RawContentBlockStartEvent.model_validate(
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "get_weather",
                "input": {},
            },
        }
    ),
}


@pytest.mark.parametrize("name", list(STREAM_PIECES))
def test_a_piece_of_a_stream_is_refused_instead_of_read_as_no_calls(name: str) -> None:
    """A chunk holding a tool call's first half parsed to no calls at all: an agent loop
    fed the stream's events thought the model had called nothing."""
    piece = STREAM_PIECES[name]()
    dialect = get_dialect(name)
    with pytest.raises(ValueError, match="piece of a stream"):
        dialect.parse(piece)
    with pytest.raises(ValueError, match="piece of a stream"):
        dialect.parse(piece.model_dump_json())


CALLS_OF = {
    "openai_chat": lambda sdk: sdk.choices[0].message.tool_calls,
    "openai_responses": lambda sdk: [i for i in sdk.output if i.type == "function_call"],
    "anthropic": lambda sdk: [b for b in sdk.content if b.type == "tool_use"],
}


@pytest.mark.parametrize("name", list(CALLS_OF))
def test_one_call_on_its_own_is_read_as_a_response_holding_it(name: str) -> None:
    """An SDK's tool call, output item or tool_use block parsed to no calls."""
    raw = _fixture(PARALLEL[name])
    dialect = get_dialect(name)
    whole = dialect.parse(raw)
    one_by_one = [c for item in CALLS_OF[name](RESPONSE[name](raw)) for c in dialect.parse(item)]
    assert len(whole) >= 2
    assert one_by_one == whole


def test_responses_stream_events_holding_a_whole_response_or_item_parse_as_it() -> None:
    """`response.completed` holds the final response and `response.output_item.done` a whole
    item: an agent loop reading the stream takes its calls from them."""
    raw = _fixture(PARALLEL["openai_responses"])
    dialect = get_dialect("openai_responses")
    whole = dialect.parse(raw)
    response = RESPONSE["openai_responses"](raw)
    completed = responses_types.ResponseCompletedEvent(
        type="response.completed", response=response, sequence_number=9
    )
    assert dialect.parse(completed) == whole
    done = [
        responses_types.ResponseOutputItemDoneEvent(
            type="response.output_item.done", item=item, output_index=i, sequence_number=i
        )
        for i, item in enumerate(response.output)
    ]
    assert [c for event in done for c in dialect.parse(event)] == whole
