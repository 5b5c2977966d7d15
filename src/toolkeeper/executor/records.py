"""Ledger records and audit events in, `ToolResult`s out: the translations the pipeline needs."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import msgspec

from ..core.errors import ErrorCode, ToolError
from ..core.states import CallStatus
from ..core.values import MCP_CONTENT, Effect, Fence, ToolResult, ToolSpec
from ..ledger.base import ApprovalRecord, CallRecord, current_owner
from ..observe.audit import AuditEvent
from ..observe.redact import mask
from ..policy.approvals import Binding
from ..schema.canonical import digest, safe_text
from .runtime import Runtime, idempotency_key
from .state import CallState

__all__ = [
    "UNKNOWN_OUTCOME_ERROR",
    "approval_pending_result",
    "audit",
    "binding",
    "new_record",
    "recorded_name",
    "replay",
    "unrecordable",
]

_log = logging.getLogger("toolkeeper")

_EFFECTS = {effect: effect.value for effect in Effect}
"""Each effect's text (`.value` of an enum is a property, slow on every call)."""

UNKNOWN_OUTCOME_ERROR = ToolError.of(
    ErrorCode.UNKNOWN_OUTCOME,
    "the call may or may not have taken effect; it will not be repeated automatically. "
    "A person or the tool's status check must reconcile it",
)


def replay(record: CallRecord, spec: ToolSpec | None = None) -> ToolResult:
    """The recorded result of a call, marked as replayed; `spec`, the tool as it is now, says
    how a dialect shows it (`ToolSpec.fence`) and where it comes from."""
    started = next((t for s, t in record.history if s is CallStatus.RUNNING), None)
    return ToolResult(
        call_id=record.call_id,
        tool=record.tool,
        status=record.status,
        data=record.result,
        error=ToolError.from_dict(record.error) if record.error else None,
        version=record.version or None,
        attempt=record.attempt,
        started_at=started,
        finished_at=record.updated_at,
        effect_ref=record.effect_ref,
        approval_id=record.approval_id,
        replayed=True,
        metadata={MCP_CONTENT: record.content} if record.content else {},
        fence=spec.fence if spec is not None else Fence.NONE,
        source=spec.source if spec is not None else None,
    )


def approval_pending_result(st: CallState, approval: ApprovalRecord) -> ToolResult:
    """What the model sees while a call waits for a person."""
    error = ToolError.of(
        ErrorCode.APPROVAL_REQUIRED,
        f"this call needs a person's approval ({approval.reason}) and has not run. Ask the "
        f"user to approve request {approval.id} (toolkeeper approvals approve {approval.id})",
        details={"approval_id": approval.id, "reason": approval.reason},
    )
    return ToolResult(
        call_id=st.call.call_id,
        tool=st.call.name,
        status=CallStatus.AWAITING_APPROVAL,
        error=error,
        version=approval.version,
        approval_id=approval.id,
    )


def new_record(
    rt: Runtime,
    st: CallState,
    status: CallStatus,
    *,
    attempt: int = 0,
    approval_id: str | None = None,
    effect_ref: str | None = None,
    result: Any = None,
    content: tuple[Mapping[str, Any], ...] | None = None,
    error: Mapping[str, Any] | None = None,
    deadline: float | None = None,
) -> CallRecord:
    """A first ledger record for the call in `status`."""
    spec = st.tool.spec if st.tool is not None else None
    now = rt.clock()
    # Built in two calls of at most 15 keyword arguments: CPython passes more through a dict
    # it builds for the call, which took longer than building the record.
    record = CallRecord(
        task_id=st.call.task_id,
        call_id=st.call.call_id,
        tool=st.call.name if spec is not None else recorded_name(st.call.name),
        version=spec.version if spec is not None else "",
        digest=st.request_digest,
        arguments=st.redacted,
        principal_id=st.principal.id,
        tenant=st.principal.tenant,
        status=status,
        effect=_EFFECTS[spec.effect] if spec is not None else Effect.WRITE.value,
        idempotent=spec.idempotent if spec is not None else False,
        idempotency_key=st.idempotency_key or idempotency_key(st.call.task_id, st.call.call_id),
        attempt=attempt,
        result=result,
        owner=current_owner(),
    )
    return msgspec.structs.replace(
        record,
        approval_id=approval_id,
        effect_ref=effect_ref,
        content=content,
        error=error,
        deadline=deadline,
        created_at=now,
        updated_at=now,
        history=((status, now),),
    )


def recorded_name(name: object) -> str:
    """The name of a call to no tool as its record holds it: text every store can hold (a
    NUL and a lone UTF-16 surrogate each become U+FFFD; a name that is not text, its kind)."""
    if not isinstance(name, str):
        return f"<{type(name).__name__}>"
    return safe_text(name).replace("\x00", "\ufffd")


def audit(
    rt: Runtime,
    st: CallState,
    status: CallStatus,
    *,
    previous: CallStatus | None = None,
    attempt: int = 0,
    error: ToolError | None = None,
    approval_id: str | None = None,
    first: bool = False,
    **extra: Any,
) -> None:
    """Emit the audit event of one persisted state change."""
    event = AuditEvent(
        at=rt.clock(),
        task_id=st.call.task_id,
        call_id=st.call.call_id,
        tool=st.call.name,
        version=st.tool.spec.version if st.tool is not None else None,
        principal_id=st.principal.id,
        tenant=st.principal.tenant,
        status=status,
        previous=previous,
        attempt=attempt,
        error_code=error.code.value if error is not None else None,
        message=error.message if error is not None else None,
        approval_id=approval_id,
        arguments=st.redacted if first else None,
        extra=extra,
    )
    rt.emit(event)


def binding(rt: Runtime, st: CallState) -> Binding:
    """What an approval of this call is bound to."""
    assert st.tool is not None and st.validated is not None
    return Binding(
        task_id=st.call.task_id,
        call_id=st.call.call_id,
        tool=st.tool.spec.name,
        version=st.tool.spec.version,
        principal_id=st.principal.id,
        # Without defaults to fill in, the validated arguments are the parsed ones, whose
        # canonical digest dedupe already computed.
        digest=(
            st.request_digest
            if st.validated is st.arguments
            else digest(st.validated, rt.digest_key)
        ),
    )


_NOT_JSON = "is not JSON data (nested too deeply, or of a type JSON cannot hold)"


def unrecordable(
    name: str, reason: str, what: str | None = None, secrets: tuple[str, ...] = ()
) -> str:
    """What is recorded and shown instead of a result that cannot be: the call ran. `reason`
    is logged, with the call's sensitive values (`secrets`) masked: it may quote the result."""
    _log.warning("the result of %s is not recorded: %s", name, mask(reason, secrets))
    return f"{name} ran and finished, but its result {what or _NOT_JSON}, so it is not shown"
