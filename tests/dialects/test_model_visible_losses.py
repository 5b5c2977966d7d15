"""Loss reports list only what a model would see and the format cannot carry: a plain tool
exports with `strict=True` in every dialect, whatever its runtime fields (effect, timeout,
title, an output schema the format has no field for); a schema keyword the model would read
and the format drops still fails it."""

from __future__ import annotations

import pytest

from toolkeeper import Keeper
from toolkeeper.core.values import Effect, ToolSpec
from toolkeeper.dialects import LossError, get_dialect

DIALECTS = ["openai_chat", "openai_responses", "anthropic", "gemini", "mcp"]


def _plain_tools() -> list[ToolSpec]:
    keeper = Keeper(ledger="memory://")

    @keeper.tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @keeper.tool(effect="read_only", idempotent=True, timeout=5.0, title="Look up")
    def lookup(key: str) -> dict[str, str]:
        """Look a key up."""
        return {"key": key}

    @keeper.tool(effect=Effect.DESTRUCTIVE)
    def drop(name: str) -> None:
        """Drop a table."""

    return keeper.catalog.specs()


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_plain_tool_exports_strictly_with_no_loss(dialect: str) -> None:
    for spec in _plain_tools():
        exported = get_dialect(dialect).export_tool(spec, strict=True)
        assert exported.losses == ()


@pytest.mark.parametrize("dialect", DIALECTS)
def test_runtime_fields_and_an_unseen_output_schema_are_no_loss(dialect: str) -> None:
    spec = ToolSpec(
        name="count",
        title="Count",
        description="Count the rows.",
        input_schema={"type": "object", "properties": {"table": {"type": "string"}}},
        output_schema={"type": "integer"},
        effect=Effect.READ_ONLY,
        idempotent=True,
        timeout=2.0,
    )
    assert get_dialect(dialect).export_tool(spec, strict=True).losses == ()


# What the model would read of each schema and the format rewrites or drops: arguments that are
# not an object (every format wraps them), a keyword Gemini has no place for.
CUT = [
    *((d, {"type": "array", "items": {"type": "string"}}, "type") for d in DIALECTS),
    ("gemini", {"type": "object", "properties": {"n": {"not": {"type": "string"}}}}, "not"),
]


@pytest.mark.parametrize(("dialect", "schema", "keyword"), CUT)
def test_a_schema_the_model_would_see_cut_still_fails_a_strict_export(
    dialect: str, schema: dict[str, object], keyword: str
) -> None:
    spec = ToolSpec(name="t", input_schema=schema)
    with pytest.raises(LossError) as caught:
        get_dialect(dialect).export_tool(spec, strict=True)
    assert [loss.keyword for loss in caught.value.losses] == [keyword]


@pytest.mark.parametrize("dialect", ["openai_chat", "openai_responses", "gemini", "mcp"])
def test_example_inputs_the_format_has_no_field_for_are_a_loss(dialect: str) -> None:
    spec = ToolSpec(
        name="add",
        input_schema={"type": "object", "properties": {"a": {"type": "integer"}}},
        examples=({"a": 1},),
    )
    with pytest.raises(LossError) as caught:
        get_dialect(dialect).export_tool(spec, strict=True)
    assert [loss.keyword for loss in caught.value.losses] == ["examples"]
