"""Upstream MCP servers as tool sources: one `McpUpstream` per server.

What it is: a `Connector` that keeps one session to an MCP server (a program over stdio, or a
URL over streamable HTTP) open, lists its tools page by page into the `Catalog` under
namespaced names (`git.git_status`), follows `notifications/tools/list_changed`, and runs
calls on it, passing the call's idempotency key in `_meta` (`dev.toolkeeper/idempotency-key`).
A server that dies is reconnected with backoff; while it is away its tools stay in the catalog
and calls end UPSTREAM_UNAVAILABLE at once.

What it is not: a policy. MCP annotations (`readOnlyHint`, `destructiveHint`,
`idempotentHint`) come from a server we do not control, so they are *hints*: unless the
operator trusts them for that upstream (`UpstreamParams.trust_hints`), an upstream tool is
destructive and not idempotent (every call asks a person, no failed attempt is retried) until
the configuration states what it is (`ToolOverride`); and every upstream tool needs the
permission `<upstream>:<tool>` unless configured otherwise, whatever its hints say.

What a model reads of an upstream is guarded too: its tools' output is fenced as data from
it (`UpstreamParams.fence`, `dialects.fence`), and, given a `Pins`, each tool's definition is
pinned when first seen: a changed one waits for an operator while the catalog keeps the
pinned definition or leaves the tool out (`UpstreamParams.pins`, `policy.pins`).

How failures are reported: nothing sent (no session, a send on a closed connection) raises
`UpstreamUnavailable`; the server answering `isError: true` raises `ToolFailed`; the
connection lost while the request was out raises `OutcomeUnknown` (the call may or may not
have run); the per-request read timeout raises `TimeoutError`. The SDK's and the stdio lane's
errors are mapped so in one place, `_mcp_errors.map_mcp_errors`.

The pieces beside it: `_mcp_params` (its configuration), `_mcp_tools` (its tools and results
as toolkeeper's values), `_mcp_transports` (how a server is reached), `_mcp_pipe` and
`_mcp_streams` (the stdio lane, and knowing when a connection ended).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from typing import Any

import anyio
import anyio.abc

from ..core.extras import MissingExtra

# before the `_mcp_*` modules beside this one, which import the SDK too
try:
    import mcp_types
    from mcp import Client
    from mcp.client.subscriptions import SubscriptionLost
    from mcp.shared.exceptions import MCPError
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingExtra("mcp", "an MCP upstream") from exc

from ..catalog.registry import Catalog, Tool
from ..core.errors import sole_cause
from ..core.retry import RetryPolicy
from ..core.signals import ToolFailed
from ..core.values import CallContext, ToolSpec
from ..policy.pins import Pins
from ._mcp_errors import map_mcp_errors
from ._mcp_params import ToolOverride, UpstreamParams
from ._mcp_pipe import CallLane, PipeTransport
from ._mcp_streams import WatchedTransport
from ._mcp_tools import IDEMPOTENCY_META_KEY, call_result, error_text, result_data, spec_from_mcp
from ._mcp_trace import Endpoint, request_span, until_answered
from ._mcp_transports import http_client, http_transport, stdio_transport
from .base import ToolOutput, UpstreamUnavailable

__all__ = [
    "IDEMPOTENCY_META_KEY",
    "McpUpstream",
    "ToolOverride",
    "UpstreamParams",
    "result_data",
    "spec_from_mcp",
]

logger = logging.getLogger(__name__)

_PAGE_CAP = 1000
"""A server whose tools/list never ends cannot hang the connector."""

_RECONNECT = RetryPolicy(initial_interval=0.2, backoff=2.0, max_interval=10.0, jitter=0.2)
_RECONNECT_WAIT = 5.0
"""Seconds after a lost connection during which a call waits for it to come back."""
_RELISTEN_AFTER = 1.0
"""Seconds a lost change stream waits for its connection's end before listening again."""


