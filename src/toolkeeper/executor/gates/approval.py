"""6. Approval: a call that needs one runs only under an approval bound to its exact
validated arguments (`records.binding`)."""

from __future__ import annotations

from ...core.errors import ErrorCode
from ...core.states import CallStatus
from ...ledger.base import ApprovalStatus
from ...policy.approvals import ApprovalCheck
from ..records import approval_pending_result, binding
from ..runtime import Runtime
from ..state import CallState
from ..steps import Answer, Hold, Step, refuse

__all__ = ["approval"]

_TOOL_CHANGED = "the tool changed before the request was decided"


def approval(rt: Runtime, st: CallState) -> Answer:
    """A call waiting for a person gets how its request stands; one that needs a request is
    held for one (`Hold`)."""
    record = st.record
    if st.approval_reason is None and (
        record is None or record.status is not CallStatus.AWAITING_APPROVAL
    ):
        return None
    return _approval(rt, st)


async def _approval(rt: Runtime, st: CallState) -> Step:
    record = st.record
    waiting = record is not None and record.status is CallStatus.AWAITING_APPROVAL
    # A call refused after a person decided on it (rate-limited once approved, or denied)
    # keeps that decision: the approval still lets it run, the denial still stands.
    decided = record is not None and record.status in (CallStatus.REJECTED, CallStatus.CANCELLED)
    if record is not None and record.approval_id and (waiting or decided):
        found = await rt.approvals.get(record.approval_id)
        check = rt.approvals.check(found, binding(rt, st)) if found is not None else None
        if found is None:
            if waiting:
                raise refuse(ErrorCode.INTERNAL_ERROR, "the approval request disappeared")
            # (a refused call whose request is gone: evaluated afresh)
        elif check is ApprovalCheck.GRANTED:
            st.approval = found
            return None
        elif check is ApprovalCheck.PENDING:
            return approval_pending_result(st, found)
        elif check is ApprovalCheck.DENIED:
            raise refuse(
                ErrorCode.APPROVAL_DENIED,
                f"a person denied this call: {found.note or 'no reason given'}",
                approval_id=found.id,
            )
        elif check is ApprovalCheck.EXPIRED:
            if waiting:
                if found.status is ApprovalStatus.PENDING:
                    # Recorded, so that a person's decision landing later is refused, not
                    # told it approved a call that was refused as expired.
                    await rt.approvals.expire(found.id)
                raise refuse(
                    ErrorCode.APPROVAL_EXPIRED,
                    "the approval request expired; propose the call again to ask anew",
                    approval_id=found.id,
                )
        elif found.status is ApprovalStatus.PENDING:
            # Never usable for this call: the tool changed since (a rolling deploy: a request
            # approved for the version another process serves). A record still waiting for
            # it, or for one withdrawn, waits for the new request (`journal.hold`).
            await rt.approvals.withdraw(found.id, reason=_TOOL_CHANGED)
    if st.approval_reason is None:
        return None
    return Hold(st.approval_reason)
