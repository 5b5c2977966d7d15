"""The value objects' own checks."""

import math

import pytest

from toolkeeper.core.values import ToolSpec


@pytest.mark.parametrize("timeout", [0, -1.0, math.nan, math.inf])
def test_a_tool_spec_without_a_finite_positive_timeout_is_refused(timeout: float) -> None:
    """NaN or inf gave the tool no timeout at all, whoever built the spec (a connector, a
    dialect import): a tool that hung held its call for ever."""
    with pytest.raises(ValueError, match="timeout"):
        ToolSpec(name="t", timeout=timeout)


def test_a_tool_spec_timeout_is_seconds() -> None:
    with pytest.raises(TypeError):
        ToolSpec(name="t", timeout="30")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ToolSpec(name="t", timeout=True)
    assert ToolSpec(name="t", timeout=2).timeout == 2
