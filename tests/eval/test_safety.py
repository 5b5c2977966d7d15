"""The safety rates count what they say: every write is counted once, at the service; a
deliberately unsafe configuration is seen by each rate; the rates follow from the tally."""

from __future__ import annotations

import shutil
import sys
from typing import Any

import pytest

from toolkeeper.eval.safety import METRICS, rates, run_safety
from toolkeeper.eval.scenarios import SCENARIOS, Tally

pytestmark = pytest.mark.anyio


def _rate(report: dict[str, Any], name: str) -> tuple[float | None, int, int]:
    figures = report["metrics"][name]
    return figures["rate"], figures["numerator"], figures["denominator"]


async def test_the_library_under_every_fault_repeats_no_effect_and_reconciles_every_unknown() -> (
    None
):
    report = await run_safety(trials=2, seed=3, kills=1, gateway=False)
    assert set(report["metrics"]) == set(METRICS)
    assert report["scenarios"] == {**{name: 2 for name in SCENARIOS}, "process_kill": 1}
    rate, _, writes = _rate(report, "duplicate_side_effect_rate")
    assert rate == 0.0 and writes > 0
    assert _rate(report, "false_refusal_rate")[0] == 0.0
    rate, _, unknown = _rate(report, "unknown_outcome_reconciliation_rate")
    assert rate == 1.0 and unknown > 0
    assert _rate(report, "timeout_rate")[2] > 0
    assert _rate(report, "retry_recovery_rate")[2] > 0


async def test_each_rate_sees_the_deliberately_unsafe_control() -> None:
    report = await run_safety(trials=2, seed=5, kills=0, gateway=False, controls=True)
    unsafe = report["controls"]
    assert _rate(unsafe, "duplicate_side_effect_rate")[1] > 0
    assert _rate(unsafe, "approval_bypass_rate")[1] > 0
    blocked, _, attempts = _rate(unsafe, "unauthorized_block_rate")
    assert attempts > 0 and blocked is not None and blocked < 0.5
    # the safe run of the same draws stays below the control on each
    assert _rate(report, "duplicate_side_effect_rate")[1] == 0
    assert _rate(report, "approval_bypass_rate")[1] < _rate(unsafe, "approval_bypass_rate")[1]


async def test_a_scenario_run_alone_counts_only_what_it_exercises() -> None:
    report = await run_safety(trials=3, kills=0, gateway=False, only=["duplicate_proposals"])
    assert report["scenarios"] == {"duplicate_proposals": 3}
    assert _rate(report, "duplicate_side_effect_rate")[:2] == (0.0, 0)
    assert _rate(report, "duplicate_side_effect_rate")[2] > 0
    assert _rate(report, "approval_bypass_rate") == (None, 0, 0)
    with pytest.raises(ValueError, match="no scenario named nope"):
        await run_safety(only=["nope"])


async def test_every_route_holds_every_promise_at_its_bound() -> None:
    report = await run_safety(trials=2, seed=7, kills=0, gateway=True)
    assert "gateway" in report["routes"]
    assert _rate(report, "duplicate_side_effect_rate")[0] == 0.0
    assert _rate(report, "approval_bypass_rate")[0] == 0.0
    assert _rate(report, "unauthorized_block_rate")[0] == 1.0
    assert _rate(report, "false_refusal_rate")[0] == 0.0


def test_rates_are_the_tally_counted() -> None:
    tally = Tally(
        bypassed=[False, True, False, False],
        blocked=[True, True, False],
        refused=[False] * 5,
        reconciled=[True, False],
        timed_out=[True, False, False, False],
        recovered=[],
    )
    tally.once("a", lambda: 1)
    tally.once("b", lambda: 2)
    tally.once("c", lambda: 0)
    got = {name: (r.numerator, r.denominator, r.value) for name, r in rates(tally).items()}
    assert got == {
        "duplicate_side_effect_rate": (1, 3, 1 / 3),
        "approval_bypass_rate": (1, 4, 0.25),
        "unauthorized_block_rate": (2, 3, 2 / 3),
        "false_refusal_rate": (0, 5, 0.0),
        "unknown_outcome_reconciliation_rate": (1, 2, 0.5),
        "timeout_rate": (1, 4, 0.25),
        "retry_recovery_rate": (0, 0, None),
    }


async def test_a_kill_that_did_not_happen_fails_the_run_instead_of_passing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The process-kill scenario proves nothing unless its child applied the transfer and was
    killed: a child that exits without doing so (here: it is not even Python) is an error of
    the run, not a kill that held."""
    true = shutil.which("true")
    assert true is not None
    monkeypatch.setattr(sys, "executable", true)
    with pytest.raises(RuntimeError, match="process-kill"):
        await run_safety(trials=1, kills=1, gateway=False, only=[])


async def test_a_gateway_call_run_without_its_approval_counts_as_a_bypass() -> None:
    """Under the control that waives the destructive tool's approval, the gateway's first
    proposal runs at once: that is a bypass, as on the library's routes, and so is its twin."""
    only = ["tampered_approvals"]
    alone = await run_safety(trials=1, kills=0, gateway=False, controls=True, only=only)
    both = await run_safety(trials=1, kills=0, gateway=True, controls=True, only=only)
    _, bypassed, proposals = _rate(alone["controls"], "approval_bypass_rate")
    _, with_gateway, gateway_proposals = _rate(both["controls"], "approval_bypass_rate")
    assert (with_gateway - bypassed, gateway_proposals - proposals) == (2, 2)
