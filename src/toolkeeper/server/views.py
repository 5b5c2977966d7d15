"""The JSON shapes of the operators' API (and the data the console's pages render).

Arguments and results are the ledger's (sensitive fields redacted); everything else is the
record as stored, times in epoch seconds. What it is not: any decision about who sees what.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.values import ToolSpec
from ..ledger.base import ApprovalRecord, CallRecord
from ..retrieval.selection import Selection
from .desk import VersionSeen

__all__ = [
    "approval_json",
    "call_json",
    "call_summary_json",
    "error_json",
    "search_json",
    "tool_json",
]


def approval_json(record: ApprovalRecord) -> dict[str, Any]:
    """An approval request: the exact call it grants, and where its decision stands."""
    return {
        "id": record.id,
        "status": record.status.value,
        "tool": record.tool,
        "version": record.version,
        "principal_id": record.principal_id,
        "task_id": record.task_id,
        "call_id": record.call_id,
        "arguments": dict(record.arguments),
        "digest": record.digest,
        "reason": record.reason,
        "created_at": record.created_at,
        "expires_at": record.expires_at,
        "decided_by": record.decided_by,
        "decided_at": record.decided_at,
        "note": record.note,
    }


def call_summary_json(record: CallRecord) -> dict[str, Any]:
    """A call as a row of the ledger."""
    return {
        "task_id": record.task_id,
        "call_id": record.call_id,
        "tool": record.tool,
        "version": record.version,
        "principal_id": record.principal_id,
        "status": record.status.value,
        "attempt": record.attempt,
        "error_code": None if record.error is None else record.error.get("code"),
        "created_at": record.created_at,
        "updated_at": record.updated_at,
    }


def call_json(record: CallRecord, approval: ApprovalRecord | None) -> dict[str, Any]:
    """A call whole: its timeline, attempts, result, error and approval."""
    return {
        **call_summary_json(record),
        "tenant": record.tenant,
        "effect": record.effect,
        "idempotent": record.idempotent,
        "digest": record.digest,
        "arguments": dict(record.arguments),
        "idempotency_key": record.idempotency_key,
        "effect_ref": record.effect_ref,
        "result": record.result,
        "error": None if record.error is None else dict(record.error),
        "owner": record.owner,
        "timeline": [{"status": status.value, "at": at} for status, at in record.history],
        "approval": None if approval is None else approval_json(approval),
    }


def tool_json(spec: ToolSpec, versions: list[VersionSeen]) -> dict[str, Any]:
    """A tool as operators see it: effect, permissions, source, versions seen."""
    return {
        "name": spec.name,
        "version": spec.version,
        "description": spec.description,
        "effect": spec.effect.value,
        "idempotent": spec.idempotent,
        "permissions": list(spec.permissions),
        "source": spec.source,
        "tags": list(spec.tags),
        "versions": [{"version": v.version, "kind": v.kind, "at": v.at} for v in versions],
    }


def search_json(selection: Selection) -> dict[str, Any]:
    """What a model would be shown: ranked tools with scores, or an abstention."""
    return {
        "query": selection.query,
        "principal_id": selection.principal.id,
        "abstained": selection.abstained,
        "confidence": selection.confidence,
        "considered": selection.considered,
        "schema_tokens": selection.tokens(),
        "tools": [
            {
                "name": c.name,
                "score": c.score,
                "keyword_rank": c.keyword_rank,
                "dense_rank": c.dense_rank,
                "similarity": c.similarity,
            }
            for c in selection.candidates
        ],
    }


def error_json(code: str, message: str, details: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The body of every refusal: a stable code and a message for a person."""
    error: dict[str, Any] = {"code": code, "message": message}
    if details:
        error["details"] = dict(details)
    return {"error": error}
