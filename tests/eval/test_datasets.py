from pathlib import Path

from toolkeeper.eval.datasets import load_abstain_queries, load_queries, load_tools, unique_names

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
