"""What every dialect shares: lists of tools, name rewrites, argument parsing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolkeeper.core.values import ToolSpec
from toolkeeper.dialects import Action, NotAFunction, ToolChoice, get_dialect
from toolkeeper.dialects.base import arguments_of


def test_export_tools_prefixes_pointers_and_keeps_names_unique() -> None:
    specs = [ToolSpec(name="a.b"), ToolSpec(name="a_b")]
    out = get_dialect("openai_chat").export_tools(specs)
    names = [d["function"]["name"] for d in out.value]
    assert names[1] == "a_b"  # a name the vendor takes is kept
    assert names[0].startswith("a_b_")  # the rewritten one moves aside
    assert [(loss.pointer, loss.keyword, loss.action) for loss in out.losses] == [
        ("/0/name", "name", Action.REWRITTEN),
        ("/0", "name", Action.REWRITTEN),
    ]


def test_wire_names_do_not_depend_on_order_and_calls_map_back_either_way() -> None:
    # parse() rebuilds the map from the tools it is given, maybe in another order.
    dialect = get_dialect("openai_chat")
    specs = [ToolSpec(name="a b"), ToolSpec(name="a_b"), ToolSpec(name="a.b"), ToolSpec(name="c")]
    forward = dialect.wire_names(specs)
    assert forward == dialect.wire_names(list(reversed(specs)))
    assert forward["a_b"] == "a_b" and len(forward) == 4
    message = {
        "tool_calls": [
            {"id": str(i), "type": "function", "function": {"name": wire, "arguments": "{}"}}
            for i, wire in enumerate(forward)
        ]
    }
    parsed = dialect.parse(message, tools=list(reversed(specs)))
    assert [c.name for c in parsed] == list(forward.values())


def test_the_same_name_twice_still_exports_unique_names() -> None:
    out = get_dialect("anthropic").export_tools([ToolSpec(name="x"), ToolSpec(name="x")] * 2)
    assert len({d["name"] for d in out.value}) == 4


def test_import_tools_reads_a_list() -> None:
    dialect = get_dialect("mcp")
    exported = dialect.export_tools([ToolSpec(name="a.b"), ToolSpec(name="c")]).value
    assert [s.name for s in dialect.import_tools(exported).value] == ["a.b", "c"]


def test_long_names_are_cut_with_a_stable_suffix() -> None:
    dialect = get_dialect("anthropic")
    long = "x" * 80
    assert dialect.safe_name(long) == dialect.safe_name(long)
    assert len(dialect.safe_name(long)) == 64
    assert dialect.safe_name(long) != dialect.safe_name("x" * 81)


def test_arguments_are_an_object_or_the_raw_text() -> None:
    assert arguments_of('{"a": 1}') == {"a": 1}
    assert arguments_of("") == {}
    assert arguments_of(None) == {}
    assert arguments_of("[1, 2]") == "[1, 2]"
    assert arguments_of("{oops") == "{oops"
    assert arguments_of([1]) == "[1]"


def test_parse_maps_each_rewritten_name_back_to_its_own_spec() -> None:
    dialect = get_dialect("anthropic")
    specs = [ToolSpec(name="a.b"), ToolSpec(name="a_b")]
    first, second = (d["name"] for d in dialect.export_tools(specs).value)
    blocks = [
        {"type": "tool_use", "id": "1", "name": first, "input": {}},
        {"type": "tool_use", "id": "2", "name": second, "input": {}},
    ]
    assert [c.name for c in dialect.parse(blocks, tools=specs)] == ["a.b", "a_b"]


@pytest.mark.parametrize(
    ("dialect", "definition", "says"),
    [
        ("anthropic", {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}, "own"),
        ("openai_chat", {"type": "custom", "custom": {"name": "x"}}, "own"),
        ("openai_responses", {"type": "web_search"}, "own"),
        ("gemini", {"googleSearch": {}}, "needs a name"),
        ("mcp", ["not", "a", "tool"], "JSON objects"),
    ],
)
def test_a_vendors_own_tool_is_not_imported_as_a_function(
    dialect: str, definition: object, says: str
) -> None:
    # Imported as a function, a built-in tool would be exported back as one the user must
    # implement; a bare KeyError said nothing.
    with pytest.raises(NotAFunction, match=says):
        get_dialect(dialect).import_tool(definition)


@pytest.mark.parametrize("dialect", ["openai_chat", "openai_responses", "anthropic", "gemini"])
def test_a_forced_tool_is_named_as_it_was_exported_among_the_tools(dialect: str) -> None:
    # "a b" and "a_b" both want the name a_b: forcing "a b" must not force the other one.
    exporter = get_dialect(dialect)
    specs = [ToolSpec(name="a b"), ToolSpec(name="a_b")]
    wire = {name: w for w, name in exporter.wire_names(specs).items()}
    fields = exporter.export_tool_choice(ToolChoice(mode="tool", name="a b"), tools=specs).value
    assert wire["a b"] in json.dumps(fields) and '"a_b"' not in json.dumps(fields)
    assert exporter.import_tool_choice(fields).name == wire["a b"]


def test_forcing_a_tool_needs_its_name() -> None:
    with pytest.raises(ValueError, match="needs the name"):
        ToolChoice(mode="tool")


@pytest.mark.parametrize(
    ("dialect", "response"),
    [
        ("gemini", lambda pin: [{"functionCall": {"name": "unlock", "args": {"pin": pin}}}]),
        (
            "openai_responses",
            lambda pin: [
                {"type": "function_call", "name": "unlock", "arguments": f'{{"pin": "{pin}"}}'}
            ],
        ),
        ("mcp", lambda pin: [{"name": "unlock", "arguments": {"pin": pin}}]),
    ],
)
def test_a_made_up_call_id_says_nothing_of_the_arguments(dialect: str, response: Any) -> None:
    """A call the vendor gave no id gets one from its response (its turn), position and name;
    not from its arguments, which may hold a secret that an unkeyed hash in the ledger's call
    ids would let anyone guess back (a 4-digit PIN: 10,000 hashes)."""
    [first] = get_dialect(dialect).parse(response("4821"), turn="t1")
    [other] = get_dialect(dialect).parse(response("0000"), turn="t1")
    [later] = get_dialect(dialect).parse(response("4821"), turn="t2")
    assert first.call_id == other.call_id != later.call_id
