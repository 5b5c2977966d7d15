"""`Agent`: the model loop on the keeper — select, export, ask, parse, execute, format, repeat.

```python
agent = Agent(keeper, "openai:gpt-4.1-mini", instructions="You are a research assistant.")
result = await agent.run("Write a report on X and publish it", principal=alice)
if result.status == "awaiting_approval":       # a person decides, in any process...
    result = await agent.resume(result.run_id)  # ...and the run goes on where it stopped
```
Every call the model proposes acts for the run's principal and runs through
`keeper.execute_many`: the loop adds no route around the executor. A run is stored in the ledger
when it pauses and when it ends (`LedgerStore.save_run`); a resume claims it with a
compare-and-set, so two resumes never both go on, and calls already run replay from the ledger.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import Any

import anyio
import msgspec

from .._sync import no_running_loop
from ..core.errors import ConfigurationError, ErrorCode, ModelError, ToolError
from ..core.retry import RetryPolicy
from ..core.states import CallStatus
from ..core.values import Principal, ToolCall, ToolResult, ToolSpec
from ..dialects import ToolChoice, get_dialect
from ..executor.records import replay
from ..keeper import Keeper
from ..ledger.base import RunRecord
from ..retrieval.meta import META_TOOL_NAMES
from .model import Model, ModelRequest, ModelResponse, OnText, Usage
from .models import resolve_model
from .run import CallOutcome, RunResult, RunState, RunStatus, Verdicts, approvals_of
from .sizing import READ_RESULT, add_read_result, max_result_chars, sized
from .streaming import RunStream, streamed

__all__ = ["MODEL_RETRY", "Agent"]

MODEL_RETRY = RetryPolicy(initial_interval=1.0, max_interval=30.0, max_attempts=4)
"""How a model request that failed with a retryable error (rate limit, overload, timeout, a
lost connection) is tried again: up to four attempts, waiting the `retry-after` the API gave,
else 1 s, 2 s, 4 s."""

_PROTOCOL_ERRORS = frozenset(
    {
        ErrorCode.UNKNOWN_TOOL,
        ErrorCode.INVALID_ARGUMENTS,
        ErrorCode.CALL_ID_CONFLICT,
        ErrorCode.INVALID_CALL_ID,
        ErrorCode.PAYLOAD_TOO_LARGE,
    }
)
"""Refusals that say the model broke the protocol (not the policy, not the tool)."""

_SEARCH = "search_tools"
"""Progressive discovery's search: a call to it asks for a capability the turn lacks."""

Verify = Callable[[RunResult], "bool | str | Awaitable[bool | str]"]


