"""`Keeper`: the facade a user holds — tools, the ledger, policy and the executor together.

```python
keeper = Keeper(ledger="sqlite:///./toolkeeper.db")

@keeper.tool(effect="read_only")
async def get_order(order_id: str) -> dict: ...

async with keeper:
    result = await keeper.execute(ToolCall(call_id="c1", name="get_order",
                                           arguments='{"order_id": "42"}', principal=agent))
```
A call acts for the principal it names, else for `Keeper(principal=...)`; with neither it is
refused.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio

from ._in_flight import InFlight
from ._lifecycle import KeeperState, Lifecycle
from ._setup import check_options, default_audit, default_limiter, open_store
from ._sync import SyncPortal, no_running_loop
from ._toolbox import Toolbox
from .catalog.registry import Tool
from .connectors.python import DEFAULT_TOOL_THREADS
from .core.errors import ConfigurationError
from .core.retry import RetryPolicy
from .core.values import Principal, ToolCall, ToolResult
from .executor.executor import Executor
from .executor.records import replay
from .executor.runtime import (
    DEFAULT_MAX_ARGUMENT_BYTES,
    Runtime,
    event_loop_clock,
    event_loop_deadlines,
    idempotency_key,
)
from .ledger.base import CallRecord, LedgerStore
from .ledger.keys import digest_key
from .ledger.reconcile import Reconciliation
from .observe.audit import AuditSink
from .observe.telemetry import Telemetry
from .policy.approvals import Approvals
from .policy.budgets import Budgets, RateLimiter

if TYPE_CHECKING:
    from .retrieval import FusionConfig, QueryAdapter
    from .retrieval.discovery import Unwrapper

__all__ = ["DEFAULT_LEDGER", "DEFAULT_TOOL_THREADS", "Keeper", "KeeperState", "default_audit"]

DEFAULT_LEDGER = "sqlite:///./toolkeeper.db"


class Keeper(Toolbox):
    """Tools, policy, ledger and executor for one application.

    Args:
        ledger: A `LedgerStore`, or a URL: `sqlite:///path.db` (default `./toolkeeper.db`),
            `postgresql://...`, or `memory://`; or the path of a SQLite file (a `Path`).
        principal: Who a `ToolCall` that names nobody (as `dialect.parse` returns it) acts
            for, and whose tools `visible_tools()` and `select()` show when given none. By
            default there is none: such a call is refused (`PERMISSION_DENIED`, not
            recorded) and runs nothing, so a model's call never acts with grants nobody
            gave it. An application acting for itself says so:
            `Keeper(principal=Principal(id="app", grants=frozenset({"*"})))`.
        audit: Where audit events go; defaults to a JSON lines file beside a SQLite ledger
            (`toolkeeper.audit.jsonl`), else an in-memory sink (`keeper.audit.events`).
        retry: Retry policy for tools that declare none.
        rules: Business rules checked for every call, after the tool's own.
        budgets: Call budgets and rate limits.
        rate_limiter: Shared rate limiter (defaults to one in this process, on monotonic time,
            or on `clock` when one is passed), at the rate of `budgets.calls_per_minute`,
            which it needs.
        approval_ttl: Seconds an approval request stays valid, a positive number (None:
            forever).
        max_argument_bytes: Larger argument payloads are refused.
        clock: Wall clock (epoch seconds); tests pass a fake one.
        sleep: Waits between retries (defaults to `anyio.sleep`); tests pass a fake one.
        selection: How `select` ranks and when it abstains (`retrieval.FusionConfig`; the
            default is the one configuration measured on every benchmark).
        query_adapter: The map of `select`'s query vectors (`retrieval.QueryAdapter`): True
            the bundled one, False none, or one fitted on your own tools and requests
            (`toolkeeper eval fit-adapter`).
        tool_threads: How many sync tool functions may run at once, each in a worker thread
            of the keeper's own (`thread_limiter`), apart from the threads the rest of the
            application takes through `anyio.to_thread`. A call that finds none free by its
            timeout fails as UPSTREAM_UNAVAILABLE, retryable: its function never started.
        telemetry: Observes every call (`observe.Telemetry`): traces and metrics, e.g.
            `toolkeeper.observe.otel.OpenTelemetry()` (extra `toolkeeper[otel]`). None (the
            default): nothing is observed, at no cost (docs/observability.md).
    """

    def __init__(
        self,
        *,
        ledger: LedgerStore | str | os.PathLike[str] = DEFAULT_LEDGER,
        principal: Principal | None = None,
        audit: AuditSink | None = None,
        retry: RetryPolicy | None = None,
        rules: Sequence[Any] = (),
        budgets: Budgets | None = None,
        rate_limiter: RateLimiter | None = None,
        approval_ttl: float | None = 24 * 3600.0,
        max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        selection: FusionConfig | None = None,
        tool_threads: int = DEFAULT_TOOL_THREADS,
        query_adapter: QueryAdapter | bool = True,
        telemetry: Telemetry | None = None,
    ) -> None:
        check_options(
            ledger=ledger,
            principal=principal,
            audit=audit,
            retry=retry,
            budgets=budgets,
            rate_limiter=rate_limiter,
            max_argument_bytes=max_argument_bytes,
            tool_threads=tool_threads,
        )
        try:  # (first: nothing is made yet that a refusal would leave open)
            self.approvals = Approvals(
                lambda: self.store, ttl=approval_ttl, clock=clock, ready=self.open
            )
        except ValueError as exc:
            raise ConfigurationError(f"Keeper(approval_ttl=...): {exc}") from None
        super().__init__(
            principal=principal,
            tool_threads=tool_threads,
            selection=selection,
            query_adapter=query_adapter,
        )
        self.store: LedgerStore = open_store(ledger)
        self.audit: AuditSink = audit if audit is not None else default_audit(ledger, self.store)
        self._calls = InFlight()
        """The `execute`s and batches in flight, which `aclose` waits for."""
        self._life = Lifecycle(self._calls)
        self.runtime = Runtime(
            catalog=self.catalog,
            store=lambda: self.store,
            approvals=self.approvals,
            audit=self.audit,
            principal=principal,
            retry=retry or RetryPolicy(),
            rules=tuple(rules),
            budgets=budgets,
            limiter=rate_limiter or (default_limiter(clock) if budgets else None),
            max_argument_bytes=max_argument_bytes,
            clock=clock,
            sleep=sleep,
            telemetry=telemetry,
        )
        self.executor = Executor(self.runtime)
        self._outcomes = Reconciliation(
            store=self.store,
            catalog=self.catalog,
            limiter=self.thread_limiter,
            key=idempotency_key,
            emit=self.runtime.emit,
            clock=clock,
        )
        self._unwrapper: Unwrapper | None = None
        """Reads `call_tool` proposals as the calls they stand for, once discovery is on."""
        self._sync = SyncPortal(self.aclose)

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def state(self) -> KeeperState:
        """Where the keeper is in its lifecycle."""
        return self._life.state

    def _is_closed(self) -> bool:
        return self._life.is_closed

    async def open(self) -> None:
        """Open the ledger and mark calls abandoned by dead processes. Idempotent, and safe
        to call from concurrent tasks (the first opens, the others wait for it)."""
        await self._life.open(self._open)

    async def _open(self) -> None:
        await self.store.open()
        self.runtime.digest_key = digest_key(self.store)
        self.runtime.cancel_scope = type(anyio.CancelScope())
        self.runtime.loop_clock = event_loop_clock()
        self.runtime.deadlines = event_loop_deadlines()
        await self._recover()

    async def _open_and_recover(self) -> None:
        """Open (which recovers), or, open already, recover the calls of processes that died
        since: once either way."""
        if self._life.is_open:
            await self._recover()
        else:
            await self.open()

    async def _recover(self) -> None:
        """Mark the calls of dead processes UNKNOWN_OUTCOME, and those of this process whose
        end the ledger failed to record (see `recover_abandoned`)."""
        await self._outcomes.recover(self.runtime.unended)

    def drain(self) -> None:
        """Stop retrying: calls in flight end after their current attempt, and calls waiting
        to retry end now (what a server does when it is asked to stop, so that it stops
        within one attempt's timeout). New calls still run, once each. Call it on the
        keeper's event loop."""
        self.runtime.draining = True
        for waiting in list(self.runtime.waits):
            waiting.cancel()

    async def aclose(self) -> None:
        """Close the ledger, the audit sink and the selector, if one was made. Idempotent.

        New calls are refused from then on (`ConfigurationError`); calls in flight end first,
        after their current attempt (as `drain` ends them), and are recorded as they ended.
        An `aclose` made while another is closing the keeper returns when that one has.
        """
        await self._life.close(self._close, busy=self.drain)

    async def _close(self) -> None:
        # Each is closed even when one before it fails: the audit sink's buffered events are
        # not lost to a ledger that failed to close.
        try:
            if self._selector is not None:
                self._selector.close()
        finally:
            try:
                await self.store.aclose()
            finally:
                self.audit.close()

    async def __aenter__(self) -> Keeper:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- discovery (needs the `[retrieval]` extra) -----------------------------------------

    def enable_discovery(self) -> list[Tool]:
        """Add `search_tools`, `get_tool_details` and `call_tool` (progressive discovery);
        `call_tool` runs through `execute`, so every gate applies to the inner call.

        Raises:
            ConfigurationError: a tool of the catalog already has one of those names.
        """
        from .retrieval.discovery import add_discovery

        _ = self.selector  # (the index is built now, not by the first search on the event loop)
        # Looked up at each call: `close_sync` closes the keeper's index, and a new one follows.
        tools, self._unwrapper = add_discovery(
            self.catalog,
            lambda: self.selector,
            self.execute,
            principal=self._principal,
            max_argument_bytes=self.runtime.max_argument_bytes,
        )
        return tools

    # -- calls -----------------------------------------------------------------------------

    async def execute(self, call: ToolCall) -> ToolResult:
        """Check, run and record one proposed call, for the principal it names (else the
        keeper's default one; with neither, it is refused). Never raises for bad input."""
        calls = self._calls
        calls.enter()  # (counted while it opens the keeper too: `aclose` waits)
        try:
            if self._life.state is not KeeperState.OPEN:
                await self.open()
            unwrapper = self._unwrapper
            if unwrapper is None:
                return await self.executor.execute(call)
            inner = unwrapper.unwrap(call)
            return unwrapper.as_called(call, inner, await self.executor.execute(inner))
        finally:
            calls.exit()

    async def execute_many(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        """Run several calls concurrently (writes to a same resource one at a time)."""
        self._calls.enter()
        try:
            if self._life.state is not KeeperState.OPEN:
                await self.open()
            unwrapper = self._unwrapper
            if unwrapper is None:
                return await self.executor.execute_many(calls)
            inner = [unwrapper.unwrap(c) for c in calls]
            results = await self.executor.execute_many(inner)
            answer = unwrapper.as_called
            return [answer(c, i, r) for c, i, r in zip(calls, inner, results, strict=True)]
        finally:
            self._calls.exit()

    def execute_sync(self, call: ToolCall) -> ToolResult:
        """`execute` for scripts without an event loop. Call `close_sync()` when done.

        Raises:
            RuntimeError: called from a thread that runs an event loop, which it would block
                (there, `await keeper.execute(call)`).
        """
        no_running_loop("execute_sync", "await keeper.execute(call)")
        return self._sync.portal().call(self.execute, call)

    def close_sync(self) -> None:
        """Close what `execute_sync` opened, and the search index `select` built. Idempotent.

        A keeper that no event loop opened (a script that only selected) keeps no ledger
        open: its search index, which follows the catalog and holds the vector cache open,
        is all there is to close (a later `select` builds a new one).
        """
        if not self._sync.started:
            selector = self._selector
            if selector is not None and self.state is KeeperState.NEW:
                self._selector = None
                selector.close()
            return
        no_running_loop("close_sync", "await keeper.aclose()")
        self._sync.close()

    # -- after the fact --------------------------------------------------------------------

    async def unknown(self) -> list[CallRecord]:
        """Calls whose outcome nobody knows yet: what a person or `reconcile()` must decide.

        Calls left RUNNING by a process that died since this keeper opened are found first
        (as `toolkeeper ledger unknown` does), not only those found when it opened.
        """
        await self._open_and_recover()
        return await self._outcomes.unknown()

    async def reconcile(self) -> list[ToolResult]:
        """Ask each UNKNOWN_OUTCOME call's tool what really happened, by idempotency key.

        A tool's `reconcile(ctx)` returns a `ToolResult` (SUCCEEDED or FAILED) or None (still
        unknown); a sync one runs in a worker thread, as a sync tool does. Calls are never
        executed again here. `ctx.arguments` are the arguments as the
        ledger holds them (sensitive values redacted); `ctx.idempotency_key` is what to look the
        outcome up by. What it finds is recorded as a tool's result is, made JSON (dates,
        decimals, models...). A reconciler that raises, outlives its tool's timeout or finds
        what is not JSON data leaves its call unknown (this is logged) and the others are
        still asked.

        Returns:
            The results of the calls that were settled.
        """
        return [replay(r) for r in await self._outcomes.reconcile(await self.unknown())]

    async def settle(
        self,
        task_id: str,
        call_id: str,
        *,
        succeeded: bool,
        by: str,
        note: str,
        result: Any = None,
        effect_ref: str | None = None,
    ) -> ToolResult:
        """Record what a person found out about an UNKNOWN_OUTCOME call (see
        `toolkeeper.ledger.recovery.settle`); the call replays it from then on.

        Raises:
            KeyError: no such call.
            ValueError: its outcome is not unknown, or `by`/`note` is blank.
        """
        await self._open_and_recover()
        updated = await self._outcomes.settle(
            task_id,
            call_id,
            succeeded=succeeded,
            by=by,
            note=note,
            result=result,
            effect_ref=effect_ref,
        )
        return replay(updated)
