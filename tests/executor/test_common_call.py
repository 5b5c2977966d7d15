"""The common call, a read-only one with nothing for a rule, an approval or a budget to say:
it ends exactly as a call that a rule looks at, or whose tool suspends, and every way its tool
can end (a value, a `ToolOutput`, a raise, something not JSON) runs the tool once per attempt."""

from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from pydantic import BaseModel, field_validator

from toolkeeper import CallContext, CallStatus, ErrorCode, Keeper, ToolCall, ToolOutput
from toolkeeper.policy.rules import Decision
from toolkeeper.testing import FakeClock, MemoryAuditSink, MemoryStore

from ..conftest import APP

pytestmark = pytest.mark.anyio


def _no_say(_: Any) -> Decision | None:
    """A keeper-wide rule with nothing to say."""
    return None


def _keeper(*, gated: bool, suspends: bool = False) -> tuple[Keeper, MemoryStore, MemoryAuditSink]:
    store, audit = MemoryStore(digest_key=b"k" * 32), MemoryAuditSink()  # (digests compared)
    keeper = Keeper(
        principal=APP,
        ledger=store,
        audit=audit,
        clock=FakeClock(),
        rules=[_no_say] if gated else (),
    )

    @keeper.tool(effect="read_only")
    async def lookup(city: str, days: int = 1) -> dict[str, Any]:
        """Look a forecast up.

        Args:
            city: The city.
            days: How many days.
        """
        if suspends:
            await anyio.lowlevel.checkpoint()
        return {"city": city, "days": days}

    return keeper, store, audit


def _timeless(value: Any, *names: str) -> dict[str, Any]:
    data = {name: getattr(value, name) for name in value.__struct_fields__}
    for name in names:
        data.pop(name)
    return data


@pytest.mark.parametrize(
    "arguments",
    ['{"city": "Oslo"}', '{"days": 3, "city": "Oslo"}', {"city": "Oslo", "days": 2}],
    ids=["default", "given", "data"],
)
async def test_a_call_ends_the_same_whether_a_rule_looks_at_it_or_its_tool_suspends(
    arguments: Any,
) -> None:
    ends = []
    for gated, suspends in ((False, False), (True, False), (False, True)):
        keeper, store, audit = _keeper(gated=gated, suspends=suspends)
        async with keeper:
            call = ToolCall(call_id="c1", name="lookup", arguments=arguments)
            result = await keeper.execute(call)
            replay = await keeper.execute(call)
        record = await store.get_call("default", "c1")
        assert record is not None and result.status is CallStatus.SUCCEEDED and replay.replayed
        ends.append(
            (
                _timeless(result),
                _timeless(replay),
                _timeless(record),
                [_timeless(e) for e in audit.events],
            )
        )
    assert ends[0] == ends[1] == ends[2]


async def test_a_tool_that_suspends_is_timed_and_recorded_as_any_other() -> None:
    keeper = Keeper(principal=APP, ledger=MemoryStore(), audit=None)
    runs: list[float] = []

    @keeper.tool(effect="read_only", timeout=0.05)
    async def slow(seconds: float) -> str:
        """Wait."""
        runs.append(seconds)
        await anyio.sleep(seconds)
        return "done"

    async with keeper:
        quick = await keeper.execute(ToolCall(call_id="a", name="slow", arguments='{"seconds": 0}'))
        late = await keeper.execute(ToolCall(call_id="b", name="slow", arguments='{"seconds": 5}'))
    assert quick.status is CallStatus.SUCCEEDED and quick.data == "done"
    assert late.status is CallStatus.TIMED_OUT
    assert late.error is not None and late.error.code is ErrorCode.TIMEOUT
    # (a read-only call is retried after a timeout; each attempt ran once)
    assert runs == [0, *[5] * late.attempt]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (lambda: ToolOutput(data={"n": 1}, effect_ref="ref-1"), {"n": 1}),
        (lambda: object(), "ran and finished"),
    ],
    ids=["tool-output", "not-json"],
)
async def test_a_result_that_is_not_plain_json_is_recorded_and_the_tool_runs_once(
    answer: Callable[[], Any], expected: Any
) -> None:
    keeper = Keeper(principal=APP, ledger=MemoryStore(), audit=None)
    runs: list[int] = []

    @keeper.tool(effect="read_only")
    async def fetch() -> Any:
        """Fetch."""
        runs.append(1)
        return answer()

    async with keeper:
        result = await keeper.execute(ToolCall(call_id="c", name="fetch", arguments="{}"))
    assert result.status is CallStatus.SUCCEEDED
    assert result.data == expected or expected in str(result.data)
    assert runs == [1]


