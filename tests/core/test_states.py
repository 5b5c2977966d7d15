import pytest

from toolkeeper.core.states import TERMINAL, TRANSITIONS, CallStatus, can_transition


def test_finished_runs_have_no_way_out() -> None:
    for status in (CallStatus.SUCCEEDED, CallStatus.FAILED, CallStatus.TIMED_OUT):
        assert TRANSITIONS[status] == frozenset()


def test_unknown_outcome_is_only_settled_by_reconciliation() -> None:
    assert TRANSITIONS[CallStatus.UNKNOWN_OUTCOME] == {CallStatus.SUCCEEDED, CallStatus.FAILED}
    assert not can_transition(CallStatus.UNKNOWN_OUTCOME, CallStatus.RUNNING)


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (CallStatus.SUCCEEDED, CallStatus.RUNNING),
        (CallStatus.RUNNING, CallStatus.REJECTED),
        (CallStatus.AWAITING_APPROVAL, CallStatus.UNKNOWN_OUTCOME),
        (CallStatus.CANCELLED, CallStatus.UNKNOWN_OUTCOME),
        (CallStatus.TIMED_OUT, CallStatus.RUNNING),
    ],
)
def test_illegal_transitions(current: CallStatus, target: CallStatus) -> None:
    assert not can_transition(current, target)


def test_terminal_states() -> None:
    assert {s for s in CallStatus if s.terminal} == TERMINAL
    assert CallStatus.RUNNING not in TERMINAL
    assert CallStatus.AWAITING_APPROVAL not in TERMINAL