class Agent:
    """A model, a keeper and the loop between them.

    Args:
        keeper: Whose tools the model may use, and which runs, checks and records its calls.
        model: A model adapter (`toolkeeper.agent.OpenAIChatModel`, ...), or a string that
            builds one with the vendor client's own defaults: `openai:NAME`,
            `openai-responses:NAME`, `anthropic:NAME`, `gemini:NAME`.
        select_k: None offers the model every tool the principal may see; a number offers the
            `k` tools `keeper.select` ranks best for the conversation, selected again when the
            model asks for a capability its turn lacks.
        max_steps: Model turns at most.
        instructions: The system prompt.
        verify: The independent completion check: given the result of a completed run,
            True when the task is done, False or a reason when it is not (may be async).
        tool_choice: The turn's tool_choice and parallel-call switch, mapped per vendor.
        retry: How failed model requests are retried.
        result_share: The share of the model's context one result may fill; a longer one is
            shown as a head, its size and a reference `read_result` reads on from.
        discovery: Offer only progressive discovery's `search_tools`, `get_tool_details` and
            `call_tool` (enabled on the keeper if it is not; needs the `[retrieval]` extra):
            the model finds its tools, and `call_tool`'s inner call passes every gate.
        sleep: Waits between model retries (tests pass a fake one).

    Raises:
        ConfigurationError: an unknown model string, `max_steps` or `select_k` below 1, or
            the keeper has another tool named `read_result`.
        ImportError: the model's SDK is not installed (the message names the extra).
    """

    def __init__(
        self,
        keeper: Keeper,
        model: Model | str,
        *,
        select_k: int | None = None,
        max_steps: int = 20,
        instructions: str | None = None,
        verify: Verify | None = None,
        tool_choice: ToolChoice | None = None,
        retry: RetryPolicy = MODEL_RETRY,
        result_share: float = 0.05,
        discovery: bool = False,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        if max_steps < 1 or (select_k is not None and select_k < 1):
            raise ConfigurationError("Agent: max_steps and select_k must be at least 1")
        if not 0 < result_share <= 1:
            raise ConfigurationError("Agent: result_share must be within (0, 1]")
        self.keeper = keeper
        self.model: Model = resolve_model(model) if isinstance(model, str) else model
        self.dialect = get_dialect(self.model.dialect)
        self.select_k = select_k
        self.max_steps = max_steps
        self.instructions = instructions
        self.verify = verify
        self.tool_choice = tool_choice
        self.retry = retry
        self.max_result_chars = max_result_chars(self.model.context_window, result_share)
        self._sleep = sleep
        self.discovery = discovery
        if discovery and not all(name in keeper.catalog for name in META_TOOL_NAMES):
            keeper.enable_discovery()
        add_read_result(keeper, max_length=self.max_result_chars)

    # -- entry points ----------------------------------------------------------------------

    async def run(
        self,
        message: str,
        *,
        principal: Principal,
        task_id: str | None = None,
        on_text: OnText | None = None,
        history: Sequence[Mapping[str, Any]] = (),
    ) -> RunResult:
        """Run the loop on a user's message until an answer, `max_steps`, a failure or a pause.

        Args:
            message: The user's message.
            principal: Who every call of the run acts for (never anyone more).
            task_id: The run's id (its calls' task in the ledger); a new one by default.
            on_text: Receives the model's text as it streams in.
            history: The conversation before it, in the model's format (a chat's earlier
                `RunResult.messages`).

        Raises:
            ConfigurationError: a run of that id is stored already (resume it instead).
        """
        if not isinstance(principal, Principal):
            raise ConfigurationError("Agent.run(principal=...) needs a Principal")
        state = RunState(
            run_id=task_id or f"run-{uuid.uuid4().hex}",
            principal=principal,
            query=message,
            messages=[*(dict(m) for m in history), *self.model.user_message(message)],
        )
        await self.keeper.open()
        if task_id is not None and await self.keeper.store.get_run(task_id) is not None:
            raise ConfigurationError(f"run {task_id} exists: resume it (agent.resume)")
        return await self._drive(state, {}, on_text)

    async def resume(
        self, run_id: str, *, principal: Principal | None = None, on_text: OnText | None = None
    ) -> RunResult:
        """Go on with a stored run: the paused turn's calls are proposed again (an approved
        call runs, once; a denied one goes back to the model as its refusal; calls that ran
        replay from the ledger), then the loop continues. A run that ended returns as it
        ended, running nothing.

        Args:
            run_id: The run's id (`RunResult.run_id`).
            principal: When given, must be the one the run acts for.
            on_text: Receives the model's text as it streams in.

        Raises:
            KeyError: no run of that id is stored.
            StaleRun: another process resumed it at the same time (it goes on there).
            ConfigurationError: `principal` is not the run's.
        """
        await self.keeper.open()
        record = await self.keeper.store.get_run(run_id)
        if record is None:
            raise KeyError(run_id)
        state = RunState.loads(run_id, record.state, record.version)
        if principal is not None and principal.id != state.principal.id:
            raise ConfigurationError(f"run {run_id} acts for another principal")
        status = RunStatus(record.status)
        if status not in (RunStatus.AWAITING_APPROVAL, RunStatus.RUNNING):
            return await self._result(state, status, await self._recorded(state), ())
        claimed = await self.keeper.store.save_run(
            RunRecord(run_id=run_id, status=RunStatus.RUNNING, state=record.state),
            expected_version=record.version,
        )
        state.version = claimed.version
        return await self._drive(state, {}, on_text)

    def run_stream(
        self,
        message: str,
        *,
        principal: Principal,
        task_id: str | None = None,
        history: Sequence[Mapping[str, Any]] = (),
    ) -> AbstractAsyncContextManager[RunStream]:
        """`run`, its text as an async iterator: `async with agent.run_stream(...) as s:
        async for text in s: ...`, then `s.result`. Leaving the block waits for the run."""

        def go(on_text: OnText) -> Awaitable[RunResult]:
            return self.run(
                message, principal=principal, task_id=task_id, on_text=on_text, history=history
            )

        return streamed(go)

    def run_sync(
        self, message: str, *, principal: Principal, task_id: str | None = None
    ) -> RunResult:
        """`run` for scripts without an event loop (on the keeper's own blocking loop; close
        it with `keeper.close_sync()`)."""
        no_running_loop("run_sync", "await agent.run(message, principal=...)")

        async def go() -> RunResult:
            return await self.run(message, principal=principal, task_id=task_id)

        result: RunResult = self.keeper._sync.portal().call(go)
        return result

    # -- the loop --------------------------------------------------------------------------

    async def _drive(
        self, state: RunState, results: dict[str, ToolResult], on_text: OnText | None
    ) -> RunResult:
        while True:
            if state.pending:
                specs = self._specs(state.turn_tools)
                paused = await self._run_calls(state, state.pending, specs, results)
                if paused is not None:
                    return paused
            if state.steps >= self.max_steps:
                return await self._end(state, RunStatus.MAX_STEPS, results)
            specs = self._turn_tools(state)
            try:
                response = await self._ask(state, specs, on_text)
            except ModelError as exc:
                state.error = f"{exc.error.code}: {exc.error.message}"
                return await self._end(state, RunStatus.FAILED, results)
            state.steps += 1
            state.messages.extend(dict(m) for m in response.messages)
            calls = [
                msgspec.structs.replace(call, principal=state.principal, task_id=state.run_id)
                for call in self.dialect.parse(response.raw, tools=specs, turn=response.turn)
            ]
            if not calls:
                state.output = response.text
                return await self._end(state, RunStatus.COMPLETED, results)
            state.calls.extend(calls)
            state.pending = calls
            state.turn_tools = [spec.name for spec in specs]

    async def _run_calls(
        self,
        state: RunState,
        calls: Sequence[ToolCall],
        specs: Sequence[ToolSpec],
        results: dict[str, ToolResult],
    ) -> RunResult | None:
        """Run a turn's calls; the pause, or the end of a run out of budget, or None."""
        done = await self.keeper.execute_many(calls)
        results.update((r.call_id, r) for r in done)
        waiting = approvals_of(done)
        if waiting:
            await self._save(state, RunStatus.AWAITING_APPROVAL)
            return await self._result(state, RunStatus.AWAITING_APPROVAL, results, waiting)
        formatted = []
        offered = {spec.name for spec in specs}
        for call, result in zip(calls, done, strict=True):
            self._note_wanted(state, call, result, offered)
            if result.error is not None and result.attempt == 0:
                state.refusals[call.call_id] = result.error.to_dict()
            if call.name == READ_RESULT:  # (its pieces are sized by its own `length`)
                shown, cut = result, True
            else:
                shown, cut = sized(result, self.max_result_chars)
                state.refs = state.refs or cut
            limit = None if cut else self.max_result_chars  # (a head is sized already)
            formatted.append(self.dialect.format_result(shown, tools=specs, max_chars=limit))
        state.messages.extend(self.model.result_messages(formatted))
        state.pending = []
        state.turn_tools = []
        spent = next((r for r in done if _code(r) is ErrorCode.BUDGET_EXCEEDED), None)
        if spent is not None and spent.error is not None:
            state.error = f"{spent.error.code}: {spent.error.message}"
            return await self._end(state, RunStatus.FAILED, results)
        return None

    async def _ask(
        self, state: RunState, specs: Sequence[ToolSpec], on_text: OnText | None
    ) -> ModelResponse:
        """The model's next turn, its retryable failures retried by `retry`."""
        choice: dict[str, Any] = {}
        if self.tool_choice is not None:
            choice = self.dialect.export_tool_choice(self.tool_choice, tools=specs).value
        request = ModelRequest(
            messages=tuple(state.messages),
            tools=self.dialect.export_tools(specs).value,
            tool_choice=choice,
            instructions=self.instructions,
            on_text=on_text,
        )
        attempt = 1
        while True:
            try:
                response = await self.model.request(request)
            except ModelError as exc:
                state.usage += Usage(requests=1)
                if not self.retry.should_retry(exc.error, attempt):
                    raise
                await self._sleep(exc.error.retry_after or self.retry.delay(attempt))
                attempt += 1
                continue
            state.usage += replace(response.usage, requests=1)
            return response

    # -- tools of a turn ---------------------------------------------------------------------

    def _turn_tools(self, state: RunState) -> list[ToolSpec]:
        """All the principal may see, or the best `select_k` for the conversation and what
        the model asked for; `read_result` once a result was cut."""
        visible = [s for s in self.keeper.visible_tools(state.principal) if s.name != READ_RESULT]
        if self.discovery:
            visible = [s for s in visible if s.name in META_TOOL_NAMES]
        elif self.select_k is not None:
            query = " ".join([state.query, *state.wanted[-3:]])
            chosen = list(
                self.keeper.select(query, principal=state.principal, k=self.select_k).specs
            )
            named = {s.name for s in chosen}
            chosen += [s for s in visible if s.name in state.wanted and s.name not in named]
            visible = [s for s in chosen if s.name != READ_RESULT]
        if state.refs:
            visible += self._specs([READ_RESULT])
        return visible

    def _specs(self, names: Sequence[str]) -> list[ToolSpec]:
        tools = (self.keeper.catalog.get(name) for name in names)
        return [tool.spec for tool in tools if tool is not None]

    @staticmethod
    def _note_wanted(
        state: RunState, call: ToolCall, result: ToolResult, offered: set[str]
    ) -> None:
        """Remember a capability the turn lacked (a tool not offered, known or not, or a
        discovery search): the next selection looks for it."""
        if call.name not in offered or _code(result) is ErrorCode.UNKNOWN_TOOL:
            if call.name not in state.wanted:
                state.wanted.append(call.name)
        elif call.name == _SEARCH and isinstance(call.arguments, dict):
            query = call.arguments.get("query")
            if isinstance(query, str):
                state.wanted.append(query)

    # -- ends --------------------------------------------------------------------------------

    async def _save(self, state: RunState, status: RunStatus) -> None:
        record = RunRecord(run_id=state.run_id, status=status, state=state.dumps())
        stored = await self.keeper.store.save_run(record, expected_version=state.version)
        state.version = stored.version

    async def _end(
        self, state: RunState, status: RunStatus, results: dict[str, ToolResult]
    ) -> RunResult:
        await self._save(state, status)
        if any(c.call_id not in results for c in state.calls):
            results = await self._recorded(state, results)
        return await self._result(state, status, results, ())

    async def _recorded(
        self, state: RunState, results: dict[str, ToolResult] | None = None
    ) -> dict[str, ToolResult]:
        """The results of the run's calls this process did not run, read from the ledger (a
        refusal that left no record, from the run's state): nothing is proposed again."""
        results = dict(results or {})
        for call in state.calls:
            if call.call_id in results:
                continue
            record = await self.keeper.store.get_call(state.run_id, call.call_id)
            if record is not None:
                results[call.call_id] = replay(record)
            elif call.call_id in state.refusals:
                error = ToolError.from_dict(state.refusals[call.call_id])
                results[call.call_id] = ToolResult(
                    call_id=call.call_id, tool=call.name, status=CallStatus.REJECTED, error=error
                )
        return results

    async def _result(
        self,
        state: RunState,
        status: RunStatus,
        results: dict[str, ToolResult],
        waiting: tuple[str, ...],
    ) -> RunResult:
        outcomes = tuple(
            CallOutcome(call=c, result=results[c.call_id])
            for c in state.calls
            if c.call_id in results
        )
        protocol = status is RunStatus.COMPLETED and not any(
            _code(o.result) in _PROTOCOL_ERRORS for o in outcomes
        )
        ran = [o.result for o in outcomes if o.result.attempt > 0]
        result = RunResult(
            run_id=state.run_id,
            status=status,
            output=state.output if status is RunStatus.COMPLETED else None,
            messages=tuple(state.messages),
            calls=outcomes,
            usage=state.usage,
            verdicts=Verdicts(protocol=protocol, tools=all(r.ok for r in ran), task=None),
            approvals=waiting,
            error=state.error,
        )
        if self.verify is None or status is not RunStatus.COMPLETED:
            return result
        said = self.verify(result)
        if inspect.isawaitable(said):
            said = await said
        note = said if isinstance(said, str) else None
        verdicts = replace(result.verdicts, task=said is True, task_note=note)
        return replace(result, verdicts=verdicts)


def _code(result: ToolResult) -> ErrorCode | None:
    return result.error.code if result.error is not None else None
