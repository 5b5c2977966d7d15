"""The operators' HTTP API under `/api/v1`: JSON, described by `/api/v1/openapi.json`.

Every request but the document's carries `Authorization: Bearer <operator token>` (401
without one an operator holds; a principal's MCP token is not one). Reads need the viewer
role; deciding approvals and settling calls, approver; reconciling, admin (403 `FORBIDDEN`).
Refusals are `{"error": {"code", "message"}}` with a stable code (`openapi.ERROR_CODES`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..core.errors import StoreError
from ..ledger.pages import CallQuery
from . import api_params as P
from .desk import Desk, DeskError
from .openapi import document
from .operators import Operator, Operators
from .views import (
    approval_json,
    call_json,
    call_summary_json,
    error_json,
    search_json,
    tool_json,
)

__all__ = ["api_routes", "json_response"]

_log = logging.getLogger("toolkeeper")

Handler = Callable[[Request, Operator], Awaitable[Any]]


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """`data` as JSON; anything beyond ASCII escaped, so what a terminal or log shows of it
    is what was sent."""
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"), default=str)
    return Response(text, status, headers=headers, media_type="application/json")


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _endpoint(operators: Operators, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        token = _bearer(request)
        op = None if token is None else operators.authenticate(token)
        if op is None:
            return json_response(
                error_json("UNAUTHENTICATED", "send Authorization: Bearer <operator token>"),
                401,
                {"WWW-Authenticate": 'Bearer realm="toolkeeper operators"'},
            )
        try:
            found = await handler(request, op)
        except DeskError as exc:
            return json_response(error_json(exc.code, exc.message), exc.status)
        except StoreError:
            _log.exception("the ledger failed answering %s %s", request.method, request.url.path)
            return json_response(
                error_json("LEDGER_UNAVAILABLE", "the ledger did not answer; try again"), 503
            )
        return found if isinstance(found, Response) else json_response(found)

    return endpoint


def api_routes(desk: Desk, operators: Operators) -> list[BaseRoute]:
    """The routes of `/api/v1`, for a Starlette app or router."""

    async def approvals(request: Request, op: Operator) -> Any:
        params = request.query_params
        found = await desk.approvals(P.approval_status(params), P.limit(params, 100))
        return {"approvals": [approval_json(r) for r in found]}

    async def approval(request: Request, op: Operator) -> Any:
        return approval_json(await desk.approval(request.path_params["id"]))

    async def approve(request: Request, op: Operator) -> Any:
        given = await P.body(request, P.ApproveBody)
        return approval_json(await desk.approve(op, request.path_params["id"], given.note))

    async def deny(request: Request, op: Operator) -> Any:
        given = await P.body(request, P.DenyBody)
        reason = given.reason if given.reason is not None else given.note
        return approval_json(await desk.deny(op, request.path_params["id"], reason or ""))

    async def calls(request: Request, op: Operator) -> Any:
        query = P.call_query(request.query_params)
        found = await desk.calls(query)
        return _page("calls", [call_summary_json(r) for r in found], found, query)

    async def call(request: Request, op: Operator) -> Any:
        record, asked = await desk.call(request.path_params["task"], request.path_params["call"])
        return call_json(record, asked)

    async def unknown(request: Request, op: Operator) -> Any:
        query = P.call_query(request.query_params, status=P.UNKNOWN)
        found = await desk.calls(query)
        return _page("calls", [call_json(r, None) for r in found], found, query)

    async def settle(request: Request, op: Operator) -> Any:
        given = await P.body(request, P.SettleBody)
        task, call_id = request.path_params["task"], request.path_params["call"]
        record = await desk.settle(op, task, call_id, succeeded=given.succeeded, note=given.note)
        return call_json(record, None)

    async def reconcile(request: Request, op: Operator) -> Any:
        settled = await desk.reconcile(op)
        return {"settled": [call_summary_json(r) for r in settled]}

    async def audit(request: Request, op: Operator) -> Any:
        query = P.call_query(request.query_params)
        found = await desk.audit(query)
        events = [e.to_dict() for _, trail in found for e in trail]
        return {"events": events, "next_cursor": P.next_cursor([r for r, _ in found], query)}

    async def tools(request: Request, op: Operator) -> Any:
        principal = request.query_params.get("principal") or None
        specs = desk.tools(principal)
        return {"tools": [tool_json(s, desk.versions.get(s.name, [])) for s in specs]}

    async def search(request: Request, op: Operator) -> Any:
        given = await P.body(request, P.SearchBody)
        return search_json(await desk.search(given.query, given.principal, given.k))

    async def health(request: Request, op: Operator) -> Any:
        return await desk.health()

    async def openapi(request: Request) -> Response:
        return json_response(document())

    def route(path: str, handler: Handler, method: str = "GET") -> Route:
        return Route(path, _endpoint(operators, handler), methods=[method])

    return [
        Route("/api/v1/openapi.json", openapi, methods=["GET"]),
        route("/api/v1/health", health),
        route("/api/v1/approvals", approvals),
        route("/api/v1/approvals/{id}", approval),
        route("/api/v1/approvals/{id}/approve", approve, "POST"),
        route("/api/v1/approvals/{id}/deny", deny, "POST"),
        route("/api/v1/calls", calls),
        route("/api/v1/calls/{task}/{call}", call),
        route("/api/v1/calls/{task}/{call}/settle", settle, "POST"),
        route("/api/v1/unknown", unknown),
        route("/api/v1/reconcile", reconcile, "POST"),
        route("/api/v1/audit", audit),
        route("/api/v1/tools", tools),
        route("/api/v1/search", search, "POST"),
    ]


def _page(key: str, rows: list[dict[str, Any]], records: list[Any], query: CallQuery) -> Any:
    """A page and the cursor of the next one (None on the last page)."""
    return {key: rows, "next_cursor": P.next_cursor(records, query)}