class McpUpstream:
    """One upstream MCP server: its session, its tools in a catalog, and the connector that
    runs them. Use as an async context manager; `aclose()` is idempotent."""

    def __init__(self, params: UpstreamParams, catalog: Catalog, pins: Pins | None = None) -> None:
        self.params = params
        self._endpoint = Endpoint.of(params)
        self._catalog = catalog
        self._pins = pins if params.pins != "off" else None
        self._offered: dict[str, ToolSpec] = {}
        """The tools the server offers now, as read (before their pins are applied)."""
        self._applying = anyio.Lock()
        self._client: Client | None = None
        self._lost: WatchedTransport | None = None
        self._lane: CallLane | None = None
        self._ready = anyio.Event()
        self._attempted = anyio.Event()
        self._wake = anyio.Event()
        self._refresh = anyio.Event()
        self._names: set[str] = set()
        self._unknown_names: set[str] = set()
        self._refusal: int | None = None
        self._session_gone = False
        self._unsent: set[str] = set()
        """Idempotency keys of calls whose HTTP request could not connect (nothing sent)."""
        self._lost_at: float | None = None
        """When the last connection was lost (monotonic), None before one was made."""
        self._closed = anyio.Event()
        """Set when the upstream is closed on purpose: calls waiting for it stop waiting."""
        self._exit: AsyncExitStack | None = None
        self._scope: anyio.CancelScope | None = None
        self.connects = 0
        """How many sessions were opened so far (1 after the first connection)."""

    # lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> McpUpstream:
        await self.start()
        await self.wait_attempted()
        return self

    async def __aexit__(self, *exc_info: Any) -> bool:
        """Close as `aclose()` does, handing the exception being raised to the session's task
        group: a cancellation of an enclosing scope (another upstream's, closed after this
        one) then reaches that scope instead of escaping."""
        self._closed.set()
        stack, self._exit = self._exit, None
        if stack is None:
            return False
        return bool(await stack.__aexit__(*exc_info))

    async def start(self) -> None:
        """Start the session in the background (from the task that will later close it). A
        server that cannot be reached is retried with backoff; its tools appear once it
        answers."""
        if self._exit is not None:
            return
        stack = AsyncExitStack()
        tg = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(tg.cancel_scope.cancel)
        self._exit = stack
        self._scope = tg.cancel_scope
        tg.start_soon(self._supervise)

    def cancel(self) -> None:
        """Start closing without waiting (then `aclose()` from the task that started it)."""
        self._closed.set()
        if self._scope is not None:
            self._scope.cancel()

    async def wait_attempted(self) -> None:
        """Wait until the first connection attempt has succeeded or failed (at most the
        connect timeout)."""
        with anyio.move_on_after(self.params.connect_timeout + 1.0):
            await self._attempted.wait()

    async def aclose(self) -> None:
        """Close the session (and stop the server process), from the task that called `start`.
        Idempotent."""
        self._closed.set()
        stack, self._exit = self._exit, None
        if stack is not None:
            await stack.aclose()

    @property
    def protocol_version(self) -> str | None:
        """The protocol version of the open session, None while disconnected."""
        client = self._client
        return client.protocol_version if client is not None else None

    @property
    def connected(self) -> bool:
        """Whether a session is open now."""
        return self._client is not None

    async def wait_connected(self) -> None:
        """Wait until a session is open (bound it with `anyio.fail_after`)."""
        await self._ready.wait()

    # the connector -----------------------------------------------------------------------

    async def invoke(self, spec: ToolSpec, arguments: Mapping[str, Any], ctx: CallContext) -> Any:
        """Run one attempt on the upstream.

        Raises:
            UpstreamUnavailable: no session; nothing was sent.
            OutcomeUnknown: the connection ended while the request was out.
            ToolFailed: the tool answered `isError: true`.
            TimeoutError: no answer before the call's deadline.
        """
        client, watch = self._client, self._lost
        if client is None or watch is None or watch.closed:
            self._wake.set()
            client, watch = await self._reconnected(ctx)
            if client is None or watch is None:
                raise UpstreamUnavailable(f"upstream {self.params.name!r} is not connected")
        name = spec.metadata.get("mcp", {}).get("name") or spec.name.partition(".")[2]
        remaining = ctx.remaining()
        timeout = remaining if math.isfinite(remaining) else None
        meta: Any = {IDEMPOTENCY_META_KEY: ctx.idempotency_key}
        observed = request_span(self._endpoint, name, ctx, client.protocol_version)
        headers = observed.headers if observed is not None else ctx.trace
        if headers:  # W3C trace context in `_meta` (MCP SEP-414)
            meta.update(headers)
        with (
            map_mcp_errors(
                self.params.name,
                lost=self._wake_supervisor,
                unsent=partial(self._take_unsent, ctx.idempotency_key),
                forgotten=partial(self._take_session_gone, watch),
            ),
            until_answered(observed),
        ):
            lane = self._lane
            if lane is not None and lane.ready(client.protocol_version):
                with anyio.fail_after(timeout):
                    raw = await lane.call_tool(
                        name, arguments, meta, protocol_version=client.protocol_version
                    )
                result = call_result(raw)
            else:
                result = await self._call_on_session(client, name, arguments, meta, timeout)
        if observed is not None:
            observed.ended(None, "tool_error" if result.is_error else None)
        if result.is_error:
            raise ToolFailed(error_text(result))
        data = result_data(result)
        if any(not isinstance(b, mcp_types.TextContent) for b in result.content):
            # Images, audio, resources: an MCP client gets them as they are.
            blocks = tuple(
                b.model_dump(by_alias=True, mode="json", exclude_none=True) for b in result.content
            )
            return ToolOutput(data=data, content=blocks)
        return data

    async def _reconnected(self, ctx: CallContext) -> tuple[Client | None, Any]:
        """The connection, when one lost moments ago comes back within the call's deadline
        (a restarted server is back within a second or two): nothing has been sent yet, so
        waiting is safe. An upstream down for longer fails calls at once."""
        lost = self._lost_at
        if lost is None or self._closed.is_set():  # (closed on purpose: nothing comes back)
            return None, None
        budget = min(ctx.remaining(), _RECONNECT_WAIT - (time.monotonic() - lost))
        if budget > 0:
            with anyio.move_on_after(budget):
                async with anyio.create_task_group() as tg:  # back, or closed meanwhile

                    async def until(event: anyio.Event) -> None:
                        await event.wait()
                        tg.cancel_scope.cancel()

                    tg.start_soon(until, self._ready)
                    tg.start_soon(until, self._closed)
        client, watch = self._client, self._lost
        if client is None or watch is None or watch.closed:
            return None, None
        return client, watch

    async def _call_on_session(
        self,
        client: Client,
        name: str,
        arguments: Mapping[str, Any],
        meta: Any,
        read_timeout: float | None,
    ) -> mcp_types.CallToolResult:
        """One call through the SDK session (streamable HTTP, or a stdio transport of the SDK's)."""
        request = mcp_types.CallToolRequest(
            params=mcp_types.CallToolRequestParams(name=name, arguments=dict(arguments), _meta=meta)
        )
        try:
            # The session's plain request path, not `call_tool`: the client's output-schema
            # check would turn an answered call (the effect done) into an exception; the
            # executor records what the server answered, as it is.
            return await client.session.send_request(
                request, mcp_types.CallToolResult, request_read_timeout_seconds=read_timeout
            )
        except MCPError as exc:
            if exc.code != mcp_types.HEADER_MISMATCH:
                raise
            # 2026-07-28 over HTTP: the client re-lists the tool and sends again.
            return await client.call_tool(
                name, dict(arguments), read_timeout_seconds=read_timeout, meta=meta
            )

    # session supervision -----------------------------------------------------------------

    def _note_refusal(self, status: int) -> None:
        self._refusal = status

    def _note_session_gone(self) -> None:
        self._session_gone = True

    def _note_unsent(self, key: str) -> None:
        if len(self._unsent) > 1024:  # (keys of calls that ended otherwise)
            self._unsent.clear()
        self._unsent.add(key)

    def _wake_supervisor(self) -> None:
        """The connection ended under a call: reconnect now, not after the backoff."""
        self._wake.set()

    def _take_unsent(self, key: str) -> bool:
        """Whether the HTTP request of the call with idempotency key `key` could not connect
        (then forgotten)."""
        if key not in self._unsent:
            return False
        self._unsent.discard(key)
        return True

    def _take_session_gone(self, watch: WatchedTransport) -> bool:
        """Whether the server said it no longer knows the session (HTTP 404); then `watch`,
        the call's connection, is ended, so that a new session is opened."""
        if not self._session_gone:
            return False
        self._session_gone = False
        watch.mark_closed()
        return True

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[Client]:
        p = self.params
        lane_transport: PipeTransport | None = None
        if p.command is not None:
            inner: Any = stdio_transport(p)
            lane_transport = inner if isinstance(inner, PipeTransport) else None
        else:
            assert p.url is not None
            http = http_client(p, self._note_refusal, self._note_session_gone, self._note_unsent)
            inner = http_transport(p.url, http)
        watch = WatchedTransport(inner, on_close=self._on_lost)
        client = Client(
            watch,
            mode=p.protocol,
            cache=None,
            message_handler=self._on_message,
            raise_exceptions=False,
        )
        async with client:
            self._lost = watch
            self._lane = lane_transport.lane if lane_transport is not None else None
            yield client

    async def _supervise(self) -> None:
        attempt = 0
        while True:
            try:
                with anyio.CancelScope() as connecting:
                    connecting.deadline = anyio.current_time() + self.params.connect_timeout
                    async with self._open() as client:
                        await self._sync(client)
                        connecting.deadline = math.inf
                        self._client = client
                        self._session_gone = False
                        self.connects += 1
                        attempt = 0
                        self._ready.set()
                        self._attempted.set()
                        try:
                            await self._serve(client)
                        finally:
                            self._on_lost()
                        logger.warning(
                            "upstream %r: the connection ended (the server exited or closed "
                            "it); reconnecting",
                            self.params.name,
                        )
                if connecting.cancelled_caught:
                    logger.warning(
                        "upstream %r: no connection within the timeout", self.params.name
                    )
            except Exception as exc:
                cause = sole_cause(exc)  # not "unhandled errors in a TaskGroup"
                if self._refusal is not None:
                    logger.warning(
                        "upstream %r: the server refused the credentials (HTTP %d): check the "
                        "upstream's headers (its token)",
                        self.params.name,
                        self._refusal,
                    )
                else:
                    logger.warning(
                        "upstream %r: %s: %s", self.params.name, type(cause).__name__, cause
                    )
                self._refusal = None
            self._attempted.set()
            attempt += 1
            self._wake = anyio.Event()
            with anyio.move_on_after(_RECONNECT.delay(attempt)):
                await self._wake.wait()

    def _on_lost(self) -> None:
        if self._client is not None:
            self._lost_at = time.monotonic()
        self._client = None
        self._lane = None
        if self._ready.is_set():
            self._ready = anyio.Event()

    async def _serve(self, client: Client) -> None:
        """Follow list changes until the connection ends."""
        assert self._lost is not None
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._follow_changes, client)
            if self._pins is not None:
                tg.start_soon(self._follow_pins, self._pins)
            await self._lost.wait_closed()
            tg.cancel_scope.cancel()

    async def _follow_changes(self, client: Client) -> None:
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            if not _lists_changes(client):
                return
            assert self._lost is not None
            while True:
                try:
                    async with client.listen(tools_list_changed=True) as sub:
                        # A change made between the first listing and this subscription sent
                        # no event here: list once more now that every later one will.
                        await self._resync(client)
                        async for _event in sub:
                            await self._resync(client)
                    return
                except SubscriptionLost as exc:
                    # The server's end ends its stream too, a moment before the transport
                    # says so: `_serve` then sees the connection close and logs it. On a
                    # connection that lives on, listen (and list) again.
                    with anyio.move_on_after(_RELISTEN_AFTER):
                        await self._lost.wait_closed()
                        return
                    logger.warning(
                        "upstream %r: its change stream ended (%s); listening again",
                        self.params.name,
                        exc,
                    )
        while True:
            await self._refresh.wait()
            self._refresh = anyio.Event()
            await self._resync(client)

    async def _resync(self, client: Client) -> None:
        """Follow a change of the tool list; a refresh that fails keeps the tools listed
        before (the connection, and the calls on it, go on) until the next change."""
        try:
            await self._sync(client)
        except Exception as exc:
            cause = sole_cause(exc)
            logger.warning(
                "upstream %r: refreshing its tool list failed (%s: %s); keeping the tools "
                "it listed before",
                self.params.name,
                type(cause).__name__,
                cause,
            )

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._refresh.set()
        await anyio.lowlevel.checkpoint()

    async def _sync(self, client: Client) -> None:
        """List every page of tools and bring the catalog in line with it."""
        listed: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(_PAGE_CAP):
            page = await client.list_tools(cursor=cursor)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        include = self.params.include
        specs = {
            s.name: s
            for s in (spec_from_mcp(t, self.params) for t in listed)
            if include is None or s.metadata["mcp"]["name"] in include
        }
        offered = {t.name for t in listed}
        named = {*(include or ()), *self.params.tools}
        if named - offered and named - offered != self._unknown_names:
            # A misspelled name in `include` or `[upstreams.X.tools.NAME]` matches nothing:
            # said once (per change), not left for a person to wonder why a tool is missing.
            logger.warning(
                "upstream %r offers no tool named %s (it offers: %s)",
                self.params.name,
                ", ".join(repr(n) for n in sorted(named - offered)),
                ", ".join(sorted(offered)) or "none",
            )
        self._unknown_names = named - offered
        self._offered = specs
        await self._apply()

    async def _apply(self) -> None:
        """Bring the catalog in line with the tools offered, each as its pin shows it (a
        changed definition held: the pinned one, or none)."""
        async with self._applying:
            specs = dict(self._offered)
            others = self._other_tools() if self._pins is not None else ()
            for name, spec in list(specs.items()):
                current = self._catalog.get(name)
                if (
                    current is not None
                    and current.connector is not self
                    and name not in self._names
                ):
                    # Another source's tool (a local one, say, with its own permissions) is
                    # never replaced behind its owner's back.
                    logger.warning(
                        "upstream %r: tool %r is already provided by %s; this one is left out",
                        self.params.name,
                        name,
                        current.spec.source or "another source",
                    )
                    del specs[name]
                    continue
                if self._pins is not None:
                    hide = self.params.pins == "hide"
                    shown = await self._pins.admit(
                        spec, mode="hide" if hide else "keep", other_tools=others
                    )
                    if shown is None:
                        del specs[name]
                    else:
                        specs[name] = shown
            for name in self._names - specs.keys():
                self._catalog.remove(name)
            for name, spec in specs.items():
                current = self._catalog.get(name)
                if current is None or current.spec != spec or current.connector is not self:
                    self._catalog.add(Tool(spec=spec, connector=self))
            self._names = set(specs)

    def _other_tools(self) -> set[str]:
        """The names other sources' tools go by (namespaced, and without the namespace)."""
        names: set[str] = set()
        for tool in self._catalog:
            if tool.spec.source != self.params.name:
                names.update((tool.spec.name, tool.spec.name.rpartition(".")[2]))
        return names

    async def _follow_pins(self, pins: Pins) -> None:
        """Show a decision on a pin (made here, or in another process on the same ledger,
        seen within `pins.poll_interval`) until the connection ends."""
        seen: dict[str, int] | None = None
        while True:
            changed = pins.changed
            with anyio.move_on_after(pins.poll_interval):
                await changed.wait()
            try:
                now = await pins.revisions(self.params.name)
                if now != seen:
                    await self._apply()
                    seen = now
            except Exception as exc:
                logger.warning(
                    "upstream %r: reading its pinned tool definitions failed (%s: %s)",
                    self.params.name,
                    type(exc).__name__,
                    exc,
                )

    @property
    def tool_names(self) -> Sequence[str]:
        """The namespaced names of the tools this upstream provides now."""
        return sorted(self._names)


def _lists_changes(client: Client) -> bool:
    tools = client.server_capabilities.tools
    return bool(tools and tools.list_changed)
