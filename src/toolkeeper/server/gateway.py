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

import contextlib
import dataclasses
import hashlib
import hmac
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import mcp_types
import msgspec
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from ..catalog.registry import CatalogEvent, Tool
from ..core._visible import visible
from ..core.errors import ErrorCode, ToolError, suggested
from ..core.ids import id_problem
from ..core.states import CallStatus
from ..core.values import Fence, Principal, ToolCall, ToolResult, ToolSpec
from ..dialects.base import RESULT_CHARS, check_result_limit, shown_result
from ..dialects.mcp import MCP
from ..keeper import Keeper
from ..ledger.base import ApprovalRecord
from ..policy.grants import may_use
from ..retrieval.meta import CALL_TOOL
from ..retrieval.selector import Connected
from ..schema.validate import SchemaError, Validator, compile_validator
from .call_ids import CALL_META_KEY, REPEAT_WINDOW, TASK_META_KEY, CallIds
from .progressive import MetaTools

__all__ = [
    "APPROVAL_INPUT_KEY",
    "APPROVAL_META_KEY",
    "ERROR_CODE_META_KEY",
    "REPLAYED_META_KEY",
    "ClientView",
    "Exposure",
    "Gateway",
    "GatewayPrincipal",
]

Exposure = Literal["direct", "progressive"]
APPROVAL_INPUT_KEY = "toolkeeper-approval"
"""The key of the approval elicitation in an `InputRequiredResult` (2026-07-28 clients)."""
REPLAYED_META_KEY = "dev.toolkeeper/replayed"
"""In every `tools/call` result's `_meta`: true when the call did not run for this request
(its result comes from the ledger), beside the call's id (`dev.toolkeeper/call-id`)."""
ERROR_CODE_META_KEY = "dev.toolkeeper/error-code"
"""In an error result's `_meta`: the error's stable code."""
APPROVAL_META_KEY = "dev.toolkeeper/approval-id"
"""In the `_meta` of a result that waits for a person: the approval request to decide."""

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
    approve_by_elicitation: bool = False
    """Whether its client may answer the approval of its calls through elicitation (the
    decision is recorded as the client's: `elicitation:<principal id>`)."""
    client_task_ids: bool = False
    """Whether its client may name a call's task (`dev.toolkeeper/task-id`); otherwise such a
    call is refused and every call of it is in its one task, `mcp:<principal id>`."""


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

        repeat_window: Seconds after a write ends during which a plain client's identical
            proposal (no `dev.toolkeeper/call-id`) is answered with that call's result
            instead of running it again; 0 runs it again as soon as it ended.

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
        repeat_window: float = REPEAT_WINDOW,
    ) -> None:
        self.keeper = keeper
        self.name = name
        # Refused here, not at each call's answer once the call has run.
        self.max_result_chars = check_result_limit(max_result_chars, "max_result_chars")
        self.principals = {p.principal.id: p for p in principals}
        self._tokens = [(_token_digest(p.token), p) for p in principals if p.token is not None]
        self._call_ids = CallIds(
            keeper.store, clock=keeper.runtime.clock, repeat_window=repeat_window
        )
        self._dialect = MCP()
        self._exported: dict[int, tuple[ToolSpec, mcp_types.Tool, Validator | None]] = {}
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
        tool = self._exported_of(spec)[0]
        return tool if tool.name == name else tool.model_copy(update={"name": name})

    def _exported_of(self, spec: ToolSpec) -> tuple[mcp_types.Tool, Validator | None]:
        """The MCP tool of `spec`, and the check of its output schema (None: it has none, or
        none that can be checked)."""
        hit = self._exported.get(id(spec))
        if hit is not None and hit[0] is spec:
            return hit[1], hit[2]
        # (the MCP dialect leaves out an output schema that is not an object's)
        tool = mcp_types.Tool.model_validate(self._dialect.export_tool(spec).value)
        check = None
        if tool.output_schema is not None:
            with contextlib.suppress(SchemaError):  # (one no client can check either)
                check = compile_validator(tool.output_schema)
        self._exported[id(spec)] = (spec, tool, check)
        return tool, check

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
        if not who.client_task_ids and TASK_META_KEY in (params.meta or {}):
            # Refused, not ignored: a client that names its tasks expects its own budgets and
            # its own call ids per task, and would silently get neither.
            return self._wire(_task_refused(params.name), None)
        if who.exposure == "progressive":
            if not self._meta_tools.is_meta(params.name):
                raise self._unknown(who, params.name)
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
            raise self._unknown(who, params.name)
        return await self._direct(who, tool, params.arguments or {}, params, client)

    def _unknown(self, who: GatewayPrincipal, name: str) -> MCPError:
        """The refusal of a tool `who` cannot see, whether or not it exists: its data
        suggests close names among those `tools/list` shows `who` (`did_you_mean`)."""
        listed = [tool.name for tool in self.list_tools(who).tools]
        return MCPError(
            mcp_types.INVALID_PARAMS, f"Unknown tool: {name}", suggested(name, listed) or None
        )

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
        if CallIds.derived(meta):  # (a client's own id, whatever its shape, is no generation)
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
            or not self._call_ids.derives(asked.call_id, who.principal, name, arguments)
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
        """Propose and execute. A derived id is read from the ledger (`CallIds.derive`), so a
        proposal made while the same call is open joins it and gets its result, replayed or
        not; only a read's id taken unread from memory, found made and ended by another
        gateway process, is derived again. A `call_id` given is that call's, ended or not."""
        tool = self.keeper.catalog.get(name)
        # A repeated write always reads the ledger: only a read may be run twice by a race.
        safe = tool is not None and tool.spec.retry_safe
        call, read = await self._proposal(
            who, name, arguments, meta, call_id=call_id, probe=not safe
        )
        result = await self.keeper.execute(call)
        if not read and result.replayed and result.status.terminal:
            self._call_ids.ended(call.task_id, call.call_id, result.status)
            call, _ = await self._proposal(who, name, arguments, meta, probe=True)
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
    ) -> tuple[ToolCall, bool]:
        """The call proposed, and whether its id was read from the ledger (or given)."""
        task_id = self._call_ids.task_id(who.principal, meta)
        read = True
        if call_id is None:
            call_id, read = await self._call_ids.derive(
                who.principal, task_id, name, arguments, meta, probe=probe
            )
        call = ToolCall(
            call_id=call_id,
            name=name,
            arguments=dict(arguments),
            task_id=task_id,
            principal=who.principal,
            metadata={"dialect": "mcp"},
        )
        return call, read

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
        # The answer is the client's: whether a person gave it, the gateway cannot know.
        who = f"elicitation:{call.principal.id if call.principal is not None else 'unknown'}"
        try:
            if answer.action == "accept" and (answer.content or {}).get("approve") is True:
                await self.keeper.approvals.approve(
                    approval_id, by=who, note="approved by the client's MCP elicitation answer"
                )
            else:
                await self.keeper.approvals.deny(
                    approval_id, by=who, reason="declined by the client's MCP elicitation answer"
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
            shown = msgspec.structs.replace(
                shown, error=dataclasses.replace(shown.error, message=shown.error.message + hint)
            )
        wire = self._dialect.format_result(shown, max_chars=None)
        check = self._exported_of(spec)[1] if result.error is None and spec is not None else None
        if check is not None:
            if "structuredContent" not in wire and isinstance(result.data, dict):
                wire["structuredContent"] = result.data  # (whole, though its text was cut)
            # A success the tool's declared output schema refuses (a call settled by a person
            # with no result, or another one; text where an object is declared) is an error
            # result saying so: as a success, the client's SDK would refuse it.
            misfit = _misfit(check, wire.get("structuredContent"))
            if misfit is not None:
                return self._wire(_unshowable(result, misfit), None)
        # Every answer says which call it is the result of, and whether that call ran for this
        # request or was answered from the ledger.
        meta: dict[str, Any] = {CALL_META_KEY: result.call_id} if result.call_id else {}
        meta[REPLAYED_META_KEY] = result.replayed
        if result.error is not None:
            meta[ERROR_CODE_META_KEY] = result.error.code.value
            if result.approval_id:
                meta[APPROVAL_META_KEY] = result.approval_id
        wire["_meta"] = {**wire.get("_meta", {}), **meta}
        return wire


def _misfit(check: Validator, content: Any) -> str | None:
    """Why `content` is not structured content of the output schema `check` checks (where,
    and which keyword: not the value, which may be anything); None when it is."""
    if content is None:
        return "no structured result is recorded"
    if check.is_valid(content):
        return None
    first = next(iter(check.violations(content)), None)
    where = f" ({first.keyword} at {first.pointer or '/'})" if first is not None else ""
    return f"the recorded result does not match it{where}"


def _unshowable(result: ToolResult, misfit: str) -> ToolResult:
    """The error result of a success whose result cannot be sent as its tool declares."""
    error = ToolError.of(
        ErrorCode.TOOL_ERROR,
        f"{result.tool} took effect (the call succeeded), but its result cannot be shown in the "
        f"output schema the tool declares: {misfit}. Do not make the call again unless you "
        "mean to repeat it",
        details={"status": result.status.value},
    )
    # (toolkeeper's own words, not the tool's: never fenced as the tool's output)
    return msgspec.structs.replace(result, data=None, error=error, metadata={}, fence=Fence.NONE)


def _needs_approval(result: ToolResult) -> bool:
    return (
        result.status is CallStatus.AWAITING_APPROVAL
        and result.error is not None
        and result.error.code is ErrorCode.APPROVAL_REQUIRED
        and result.approval_id is not None
    )


def _task_refused(name: str) -> ToolResult:
    """The refusal of a call whose client named its task unallowed (no call was proposed)."""
    message = (
        f"this client may not name its task ({TASK_META_KEY} in _meta): its principal's calls "
        "share one task and its budgets; the operator allows it with client_task_ids = true"
    )
    error = ToolError.of(ErrorCode.PERMISSION_DENIED, message)
    return ToolResult(call_id="", tool=name, status=CallStatus.REJECTED, error=error)


def _approval_message(request: ApprovalRecord) -> str:
    """The question to the user: the request as the ledger holds it (sensitive arguments
    redacted, as every approver sees them), with what could hide or reorder it escaped."""
    args = json.dumps(dict(request.arguments), ensure_ascii=False, default=str)
    return visible(
        f"Approve {request.tool} with arguments {args}? ({request.reason}) "
        f"Approval {request.id}; this approves these exact arguments only."
    )
