"""The OpenAPI 3.1 document of the operators' API (`GET /api/v1/openapi.json`).

Written out rather than derived, so that it is the contract the routes keep: the tests fuzz
the running API from it (schemathesis) and check every answer against it.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from .. import __version__
from ..core.states import CallStatus
from ..ledger.base import ApprovalStatus
from ..ledger.pages import MAX_PAGE

__all__ = ["ERROR_CODES", "document"]

ERROR_CODES = {
    "UNAUTHENTICATED": "no operator token, or one no operator holds (401)",
    "FORBIDDEN": "the operator's role does not allow it, or a browser's Origin is not the "
    "gateway's (403)",
    "HOST_NOT_ALLOWED": "the request's Host is not a name the gateway answers to (421)",
    "FOUR_EYES": "the call was proposed by one of the operator's own principals (403)",
    "NOT_FOUND": "no such approval, call or principal (404)",
    "NOT_PENDING": "the approval was decided, withdrawn or has expired (409)",
    "NOT_UNKNOWN": "the call's outcome is not unknown: nothing to settle (409)",
    "INVALID_REQUEST": "a parameter or the body is malformed (400, 422)",
    "LEDGER_UNAVAILABLE": "the ledger did not answer (503); nothing was decided",
}
"""Every code an `{"error": {"code"}}` may carry, and what it means."""

_NUM = {"type": "number"}
_STR = {"type": "string"}
_OPT_STR = {"type": ["string", "null"]}
_OPT_NUM = {"type": ["number", "null"]}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "required": sorted(required),
        "properties": {**required, **(optional or {})},
    }


_SCHEMAS: dict[str, Any] = {
    "Error": _obj(
        {
            "error": _obj(
                {"code": {"type": "string", "enum": sorted(ERROR_CODES)}, "message": _STR},
                {"details": {"type": "object"}},
            )
        }
    ),
    "Approval": _obj(
        {
            "id": _STR,
            "status": {"type": "string", "enum": [s.value for s in ApprovalStatus]},
            "tool": _STR,
            "version": _STR,
            "principal_id": _STR,
            "task_id": _STR,
            "call_id": _STR,
            "arguments": {"type": "object", "description": "validated, defaults applied"},
            "digest": {"type": "string", "description": "keyed digest the approval grants"},
            "reason": _STR,
            "created_at": _NUM,
            "expires_at": _OPT_NUM,
            "decided_by": _OPT_STR,
            "decided_at": _OPT_NUM,
            "note": _OPT_STR,
        }
    ),
    "CallSummary": _obj(
        {
            "task_id": _STR,
            "call_id": _STR,
            "tool": _STR,
            "version": _STR,
            "principal_id": _STR,
            "status": {"type": "string", "enum": [s.value for s in CallStatus]},
            "attempt": {"type": "integer"},
            "error_code": _OPT_STR,
            "created_at": _NUM,
            "updated_at": _NUM,
        }
    ),
    "Call": {
        "allOf": [
            _ref("CallSummary"),
            _obj(
                {
                    "tenant": _STR,
                    "effect": _STR,
                    "idempotent": {"type": "boolean"},
                    "digest": _STR,
                    "arguments": {"type": "object"},
                    "idempotency_key": _STR,
                    "effect_ref": _OPT_STR,
                    "result": {},
                    "error": {"type": ["object", "null"]},
                    "owner": _STR,
                    "timeline": {
                        "type": "array",
                        "items": _obj({"status": _STR, "at": _NUM}),
                    },
                    "approval": {"oneOf": [_ref("Approval"), {"type": "null"}]},
                }
            ),
        ]
    },
    "AuditEvent": _obj(
        {
            "at": _NUM,
            "task_id": _STR,
            "call_id": _STR,
            "tool": _STR,
            "principal_id": _STR,
            "status": _STR,
        },
        {"extra": {"type": "object", "description": "who decided (`by`) and their note"}},
    ),
    "Tool": _obj(
        {
            "name": _STR,
            "version": _STR,
            "description": _STR,
            "effect": {"type": "string", "enum": ["read_only", "write", "destructive"]},
            "idempotent": {"type": "boolean"},
            "permissions": {"type": "array", "items": _STR},
            "source": _STR,
            "tags": {"type": "array", "items": _STR},
            "versions": {
                "type": "array",
                "items": _obj({"version": _STR, "kind": _STR, "at": _NUM}),
            },
        }
    ),
    "Selection": _obj(
        {
            "query": _STR,
            "principal_id": _STR,
            "abstained": {"type": "boolean"},
            "confidence": _NUM,
            "considered": {"type": "integer"},
            "schema_tokens": {"type": "integer"},
            "tools": {
                "type": "array",
                "items": _obj(
                    {"name": _STR, "score": _NUM},
                    {
                        "keyword_rank": {"type": ["integer", "null"]},
                        "dense_rank": {"type": ["integer", "null"]},
                        "similarity": _OPT_NUM,
                    },
                ),
            },
        }
    ),
    "Health": _obj(
        {
            "status": {"type": "string", "enum": ["ok", "degraded"]},
            "ledger": _STR,
            "upstreams": {"type": "object", "additionalProperties": {"type": "boolean"}},
        }
    ),
}


def _query(name: str, description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": schema or {"type": "string", "maxLength": 1000},
    }


def _path(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


_LIMIT = _query("limit", "the most rows", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE})
_TIME = {"type": "string", "description": "epoch seconds or ISO 8601 (UTC by default)"}
_FILTERS = [
    _query("status", "a call state", {"type": "string", "enum": [s.value for s in CallStatus]}),
    _query("tool", "the tool's name"),
    _query("principal", "who the calls acted for"),
    _query("task", "the task id"),
    _query("call", "the call id"),
    _query("since", "created at or after", _TIME),
    _query("before", "created before", _TIME),
    _query("cursor", "`next_cursor` of the previous page"),
    _LIMIT,
]


def _answer(schema: dict[str, Any], *errors: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "200": {"description": "OK", "content": {"application/json": {"schema": schema}}},
        "401": {"$ref": "#/components/responses/Error"},
    }
    for status in errors:
        out[str(status)] = {"$ref": "#/components/responses/Error"}
    return out


def _page(key: str, item: str) -> dict[str, Any]:
    return _obj({key: {"type": "array", "items": _ref(item)}, "next_cursor": _OPT_STR})


def _body(schema: dict[str, Any], required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {"application/json": {"schema": schema}}}


def _op(summary: str, answer: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"summary": summary, "responses": answer, **more}


_TEXT = {"type": "string", "maxLength": 4000}


@cache
def document() -> dict[str, Any]:
    """The OpenAPI document (built once)."""
    task_call = [_path("task"), _path("call")]
    paths = {
        "/api/v1/health": {"get": _op("Ledger and upstreams", _answer(_ref("Health")))},
        "/api/v1/approvals": {
            "get": _op(
                "Approval requests, oldest first (pending by default)",
                _answer(_obj({"approvals": {"type": "array", "items": _ref("Approval")}}), 422),
                parameters=[
                    _query(
                        "status",
                        "`all` for every status",
                        {"type": "string", "enum": [*[s.value for s in ApprovalStatus], "all"]},
                    ),
                    _LIMIT,
                ],
            )
        },
        "/api/v1/approvals/{id}": {
            "get": _op(
                "One approval request", _answer(_ref("Approval"), 404), parameters=[_path("id")]
            )
        },
        "/api/v1/approvals/{id}/approve": {
            "post": _op(
                "Approve exactly this call (approver; four eyes)",
                _answer(_ref("Approval"), 400, 403, 404, 409, 422),
                parameters=[_path("id")],
                requestBody=_body(_obj({}, {"note": _TEXT}), required=False),
            )
        },
        "/api/v1/approvals/{id}/deny": {
            "post": _op(
                "Deny it; the model is told the reason (approver)",
                _answer(_ref("Approval"), 400, 403, 404, 409, 422),
                parameters=[_path("id")],
                requestBody=_body(_obj({}, {"reason": _TEXT, "note": _TEXT})),
            )
        },
        "/api/v1/calls": {
            "get": _op(
                "Calls, newest first, a page at a time",
                _answer(_page("calls", "CallSummary"), 422),
                parameters=_FILTERS,
            )
        },
        "/api/v1/calls/{task}/{call}": {
            "get": _op(
                "A call: its timeline, attempts, result, error",
                _answer(_ref("Call"), 404),
                parameters=task_call,
            )
        },
        "/api/v1/calls/{task}/{call}/settle": {
            "post": _op(
                "Record what an UNKNOWN_OUTCOME call did (approver)",
                _answer(_ref("Call"), 400, 403, 404, 409, 422),
                parameters=task_call,
                requestBody=_body(_obj({"succeeded": {"type": "boolean"}, "note": _TEXT})),
            )
        },
        "/api/v1/unknown": {
            "get": _op(
                "Calls whose outcome nobody knows, newest first",
                _answer(_page("calls", "Call"), 422),
                parameters=[p for p in _FILTERS if p["name"] != "status"],
            )
        },
        "/api/v1/reconcile": {
            "post": _op(
                "Ask the tools of unknown calls what happened (admin)",
                _answer(_obj({"settled": {"type": "array", "items": _ref("CallSummary")}}), 403),
            )
        },
        "/api/v1/audit": {
            "get": _op(
                "The audit trail of the calls selected, newest first",
                _answer(
                    _obj(
                        {
                            "events": {"type": "array", "items": _ref("AuditEvent")},
                            "next_cursor": _OPT_STR,
                        }
                    ),
                    422,
                ),
                parameters=_FILTERS,
            )
        },
        "/api/v1/tools": {
            "get": _op(
                "The catalog, or what one principal may use",
                _answer(_obj({"tools": {"type": "array", "items": _ref("Tool")}}), 404),
                parameters=[_query("principal", "a principal's id")],
            )
        },
        "/api/v1/search": {
            "post": _op(
                "What retrieval would show a model working for a principal",
                _answer(_ref("Selection"), 400, 404, 422),
                requestBody=_body(
                    _obj(
                        {
                            "query": {"type": "string", "minLength": 1, "maxLength": 4000},
                            "principal": {"type": "string", "minLength": 1, "maxLength": 200},
                        },
                        {"k": {"type": "integer", "minimum": 1, "maximum": 50}},
                    )
                ),
            )
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "toolkeeper operators' API",
            "version": __version__,
            "description": "Approvals, the ledger, unknown outcomes, the audit trail and the "
            "catalog, for operators holding a token of `[operators.NAME]`.",
        },
        "security": [{"operatorToken": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"operatorToken": {"type": "http", "scheme": "bearer"}},
            "schemas": _SCHEMAS,
            "responses": {
                "Error": {
                    "description": "Refused; `error.code` says why",
                    "content": {"application/json": {"schema": _ref("Error")}},
                }
            },
        },
    }
