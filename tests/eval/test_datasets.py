import re
from pathlib import Path

import pytest

from toolkeeper.eval.datasets import (
    DatasetError,
    load_abstain_queries,
    load_queries,
    load_tools,
    unique_names,
)

FIXTURES = Path(__file__).parent / "fixtures"


def test_repeated_names_get_suffixes_and_map_back() -> None:
    assert unique_names(["a", "b", "a", "a"]) == ["a", "b", "a~2", "a~3"]


def test_bfcl_tools_import_through_the_bfcl_dialect() -> None:
    catalog = load_tools(FIXTURES / "bfcl.tools.jsonl")
    spec = catalog.specs[0]
    assert spec.input_schema["type"] == "object"
    assert catalog.id_of[spec.name].startswith("bfcl:")
    assert len({s.name for s in catalog.specs}) == len(catalog.specs)


def test_sealtools_types_become_json_schema_types() -> None:
    catalog = load_tools(FIXTURES / "sealtools.tools.jsonl")
    types = {
        prop.get("type")
        for spec in catalog.specs
        for prop in spec.input_schema.get("properties", {}).values()
    }
    assert "str" not in types
    assert "string" in types


def test_queries_keep_their_gold() -> None:
    queries = load_queries(FIXTURES / "bfcl.queries.jsonl")
    assert all(q.gold_ids and q.gold_names for q in queries)


def test_abstain_queries_bring_their_own_catalog() -> None:
    queries = load_abstain_queries(FIXTURES / "abstain.queries.jsonl")
    assert {q.answerable for q in queries} == {True, False}
    assert all(q.tools for q in queries if q.answerable)


def test_fields_of_the_wrong_json_type_are_refused_with_file_and_line(tmp_path: Path) -> None:
    # A string is a sequence too: a gold name given as one was read as its characters, and
    # a query or tool name of null as the text "None".
    queries = tmp_path / "q.jsonl"
    tools = tmp_path / "t.jsonl"
    abstain = tmp_path / "a.jsonl"
    cases = [
        (load_queries, queries, '{"id": "q", "query": "x", "gold_tool_ids": "get_weather"}'),
        (load_queries, queries, '{"id": "q", "query": "x", "gold_tool_names": [1]}'),
        (load_queries, queries, '{"id": "q", "query": null, "gold_tool_ids": ["a"]}'),
        (load_tools, tools, '{"id": "t", "name": null, "description": "x"}'),
        (load_abstain_queries, abstain, '{"id": "q", "query": 3, "candidate_tools": []}'),
        (
            load_abstain_queries,
            abstain,
            '{"id": "q", "query": "x", "candidate_tools": [], "gold_tool_names": "ab"}',
        ),
        (
            load_abstain_queries,
            abstain,
            '{"id": "q", "query": "x", "candidate_tools": [{"name": 7}]}',
        ),
    ]
    for load, path, line in cases:
        path.write_text(f"\n{line}\n", encoding="utf-8")
        with pytest.raises(DatasetError, match=f"^{re.escape(str(path))}:2: "):
            load(path)


def test_absent_or_null_gold_is_no_gold(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(
        '{"id": "a", "query": "x"}\n{"id": "b", "query": "y", "gold_tool_ids": null}\n',
        encoding="utf-8",
    )
    assert [(q.gold_ids, q.gold_names) for q in load_queries(path)] == [((), ())] * 2
