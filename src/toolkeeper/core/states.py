"""The call state machine: the states a call passes through and the only legal transitions.

```
PROPOSED → VALIDATED → AUTHORIZED → RUNNING → SUCCEEDED | FAILED
                    ↘ AWAITING_APPROVAL ↗    ↘ TIMED_OUT | CANCELLED | UNKNOWN_OUTCOME
any gate may end a call as REJECTED; UNKNOWN_OUTCOME is reconciled to SUCCEEDED | FAILED
```
The table lists the changes the ledger may persist. A record may be *created* in any state:
the pipeline does not write the states it passes through in memory (VALIDATED, AUTHORIZED, and
RUNNING for a read-only call, which is written once, when it ends), so the table also holds
those shortcuts. Everything else a store refuses with `IllegalTransition`
(`ledger.transitions.check_transition`).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

__all__ = ["TERMINAL", "TRANSITIONS", "CallStatus", "can_transition"]


class CallStatus(StrEnum):
    """Where one call is in its life."""

    PROPOSED = "PROPOSED"
    VALIDATED = "VALIDATED"
    AUTHORIZED = "AUTHORIZED"
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    REJECTED = "REJECTED"
    TIMED_OUT = "TIMED_OUT"
    CANCELLED = "CANCELLED"
    UNKNOWN_OUTCOME = "UNKNOWN_OUTCOME"

    @property
    def terminal(self) -> bool:
        """True when nothing will happen to the call without a new proposal or a person."""
        return self in TERMINAL


_S = CallStatus
_AFTER_RUN = frozenset({_S.SUCCEEDED, _S.FAILED, _S.TIMED_OUT, _S.CANCELLED, _S.UNKNOWN_OUTCOME})
# A read-only call need not persist RUNNING, so every state that leads to RUNNING may also
# lead straight to how a read ends (a read never ends UNKNOWN_OUTCOME: it can be retried).
_TO_RUN = frozenset({_S.RUNNING, _S.SUCCEEDED, _S.FAILED, _S.TIMED_OUT, _S.CANCELLED})

TRANSITIONS: Mapping[CallStatus, frozenset[CallStatus]] = {
    _S.PROPOSED: frozenset({_S.VALIDATED, _S.AUTHORIZED, _S.AWAITING_APPROVAL, _S.REJECTED})
    | _TO_RUN,
    _S.VALIDATED: frozenset({_S.AUTHORIZED, _S.AWAITING_APPROVAL, _S.REJECTED}) | _TO_RUN,
    _S.AUTHORIZED: frozenset({_S.REJECTED}) | _TO_RUN,
    _S.AWAITING_APPROVAL: frozenset({_S.AUTHORIZED, _S.REJECTED}) | _TO_RUN,
    # RUNNING -> RUNNING is a new attempt (a retry, or taking over an abandoned idempotent call);
    # RUNNING -> AWAITING_APPROVAL is a tool that asked for approval before any effect.
    _S.RUNNING: _AFTER_RUN | {_S.RUNNING, _S.AWAITING_APPROVAL},
    _S.UNKNOWN_OUTCOME: frozenset({_S.SUCCEEDED, _S.FAILED}),
    # A refusal ran nothing; the same call proposed again is evaluated afresh.
    _S.REJECTED: frozenset({_S.AUTHORIZED, _S.AWAITING_APPROVAL, _S.REJECTED}) | _TO_RUN,
    _S.SUCCEEDED: frozenset(),
    _S.FAILED: frozenset(),
    _S.TIMED_OUT: frozenset(),
    # A call is recorded CANCELLED only when running it again is safe (nothing was sent, or
    # its tool is read-only or idempotent; else it is UNKNOWN_OUTCOME): proposed again, it
    # is evaluated afresh, as a refused one is.
    # (never REJECTED: a cancelled call may have run, and counts against budgets)
    _S.CANCELLED: frozenset({_S.AUTHORIZED, _S.AWAITING_APPROVAL}) | _TO_RUN,
}
"""The legal moves of the call state machine: each state and the states it may go to."""

TERMINAL: frozenset[CallStatus] = frozenset(
    {_S.SUCCEEDED, _S.FAILED, _S.REJECTED, _S.TIMED_OUT, _S.CANCELLED, _S.UNKNOWN_OUTCOME}
)
"""The states a call ends in (a refused or cancelled call proposed again is evaluated
afresh)."""


def can_transition(current: CallStatus, target: CallStatus) -> bool:
    """Whether the state machine allows `current -> target`."""
    return target in TRANSITIONS[current]