async def test_a_first_step_that_raises_is_a_tool_error_and_is_retried_as_a_read() -> None:
    keeper = Keeper(principal=APP, ledger=MemoryStore(), audit=None, sleep=FakeClock().sleep)
    runs: list[int] = []

    @keeper.tool(effect="read_only")
    async def flaky() -> str:
        """Fail once."""
        runs.append(1)
        if len(runs) == 1:
            raise TimeoutError("the service did not answer")
        return "ok"

    async with keeper:
        result = await keeper.execute(ToolCall(call_id="c", name="flaky", arguments="{}"))
    assert result.status is CallStatus.SUCCEEDED and result.data == "ok"
    assert result.attempt == 2 and runs == [1, 1]


async def test_a_conflict_is_answered_the_same_whether_a_rule_looks_at_the_call_or_not() -> None:
    ends = []
    for gated in (False, True):
        keeper, _, _ = _keeper(gated=gated)
        async with keeper:
            await keeper.execute(ToolCall(call_id="c1", name="lookup", arguments='{"city": "A"}'))
            other = ToolCall(call_id="c1", name="lookup", arguments='{"city": "B"}')
            ends.append(_timeless(await keeper.execute(other)))
    assert ends[0]["error"].code is ErrorCode.CALL_ID_CONFLICT
    assert ends[0] == ends[1]


async def test_the_record_event_context_and_result_hold_each_field_in_its_place() -> None:
    store, audit, clock = MemoryStore(), MemoryAuditSink(), FakeClock()
    keeper = Keeper(principal=APP, ledger=store, audit=audit, clock=clock)
    seen: list[CallContext] = []

    @keeper.tool(effect="read_only", version="7")
    async def whoami(ctx: CallContext, n: int) -> int:
        """Tell."""
        seen.append(ctx)
        return n

    async with keeper:
        result = await keeper.execute(ToolCall(call_id="c9", name="whoami", arguments='{"n": 4}'))
    (ctx,) = seen
    assert (ctx.call_id, ctx.task_id, ctx.tool, ctx.version, ctx.attempt) == (
        "c9",
        "default",
        "whoami",
        "7",
        1,
    )
    assert ctx.principal.id == "local" and ctx.arguments == {"n": 4} and ctx.approval_id is None
    assert ctx.idempotency_key.startswith("tk_") and ctx.deadline > 0
    record = await store.get_call("default", "c9")
    assert record is not None
    assert (record.tool, record.version, record.status, record.effect, record.idempotent) == (
        "whoami",
        "7",
        CallStatus.SUCCEEDED,
        "read_only",
        False,
    )
    assert (record.arguments, record.result, record.attempt, record.error) == ({"n": 4}, 4, 1, None)
    assert record.idempotency_key == ctx.idempotency_key and len(record.digest) == 64
    assert (record.principal_id, record.tenant) == ("local", "default")
    assert record.created_at == record.updated_at == clock()
    assert record.history == ((CallStatus.SUCCEEDED, clock()),) and ":" in record.owner
    (event,) = audit.events
    assert (event.call_id, event.tool, event.version, event.status, event.previous) == (
        "c9",
        "whoami",
        "7",
        CallStatus.SUCCEEDED,
        None,
    )
    assert (event.attempt, event.arguments, event.error_code, event.at) == (
        1,
        {"n": 4},
        None,
        clock(),
    )
    assert (result.tool, result.version, result.source, result.attempt, result.data) == (
        "whoami",
        "7",
        "python",
        1,
        4,
    )
    assert result.error is None and result.effect_ref is None and not result.replayed


async def test_a_result_spent_by_its_first_reading_is_noted_as_not_json_not_shown_empty() -> None:
    ends = []
    for suspends in (False, True):
        keeper = Keeper(principal=APP, ledger=MemoryStore(), audit=None)

        @keeper.tool(effect="read_only")
        async def fetch(suspends: bool = suspends) -> Any:
            """Fetch."""
            if suspends:
                await anyio.lowlevel.checkpoint()
            return (item for item in [1, object()])  # (read once, and not JSON)

        async with keeper:
            result = await keeper.execute(ToolCall(call_id="c", name="fetch", arguments="{}"))
        ends.append(_timeless(result, "started_at", "finished_at"))
    assert ends[0]["status"] is CallStatus.SUCCEEDED and "ran and finished" in ends[0]["data"]
    assert ends[0] == ends[1]


async def test_an_interrupt_while_the_call_is_checked_leaves_its_id_free_for_the_next() -> None:
    interrupted: list[int] = []

    class Point(BaseModel):
        x: int

        @field_validator("x")
        @classmethod
        def _once(cls, value: int) -> int:
            if not interrupted:
                interrupted.append(value)
                raise KeyboardInterrupt
            return value

    keeper = Keeper(principal=APP, ledger=MemoryStore(), audit=None)

    @keeper.tool(effect="read_only")
    async def where(point: Point) -> int:
        """Say where."""
        return point.x

    call = ToolCall(call_id="c", name="where", arguments='{"point": {"x": 3}}')
    async with keeper:
        with pytest.raises(KeyboardInterrupt):
            await keeper.execute(call)
        with anyio.fail_after(5):  # (proposed again, it ran: it did not wait for the first)
            result = await keeper.execute(call)
    assert result.status is CallStatus.SUCCEEDED and result.data == 3
