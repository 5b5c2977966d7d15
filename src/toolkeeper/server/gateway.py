"""The MCP gateway: what each principal sees and how each `tools/call` runs.

What it is: the MCP face of a `Keeper`. `tools/list` shows a principal only the tools
`may_use` allows (in `direct` exposure, each as an MCP tool through the MCP dialect; in
`progressive` exposure, the meta-tools `search_tools`, `get_tool_details`, `call_tool`).
Every `tools/call` goes through `Keeper.execute`: dedupe, authorization, validation, rules,
approval, budgets, the ledger. A tool the principal may not use is answered exactly like a tool
that does not exist. When a call needs approval and the client can elicit, the user is asked
through elicitation and the approval (bound to the argument digest, like any other) is decided
by that answer (unless a person decided it first, elsewhere: that decision stands, and the
user gets the call's result under it); otherwise the error result names the approval id and
`toolkeeper approvals approve ID`, and the same call proposed again runs once approved.

What it is not: a transport. `toolkeeper.server.transports` serves a gateway over stdio and
streamable HTTP; this module works for whichever principal a transport authenticated.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import mcp_types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from ..catalog.registry import CatalogEvent, Tool
from ..core._visible import visible
from ..core.errors import ErrorCode
from ..core.states import CallStatus
from ..core.values import Principal, ToolCall, ToolResult, ToolSpec
from ..dialects.base import RESULT_CHARS, check_result_limit, shown_result
from ..dialects.mcp import MCP, object_schema
from ..executor.gates import id_problem
from ..keeper import Keeper
from ..ledger.base import ApprovalRecord
from ..policy.grants import may_use
from ..retrieval.meta import CALL_TOOL
from ..retrieval.selector import Connected
from ..schema.validate import SchemaError, compile_validator
from .call_ids import CallIds
from .progressive import MetaTools

__all__ = ["APPROVAL_INPUT_KEY", "ClientView", "Exposure", "Gateway", "GatewayPrincipal"]

Exposure = Literal["direct", "progressive"]
_MAX_REDERIVE = 5
APPROVAL_INPUT_KEY = "toolkeeper-approval"
"""The key of the approval elicitation in an `InputRequiredResult` (2026-07-28 clients)."""

_APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Approve",
            "description": "Run this exact call with these exact arguments",
        }
    },
    "required": ["approve"],
}


@dataclass(frozen=True, kw_only=True, slots=True)
class GatewayPrincipal:
    """A principal as the gateway knows it: identity, grants, token and view."""

    principal: Principal
    """Who calls act for."""
    token: str | None = field(repr=False)
    """The bearer token that authenticates it over HTTP (left out of its repr)."""
    exposure: Exposure
    """How it sees tools."""
    approve_by_elicitation: bool = True
    """Whether its client's user may approve its calls through elicitation."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ClientView:
    """What the gateway needs to know of the client a call came from to ask its user."""

    protocol_version: str
    """The protocol version the call was made in."""
    capabilities: mcp_types.ClientCapabilities | None
    """What the client declared it can do."""
    elicit: Callable[[str, dict[str, Any]], Awaitable[Any]] | None = None
    """Sends a form elicitation (message, schema) and returns the client's answer; None when
    no request can be sent to the client (the 2026-07-28 era asks by `InputRequiredResult`)."""

    @classmethod
    def of(cls, ctx: ServerRequestContext[Any, Any]) -> ClientView:
        """The client of an SDK request context."""
        session = ctx.session

        async def elicit(message: str, schema: dict[str, Any]) -> Any:
            return await session.elicit_form(message, schema, related_request_id=ctx.request_id)

        return cls(
            protocol_version=ctx.protocol_version,
            capabilities=session.client_capabilities,
            elicit=elicit if session.can_send_request else None,
        )

    def can_elicit_form(self) -> bool:
        """Form elicitation is supported when declared, or when `elicitation` is empty (the
        spec's backwards-compatible reading)."""
        caps = self.capabilities
        if caps is None or caps.elicitation is None:
            return False
        return caps.elicitation.form is not None or caps.elicitation.url is None


