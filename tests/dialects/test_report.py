"""Loss reports: lossless means empty, strict turns any loss into LossError."""

from __future__ import annotations

import pytest

from toolkeeper.core.errors import ConfigurationError
from toolkeeper.dialects import Action, Converted, Loss, LossError, get_dialect, get_importer

LOSS = Loss(
    pointer="/input_schema/pattern",
    keyword="pattern",
    action=Action.MOVED_TO_DESCRIPTION,
    reason="why",
)


def test_an_empty_report_is_lossless() -> None:
    assert Converted(value=1).lossless
    assert Converted(value=1).check(True).value == 1


def test_strict_raises_with_every_loss() -> None:
    converted = Converted(value=1, losses=(LOSS, LOSS))
    assert converted.check(False) is converted
    with pytest.raises(LossError) as caught:
        converted.check(True)
    assert caught.value.losses == (LOSS, LOSS)


def test_losses_have_a_json_form() -> None:
    assert LOSS.to_dict() == {
        "pointer": "/input_schema/pattern",
        "keyword": "pattern",
        "action": "moved_to_description",
        "reason": "why",
    }


def test_unknown_formats_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError):
        get_dialect("bfcl")
    with pytest.raises(ConfigurationError):
        get_importer("nope")
