"""What every dialect shares: lists of tools, name rewrites, argument parsing."""

from __future__ import annotations

from toolkeeper.core.values import ToolSpec
from toolkeeper.dialects import Action, get_dialect
from toolkeeper.dialects.base import arguments_of


def test_export_tools_prefixes_pointers_and_keeps_names_unique() -> None:
    specs = [ToolSpec(name="a.b"), ToolSpec(name="a_b")]
    out = get_dialect("openai_chat").export_tools(specs)
    names = [d["function"]["name"] for d in out.value]
    assert names[0] == "a_b"
    assert names[1] != "a_b"
    assert [(loss.pointer, loss.keyword, loss.action) for loss in out.losses] == [
        ("/0/name", "name", Action.REWRITTEN),
        ("/1", "name", Action.REWRITTEN),
    ]


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