def _token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class Gateway:
    """Per-principal tool views and calls over one `Keeper`.

    Args:
        keeper: The keeper whose catalog, policy and ledger every call goes through.
        principals: Who may connect, by principal id.
        name: The server name shown to clients.
        connected: Whether an upstream source is connected (discovery leaves out the tools of
            one that is not); None treats every source as connected.
        max_result_chars: The most characters of a result's text a client is sent; a longer
            one is cut with a note (`MCP.format_result`). None sends every result whole.

    Raises:
        ValueError: `max_result_chars` is below 1 (use None to send results whole).
    """

    def __init__(
        self,
        keeper: Keeper,
        principals: Sequence[GatewayPrincipal],
        *,
        name: str = "toolkeeper",
        connected: Connected | None = None,
        max_result_chars: int | None = RESULT_CHARS,
    ) -> None:
        self.keeper = keeper
        self.name = name
        # Refused here, not at each call's answer once the call has run.
        self.max_result_chars = check_result_limit(max_result_chars, "max_result_chars")
        self.principals = {p.principal.id: p for p in principals}
        self._tokens = [(_token_digest(p.token), p) for p in principals if p.token is not None]
        self._call_ids = CallIds(keeper.store)
        self._dialect = MCP()
        self._exported: dict[int, tuple[ToolSpec, mcp_types.Tool]] = {}
        self._unsubscribe = keeper.catalog.subscribe(self._forget)
        # Discovery never offers a tool of an upstream that is down (`connected`).
        self._meta_tools = MetaTools(keeper, self._run_inner, connected=connected)

    def close(self) -> None:
        """Stop following the keeper's catalog and close the progressive view's search index
        (a `Deployment` does this when it closes); idempotent."""
        self._unsubscribe()
        self._meta_tools.close()

    # who -------------------------------------------------------------------------------

    def authenticate(self, token: str) -> GatewayPrincipal | None:
        """The principal a bearer token belongs to, or None.

        Every configured token is compared, in constant time, as a SHA-256 digest: the time
        taken tells neither which token matched nor how long any token is, and a token of any
        characters (a header is decoded as Latin-1) is simply unknown."""
        offered = _token_digest(token)
        found = None
        for digest, entry in self._tokens:
            if hmac.compare_digest(digest, offered):
                found = entry
        return found

    # tools/list ------------------------------------------------------------------------

    def visible(self, principal: Principal) -> list[ToolSpec]:
        """The specs `principal` may use, in catalog order."""
        return [spec for spec in self.keeper.catalog.specs() if may_use(principal, spec)]

    def list_tools(self, who: GatewayPrincipal) -> mcp_types.ListToolsResult:
        """What `tools/list` answers to `who`."""
        if who.exposure == "progressive":
            specs: Sequence[ToolSpec] = self._meta_tools.specs()
        else:
            specs = self.visible(who.principal)
        # Names unique in the list (two names rewritten alike get told apart), as `answer`
        # maps them back.
        names = self._dialect.wire_list(specs)
        return mcp_types.ListToolsResult(
            tools=[self._export(s, name) for s, name in zip(specs, names, strict=True)]
        )

    def _forget(self, event: CatalogEvent) -> None:
        """Drop the export of a tool version that left the catalog (kept, every change of a
        tool left one behind for as long as the gateway ran)."""
        for tool in (event.tool, event.previous):
            if tool is not None:
                self._exported.pop(id(tool.spec), None)

    def _export(self, spec: ToolSpec, name: str) -> mcp_types.Tool:
        hit = self._exported.get(id(spec))
        if hit is not None and hit[0] is spec:
            tool = hit[1]
        else:
            # (the MCP dialect leaves out an output schema that is not an object's)
            tool = mcp_types.Tool.model_validate(self._dialect.export_tool(spec).value)
            self._exported[id(spec)] = (spec, tool)
        return tool if tool.name == name else tool.model_copy(update={"name": name})

    # tools/call ------------------------------------------------------------------------

    async def call_tool(
        self,
        who: GatewayPrincipal,
        params: mcp_types.CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any] | None = None,
    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
        """Answer one `tools/call` for `who`, as the SDK's handler.

        Raises:
            MCPError: INVALID_PARAMS for a tool that does not exist for `who`.
        """
        answer = await self.answer(who, params, ClientView.of(ctx) if ctx is not None else None)
        if isinstance(answer, mcp_types.InputRequiredResult):
            return answer
        return mcp_types.CallToolResult.model_validate(answer)

    async def answer(
        self,
        who: GatewayPrincipal,
        params: mcp_types.CallToolRequestParams,
        client: ClientView | None,
    ) -> dict[str, Any] | mcp_types.InputRequiredResult:
        """Answer one `tools/call` for `who`: the `CallToolResult` as its wire dict, or the
        question to the user when `client` can be asked to approve.

        Raises:
            MCPError: INVALID_PARAMS for a tool that does not exist for `who`.
        """
        if who.exposure == "progressive":
            if not self._meta_tools.is_meta(params.name):
                raise MCPError(mcp_types.INVALID_PARAMS, f"Unknown tool: {params.name}")
            if params.name == CALL_TOOL:
                # Run as a direct call of the tool it names: approval questions, the approval
                # id and the error details come back as they would from that tool.
                target = self._meta_tools.target(who.principal, params.arguments or {})
                if isinstance(target, ToolResult):
                    return self._wire(target, None)
                return await self._direct(who, target[0], target[1], params, client)
            result = await self._meta_tools.call(who.principal, params.name, params.arguments or {})
            return self._wire(result, None)
        tool = self.keeper.catalog.get(params.name)
        if tool is None:
            # A name MCP does not allow was listed rewritten (`safe_name`): map it back.
            original = self._dialect.original_name(params.name, self.visible(who.principal))
            tool = self.keeper.catalog.get(original) if original != params.name else None
        if tool is None or not may_use(who.principal, tool.spec):
            raise MCPError(mcp_types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        return await self._direct(who, tool, params.arguments or {}, params, client)

    async def _direct(
        self,
        who: GatewayPrincipal,
        tool: Tool,
        arguments: Mapping[str, Any],
        params: mcp_types.CallToolRequestParams,
        client: ClientView | None,
    ) -> dict[str, Any] | mcp_types.InputRequiredResult:
        """Run one call of `tool`, asking the client's user when it needs an approval."""
        meta = dict(params.meta or {})
        answered = await self._answered(who, tool.spec.name, arguments, params, client)
        call, result = await self._run(who, tool.spec.name, arguments, meta, call_id=answered)
        if _needs_approval(result) and who.approve_by_elicitation and client is not None:
            asked = await self._ask(client, params, call, result)
            if isinstance(asked, mcp_types.InputRequiredResult):
                return asked
            result = asked
        self._call_ids.ended(call.task_id, call.call_id, result.status)
        return self._wire(result, tool.spec)

    async def _answered(
        self,
        who: GatewayPrincipal,
        name: str,
        arguments: Mapping[str, Any],
        params: mcp_types.CallToolRequestParams,
        client: ClientView | None,
    ) -> str | None:
        """The call a 2026-07-28 client's answer is to: the call of the approval its request
        state names, when that is a derived id of this same call in its task; else None.

        Sent again after that call ended (its result lost on the way, or the question also
        answered in another session), the round is that call, whose result it gets, not the
        call's next generation with a new question whose yes would run it twice."""
        state = params.request_state
        if (
            client is None
            or client.protocol_version not in MODERN_PROTOCOL_VERSIONS
            or not who.approve_by_elicitation
            or APPROVAL_INPUT_KEY not in (params.input_responses or {})
            or not CallIds.derived(params.meta)
            or state is None
            or id_problem(state) is not None  # (text no ledger can look up)
        ):
            return None
        asked = await self.keeper.approvals.get(state)
        if (
            asked is None
            or asked.principal_id != who.principal.id
            or asked.task_id != self._call_ids.task_id(who.principal, params.meta)
            or not CallIds.derives(asked.call_id, who.principal, name, arguments)
        ):
            return None
        return asked.call_id

    async def _run_inner(self, call: ToolCall) -> ToolResult:
        """The inner call of `call_tool`, run like a direct call of its principal."""
        principal = call.principal
        who = self.principals.get(principal.id) if principal is not None else None
        if who is None or who.principal != principal:
            raise MCPError(mcp_types.INVALID_REQUEST, "unknown principal")
        arguments = call.arguments if isinstance(call.arguments, Mapping) else {}
        inner, result = await self._run(who, call.name, arguments, {})
        self._call_ids.ended(inner.task_id, inner.call_id, result.status)
        return result

    async def _run(
        self,
        who: GatewayPrincipal,
        name: str,
        arguments: Mapping[str, Any],
        meta: Mapping[str, Any],
        *,
        call_id: str | None = None,
    ) -> tuple[ToolCall, ToolResult]:
        """Propose and execute; a derived id that turns out to be taken by an ended call
        (another gateway process got there first) is derived again from the ledger. A
        `call_id` given is that call's, whether or not it ended."""
        call = await self._proposal(who, name, arguments, meta, call_id=call_id)
        result = await self.keeper.execute(call)
        if call_id is not None:
            return call, result
        for _ in range(_MAX_REDERIVE):
            if not (result.replayed and CallIds.derived(meta) and result.status.terminal):
                break
            self._call_ids.ended(call.task_id, call.call_id, result.status)
            call = await self._proposal(who, name, arguments, meta, probe=True)
            result = await self.keeper.execute(call)
        return call, result

    async def _proposal(
        self,
        who: GatewayPrincipal,
        name: str,
        arguments: Mapping[str, Any],
        meta: Mapping[str, Any],
        *,
        probe: bool = False,
        call_id: str | None = None,
    ) -> ToolCall:
        task_id = self._call_ids.task_id(who.principal, meta)
        if call_id is None:
            call_id = await self._call_ids.call_id(
                who.principal, task_id, name, arguments, meta, probe=probe
            )
        return ToolCall(
            call_id=call_id,
            name=name,
            arguments=dict(arguments),
            task_id=task_id,
            principal=who.principal,
            metadata={"dialect": "mcp"},
        )

    async def _ask(
        self,
        client: ClientView,
        params: mcp_types.CallToolRequestParams,
        call: ToolCall,
        pending: ToolResult,
    ) -> ToolResult | mcp_types.InputRequiredResult:
        """Ask the client's user to approve a pending call; the call's result once decided,
        the pending result when the user dismissed the question or the client cannot ask."""
        if not client.can_elicit_form():
            return pending
        approval_id = pending.approval_id
        assert approval_id is not None
        asked_for = await self.keeper.approvals.get(approval_id)
        if asked_for is None:
            return pending
        message = _approval_message(asked_for)
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            answer = (params.input_responses or {}).get(APPROVAL_INPUT_KEY)
            # An answer counts only with the state of the question it answers: one sent
            # unasked (no state) or to another question was never shown this call.
            if answer is None or params.request_state != approval_id:
                request = mcp_types.ElicitRequest(
                    params=mcp_types.ElicitRequestFormParams(
                        message=message, requested_schema=_APPROVAL_SCHEMA
                    )
                )
                return mcp_types.InputRequiredResult(
                    input_requests={APPROVAL_INPUT_KEY: request}, request_state=approval_id
                )
        elif client.elicit is not None:
            try:
                answer = await client.elicit(message, _APPROVAL_SCHEMA)
            except (MCPError, ValidationError):
                # The client answered with an error or with no answer of the form: its user
                # was not asked, so the call waits, its error naming the approval id.
                return pending
        else:
            return pending
        if not isinstance(answer, mcp_types.ElicitResult) or answer.action == "cancel":
            return pending
        who = call.principal.id if call.principal is not None else "unknown"
        try:
            if answer.action == "accept" and (answer.content or {}).get("approve") is True:
                await self.keeper.approvals.approve(
                    approval_id, by=who, note="approved via MCP elicitation"
                )
            else:
                await self.keeper.approvals.deny(
                    approval_id, by=who, reason="declined via MCP elicitation"
                )
        except ValueError:
            # Decided while the user was asked (a person at `toolkeeper approvals`, another
            # replica's user) or expired meanwhile: that decision stands, and the call's
            # result tells the user what it did.
            pass
        return await self.keeper.execute(call)

    def _wire(self, result: ToolResult, spec: ToolSpec | None) -> dict[str, Any]:
        """`result` as the wire dict of an MCP `CallToolResult`."""
        shown = shown_result(result, self.max_result_chars)
        if _needs_approval(shown) and shown.error is not None:
            # Here ids are derived from the call itself: the same call made again is this one.
            # (Added once the message is cut, so a long one does not cut it off.)
            hint = (
                "; once approved, make the same call again, with the same arguments: it runs once"
            )
            shown = dataclasses.replace(
                shown, error=dataclasses.replace(shown.error, message=shown.error.message + hint)
            )
        wire = self._dialect.format_result(shown, max_chars=None)
        if (
            result.error is None
            and spec is not None
            and object_schema(spec.output_schema)
            and "structuredContent" not in wire
            and isinstance(result.data, dict)
        ):
            # Only an object is structured content: anything else (an upstream that declares
            # an output schema and answers in text) goes as the text content it already is,
            # never as an answer the client's SDK refuses for a call the ledger holds done.
            wire["structuredContent"] = result.data
        if "structuredContent" in wire and spec is not None and not _fits_output(spec, wire):
            wire = _unfit(result)
        if result.error is not None:
            wire["_meta"] = {
                "dev.toolkeeper/error-code": result.error.code.value,
                **({"dev.toolkeeper/call-id": result.call_id} if result.call_id else {}),
                **(
                    {"dev.toolkeeper/approval-id": result.approval_id} if result.approval_id else {}
                ),
            }
        return wire


def _fits_output(spec: ToolSpec, wire: Mapping[str, Any]) -> bool:
    """Whether the structured content of `wire` is valid for the tool's declared output
    schema (the client's SDK refuses a result that is not): a masked sensitive value is text
    where the schema may want a number."""
    if not object_schema(spec.output_schema):
        return True
    assert spec.output_schema is not None
    try:
        return not compile_validator(spec.output_schema).violations(wire["structuredContent"])
    except SchemaError:
        return True  # (a schema no validator takes: the client's own check decides)


def _unfit(result: ToolResult) -> dict[str, Any]:
    """The answer for a call whose result does not fit its tool's output schema: an error
    result saying so (what it held stays in the ledger), the call's id in its `_meta`."""
    text = (
        f"{result.tool} ran and finished (call {result.call_id}), but its result does not fit "
        "the tool's declared output schema (a sensitive value in it is masked, say), so it "
        "is not shown; the ledger keeps it. Do not call it again for this."
    )
    return {
        "content": [{"type": "text", "text": text}],
        "isError": True,
        "_meta": {"dev.toolkeeper/call-id": result.call_id},
    }


def _needs_approval(result: ToolResult) -> bool:
    return (
        result.status is CallStatus.AWAITING_APPROVAL
        and result.error is not None
        and result.error.code is ErrorCode.APPROVAL_REQUIRED
        and result.approval_id is not None
    )


def _approval_message(request: ApprovalRecord) -> str:
    """The question to the user: the request as the ledger holds it (sensitive arguments
    redacted, as every approver sees them), with what could hide or reorder it escaped."""
    args = json.dumps(dict(request.arguments), ensure_ascii=False, default=str)
    return visible(
        f"Approve {request.tool} with arguments {args}? ({request.reason}) "
        f"Approval {request.id}; this approves these exact arguments only."
    )
