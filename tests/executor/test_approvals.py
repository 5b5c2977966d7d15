"""Approvals are bound to the exact validated arguments, and survive restarts."""

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import msgspec
import pytest

from toolkeeper import (
    Budgets,
    CallContext,
    CallStatus,
    ErrorCode,
    Keeper,
    Principal,
    ToolCall,
    ToolResult,
    allow,
)
from toolkeeper.ledger.base import ApprovalStatus, CallRecord, LedgerStore
from toolkeeper.ledger.sqlite import SQLiteStore
from toolkeeper.policy.approvals import Approvals
from toolkeeper.policy.budgets import MemoryRateLimiter
from toolkeeper.testing import FakeClock

from ..conftest import APP

pytestmark = pytest.mark.anyio


def _publisher(keeper: Keeper, published: list[str]) -> None:
    @keeper.tool(effect="destructive")
    async def publish(text: str, channel: str = "blog") -> str:
        published.append(f"{channel}:{text}")
        return "published"


async def test_destructive_call_waits_for_approval_then_runs_once(keeper: Keeper) -> None:
    published: list[str] = []
    _publisher(keeper, published)
    call = ToolCall(call_id="p1", name="publish", arguments={"text": "hello"})
    waiting = await keeper.execute(call)
    assert waiting.status is CallStatus.AWAITING_APPROVAL
    assert waiting.error is not None and waiting.error.code is ErrorCode.APPROVAL_REQUIRED
    assert waiting.error.retryable
    assert published == []
    again = await keeper.execute(call)
    assert again.approval_id == waiting.approval_id and published == []

    [pending] = await keeper.approvals.pending()
    assert pending.id == waiting.approval_id
    assert pending.arguments == {"text": "hello", "channel": "blog"}
    await keeper.approvals.approve(pending.id, by="alice", note="fine")

    ran = await keeper.execute(call)
    assert ran.ok and ran.approval_id == pending.id
    replayed = await keeper.execute(call)
    assert replayed.replayed and replayed.data == "published"
    assert published == ["blog:hello"]


async def test_an_approval_never_runs_different_arguments(keeper: Keeper) -> None:
    published: list[str] = []
    _publisher(keeper, published)
    first = await keeper.execute(ToolCall(call_id="p1", name="publish", arguments={"text": "A"}))
    assert first.approval_id is not None
    await keeper.approvals.approve(first.approval_id, by="alice")

    same_id = await keeper.execute(ToolCall(call_id="p1", name="publish", arguments={"text": "B"}))
    assert same_id.error is not None and same_id.error.code is ErrorCode.CALL_ID_CONFLICT
    new_id = await keeper.execute(ToolCall(call_id="p2", name="publish", arguments={"text": "B"}))
    assert new_id.status is CallStatus.AWAITING_APPROVAL
    assert new_id.approval_id != first.approval_id
    assert published == []


async def test_defaults_are_part_of_what_is_approved(keeper: Keeper) -> None:
    published: list[str] = []
    _publisher(keeper, published)
    explicit = await keeper.execute(
        ToolCall(call_id="p1", name="publish", arguments={"text": "A", "channel": "blog"})
    )
    implicit = await keeper.execute(ToolCall(call_id="p2", name="publish", arguments={"text": "A"}))
    assert explicit.approval_id and implicit.approval_id
    a = await keeper.approvals.get(explicit.approval_id)
    b = await keeper.approvals.get(implicit.approval_id)
    assert a is not None and b is not None and a.digest == b.digest


async def test_denied_approval_ends_the_call_with_the_reason(keeper: Keeper) -> None:
    published: list[str] = []
    _publisher(keeper, published)
    call = ToolCall(call_id="p1", name="publish", arguments={"text": "A"})
    waiting = await keeper.execute(call)
    assert waiting.approval_id is not None
    await keeper.approvals.deny(waiting.approval_id, by="alice", reason="not on Fridays")
    result = await keeper.execute(call)
    assert result.error is not None and result.error.code is ErrorCode.APPROVAL_DENIED
    assert "not on Fridays" in result.error.message
    assert published == []


async def test_expired_approval_does_not_run(keeper: Keeper, clock: FakeClock) -> None:
    published: list[str] = []
    _publisher(keeper, published)
    call = ToolCall(call_id="p1", name="publish", arguments={"text": "A"})
    waiting = await keeper.execute(call)
    assert waiting.approval_id is not None
    await keeper.approvals.approve(waiting.approval_id, by="alice")
    clock.advance(25 * 3600)
    result = await keeper.execute(call)
    assert result.error is not None and result.error.code is ErrorCode.APPROVAL_EXPIRED
    assert published == []
    # Proposed again, as the refusal says, it asks anew: the model is told it may retry.
    assert result.error.retryable and "propose the call again" in result.error.message
    again = await keeper.execute(call)
    assert again.error is not None and again.error.code is ErrorCode.APPROVAL_REQUIRED
    assert again.approval_id not in (None, waiting.approval_id)


async def test_approving_an_expired_request_is_refused(keeper: Keeper, clock: FakeClock) -> None:
    _publisher(keeper, [])
    waiting = await keeper.execute(ToolCall(call_id="p1", name="publish", arguments={"text": "A"}))
    assert waiting.approval_id is not None
    clock.advance(25 * 3600)
    with pytest.raises(ValueError, match="expired"):
        await keeper.approvals.approve(waiting.approval_id, by="alice")
    record = await keeper.approvals.get(waiting.approval_id)
    assert record is not None and record.status is ApprovalStatus.EXPIRED


async def test_approval_is_bound_to_the_principal(keeper: Keeper) -> None:
    published: list[str] = []
    _publisher(keeper, published)
    alice = Principal(id="alice", grants=frozenset({"*"}))
    mallory = Principal(id="mallory", grants=frozenset({"*"}))
    waiting = await keeper.execute(
        ToolCall(call_id="p1", name="publish", arguments={"text": "A"}, principal=alice)
    )
    assert waiting.approval_id is not None
    await keeper.approvals.approve(waiting.approval_id, by="ops")
    stolen = await keeper.execute(
        ToolCall(call_id="p1", name="publish", arguments={"text": "A"}, principal=mallory)
    )
    # The call id is alice's: another principal's proposal of it is another call.
    assert stolen.error is not None and stolen.error.code is ErrorCode.CALL_ID_CONFLICT
    assert published == []
    ran = await keeper.execute(
        ToolCall(call_id="p1", name="publish", arguments={"text": "A"}, principal=alice)
    )
    assert ran.ok and published == ["blog:A"]


async def test_a_rule_can_waive_the_default_approval(keeper: Keeper) -> None:
    published: list[str] = []

    @keeper.tool(effect="destructive", rules=[lambda inp: allow(skip_approval=True)])
    async def purge_tmp() -> str:
        published.append("purged")
        return "ok"

    result = await keeper.execute(ToolCall(call_id="c1", name="purge_tmp"))
    assert result.ok and published == ["purged"]


async def test_approvals_survive_a_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    published: list[str] = []
    call = ToolCall(call_id="p1", name="publish", arguments={"text": "A"})
    first = Keeper(principal=APP, ledger=url)
    _publisher(first, published)
    async with first:
        waiting = await first.execute(call)
    assert waiting.approval_id is not None

    second = Keeper(principal=APP, ledger=url)
    _publisher(second, published)
    async with second:
        [pending] = await second.approvals.pending()
        assert pending.id == waiting.approval_id
        await second.approvals.approve(pending.id, by="alice")

    third = Keeper(principal=APP, ledger=url)
    _publisher(third, published)
    async with third:
        ran = await third.execute(call)
        again = await third.execute(call)
    assert ran.ok and again.replayed
    assert published == ["blog:A"]


async def test_a_tool_can_ask_for_approval_before_its_effect(keeper: Keeper) -> None:
    from toolkeeper import ApprovalRequired, CallContext

    sent: list[int] = []

    @keeper.tool(effect="write")
    async def wire(amount: int, ctx: CallContext) -> str:
        if amount > 100 and ctx.approval_id is None:
            raise ApprovalRequired(f"{amount} is above the daily limit")
        sent.append(amount)
        return "sent"

    call = ToolCall(call_id="w1", name="wire", arguments={"amount": 500})
    waiting = await keeper.execute(call)
    assert waiting.status is CallStatus.AWAITING_APPROVAL
    assert waiting.approval_id is not None and sent == []
    [pending] = await keeper.approvals.pending()
    assert pending.reason == "500 is above the daily limit"
    await keeper.approvals.approve(pending.id, by="alice")
    ran = await keeper.execute(call)
    assert ran.ok and sent == [500]
    record = await keeper.store.get_call("default", "w1")
    assert record is not None
    assert [s for s, _ in record.history] == [
        CallStatus.RUNNING,
        CallStatus.AWAITING_APPROVAL,
        CallStatus.RUNNING,
        CallStatus.SUCCEEDED,
    ]


async def test_a_denial_stands_for_the_call_it_was_given_for(keeper: Keeper) -> None:
    """Proposed again, a denied call is denied again, not put before a person once more (a
    model retrying could flood approvers until one approves by mistake); a new call id asks
    anew."""
    published: list[str] = []
    _publisher(keeper, published)
    call = ToolCall(call_id="p1", name="publish", arguments={"text": "A"})
    first = await keeper.execute(call)
    assert first.approval_id is not None
    await keeper.approvals.deny(first.approval_id, by="ops", reason="not today")
    denied = await keeper.execute(call)
    again = await keeper.execute(call)
    for result in (denied, again):
        assert result.error is not None and result.error.code is ErrorCode.APPROVAL_DENIED
        assert "not today" in result.error.message
    assert await keeper.approvals.pending() == []
    fresh = await keeper.execute(msgspec.structs.replace(call, call_id="p2"))
    assert fresh.status is CallStatus.AWAITING_APPROVAL and fresh.approval_id != first.approval_id
    assert published == []


async def test_an_approved_call_refused_by_its_rate_limit_keeps_its_approval(
    clock: FakeClock,
) -> None:
    """RATE_LIMITED says "retry later": retried, the approved call asked a person again."""
    keeper = Keeper(
        principal=APP,
        ledger="memory://",
        clock=clock,
        budgets=Budgets(calls_per_minute=60, burst=1),
        rate_limiter=MemoryRateLimiter(clock=clock),
    )
    published: list[str] = []
    _publisher(keeper, published)

    @keeper.tool(effect="read_only")
    async def ping() -> str:
        return "pong"

    call = ToolCall(call_id="p1", name="publish", arguments={"text": "A"})
    async with keeper:
        first = await keeper.execute(call)
        assert first.approval_id is not None
        await keeper.approvals.approve(first.approval_id, by="ops")
        await keeper.execute(ToolCall(call_id="other", name="ping"))  # takes the one token
        limited = await keeper.execute(call)
        clock.advance(2)
        retried = await keeper.execute(call)
    assert limited.error is not None and limited.error.code is ErrorCode.RATE_LIMITED
    assert retried.ok and retried.approval_id == first.approval_id
    assert published == ["blog:A"]


async def test_a_request_for_a_tool_version_that_changed_is_withdrawn(keeper: Keeper) -> None:
    """The old request stayed pending (it could still be approved, for nothing) and the call
    was refused once as PERMISSION_DENIED before it was evaluated afresh."""
    published: list[str] = []
    _publisher(keeper, published)
    call = ToolCall(call_id="p1", name="publish", arguments={"text": "A"})
    first = await keeper.execute(call)
    assert first.approval_id is not None

    @keeper.tool(name="publish", effect="read_only", version="2")
    async def publish_v2(text: str) -> str:
        published.append(f"v2:{text}")
        return text

    result = await keeper.execute(call)
    old = await keeper.approvals.get(first.approval_id)
    assert result.ok and published == ["v2:A"]
    assert await keeper.approvals.pending() == []
    assert old is not None and old.status is ApprovalStatus.WITHDRAWN  # not a person's denial
    assert old.note == "the tool changed before the request was decided"


async def test_a_call_waiting_when_its_tool_changes_asks_anew_for_the_new_version(
    keeper: Keeper,
) -> None:
    """A wait cannot follow a wait: every later proposal failed with INTERNAL_ERROR."""
    published: list[str] = []
    _publisher(keeper, published)
    call = ToolCall(call_id="p1", name="publish", arguments={"text": "A"})
    first = await keeper.execute(call)
    assert first.approval_id is not None

    @keeper.tool(name="publish", effect="destructive", version="2")
    async def publish_v2(text: str) -> str:
        published.append(f"v2:{text}")
        return text

    again = await keeper.execute(call)
    assert again.status is CallStatus.AWAITING_APPROVAL
    assert again.approval_id is not None and again.approval_id != first.approval_id
    old = await keeper.approvals.get(first.approval_id)
    assert old is not None and old.status is ApprovalStatus.WITHDRAWN
    assert [r.id for r in await keeper.approvals.pending()] == [again.approval_id]
    await keeper.approvals.approve(again.approval_id, by="ops")
    ran = await keeper.execute(call)
    assert ran.ok and ran.approval_id == again.approval_id and published == ["v2:A"]


async def test_an_effect_given_as_text_is_the_effect_it_names(keeper: Keeper) -> None:
    from toolkeeper import ToolSpec
    from toolkeeper.catalog.registry import Tool
    from toolkeeper.connectors.python import FunctionConnector
    from toolkeeper.core.values import Effect

    wiped: list[str] = []

    async def wipe(path: str) -> str:
        wiped.append(path)
        return path

    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    spec = ToolSpec(name="wipe", effect="destructive", input_schema=schema)  # type: ignore[arg-type]
    assert spec.effect is Effect.DESTRUCTIVE
    with pytest.raises(ValueError, match="dangerous"):
        ToolSpec(name="x", effect="dangerous")  # type: ignore[arg-type]
    keeper.catalog.add(Tool(spec=spec, connector=FunctionConnector(wipe)))
    result = await keeper.execute(ToolCall(call_id="w1", name="wipe", arguments={"path": "/"}))
    assert result.status is CallStatus.AWAITING_APPROVAL and wiped == []


async def test_a_proposal_waiting_on_a_call_that_asks_for_approval_is_told_so(
    tmp_path: Path,
) -> None:
    """Two keepers share a ledger; the one running the call's tool is asked for approval. The
    other one, waiting for it to end, was handed the AWAITING_APPROVAL record as a replay with
    no error: a model read a `null` success."""
    from toolkeeper.core.signals import ApprovalRequired

    db = f"sqlite:///{tmp_path / 'l.db'}"
    started = anyio.Event()
    go_on = anyio.Event()

    def build() -> Keeper:
        keeper = Keeper(principal=APP, ledger=db)

        @keeper.tool(effect="write", permissions=[])
        async def wire(amount: int, ctx: CallContext) -> str:
            if ctx.approval_id is None:
                started.set()
                await go_on.wait()
                raise ApprovalRequired("a large transfer")
            return "sent"

        return keeper

    call = ToolCall(call_id="w1", name="wire", arguments={"amount": 9000})
    results: list[object] = []
    async with build() as first, build() as second:

        async def propose(keeper: Keeper) -> None:
            results.append(await keeper.execute(call))

        async with anyio.create_task_group() as tg:
            tg.start_soon(propose, first)
            await started.wait()
            tg.start_soon(propose, second)
            await anyio.wait_all_tasks_blocked()
            go_on.set()
        pending = await first.approvals.pending()
    assert len(pending) == 1
    for result in results:
        assert isinstance(result, ToolResult) and result.error is not None
        assert result.error.code is ErrorCode.APPROVAL_REQUIRED
        assert result.approval_id == pending[0].id


async def test_a_call_cancelled_while_its_request_is_recorded_leaves_no_orphan(
    keeper: Keeper,
) -> None:
    """The request was committed, the call's record not: proposed again it made a second
    request, and approving the first (listed first) ran nothing."""
    published: list[str] = []
    _publisher(keeper, published)
    store = keeper.store
    claim = store.claim_call
    writing = anyio.Event()
    answer = anyio.Event()

    async def slow_claim(record: Any) -> Any:  # a loaded database: the write waits its turn
        if record.status is CallStatus.AWAITING_APPROVAL and not answer.is_set():
            writing.set()
            await answer.wait()
        return await claim(record)

    store.claim_call = slow_claim  # type: ignore[method-assign]
    call = ToolCall(call_id="p1", name="publish", arguments={"text": "A"})
    async with anyio.create_task_group() as tg:
        tg.start_soon(keeper.execute, call)
        await writing.wait()
        tg.cancel_scope.cancel()
        answer.set()
    again = await keeper.execute(call)
    pending = await keeper.approvals.pending()
    assert [p.id for p in pending] == [again.approval_id]
    await keeper.approvals.approve(pending[0].id, by="ops")
    ran = await keeper.execute(call)
    assert ran.ok and published == ["blog:A"]


async def test_a_request_whose_call_the_ledger_failed_to_record_is_withdrawn(
    keeper: Keeper,
) -> None:
    """The request was stored, the call's record not (the database failed): the request
    stayed pending for ever, listed before the one the call made when proposed again, and
    approving it ran nothing."""
    from toolkeeper.core.errors import StoreError

    published: list[str] = []
    _publisher(keeper, published)
    store = keeper.store
    claim = store.claim_call
    failures = [StoreError("the ledger's database cannot be reached")]

    async def failing_claim(record: Any) -> Any:
        if record.status is CallStatus.AWAITING_APPROVAL and failures:
            raise failures.pop()
        return await claim(record)

    store.claim_call = failing_claim  # type: ignore[method-assign]
    call = ToolCall(call_id="p1", name="publish", arguments={"text": "A"})
    failed = await keeper.execute(call)
    assert failed.error is not None and failed.error.code is ErrorCode.INTERNAL_ERROR
    assert failed.error.retryable
    assert await keeper.approvals.pending() == []
    [withdrawn] = await store.list_approvals()
    assert withdrawn.status is ApprovalStatus.WITHDRAWN
    again = await keeper.execute(call)
    assert again.approval_id is not None
    assert [p.id for p in await keeper.approvals.pending()] == [again.approval_id]
    await keeper.approvals.approve(again.approval_id, by="ops")
    ran = await keeper.execute(call)
    assert ran.ok and published == ["blog:A"]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def one_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], LedgerStore]:
    """Stores of one ledger, each with connections of its own, as two processes have."""
    if request.param == "sqlite":
        return lambda: SQLiteStore(tmp_path / "ledger.db")
    from toolkeeper.ledger.postgres import PostgresStore

    from ..conftest import postgres_url

    schema = request.getfixturevalue("pg_schema")
    return lambda: PostgresStore(postgres_url(), schema=schema)


def _replica(store: LedgerStore, version: str, wiped: list[str], **options: Any) -> Keeper:
    """A gateway replica serving `wipe` at `version` (a rolling deploy runs two)."""
    keeper = Keeper(principal=APP, ledger=store, **options)

    @keeper.tool(effect="destructive", version=version)
    async def wipe(disk: str) -> str:
        wiped.append(f"v{version}:{disk}")
        return disk

    return keeper


async def test_a_call_approved_for_the_version_another_replica_serves_asks_anew(
    one_ledger: Callable[[], LedgerStore],
) -> None:
    """A person approved the request replica 1 (wipe v1) made; the model's retry reached
    replica 2 (wipe v2): the approval cannot run v2, and every proposal failed INTERNAL_ERROR
    (the record was moved from AWAITING_APPROVAL to AWAITING_APPROVAL, which is refused)."""
    wiped: list[str] = []
    old, new = _replica(one_ledger(), "1", wiped), _replica(one_ledger(), "2", wiped)
    call = ToolCall(call_id="w1", name="wipe", arguments={"disk": "d1"})
    async with old, new:
        asked = await old.execute(call)
        assert asked.approval_id is not None
        await old.approvals.approve(asked.approval_id, by="ops")
        again = await new.execute(call)
        assert again.status is CallStatus.AWAITING_APPROVAL
        assert again.approval_id not in (None, asked.approval_id)
        assert [r.id for r in await new.approvals.pending()] == [again.approval_id]
        await new.approvals.approve(again.approval_id, by="ops")
        ran = await new.execute(call)
    assert ran.ok and ran.approval_id == again.approval_id and wiped == ["v2:d1"]


class _ReadsThen(SQLiteStore):
    """A store that lets another process act right after it read a call's record."""

    then: Callable[[], Awaitable[object]] | None = None

    async def get_call(self, task_id: str, call_id: str) -> CallRecord | None:
        record = await super().get_call(task_id, call_id)
        then, self.then = self.then, None
        if then is not None:
            await then()
        return record


async def test_a_proposal_that_read_the_wait_another_replica_replaced_leaves_one_request(
    tmp_path: Path,
) -> None:
    """Replica 1 read the call waiting for request A; replica 2 (another tool version)
    withdrew A and made the call wait for B; replica 1, finding A withdrawn, failed with
    INTERNAL_ERROR. Now it ends the wait for B (withdrawing B) and asks for its own."""
    wiped: list[str] = []
    first = _ReadsThen(tmp_path / "ledger.db")
    old, new = (
        _replica(first, "1", wiped),
        _replica(SQLiteStore(tmp_path / "ledger.db"), "2", wiped),
    )
    call = ToolCall(call_id="w1", name="wipe", arguments={"disk": "d1"})
    replaced: list[ToolResult] = []

    async def replace_wait() -> None:
        replaced.append(await new.execute(call))

    async with old, new:
        asked = await old.execute(call)
        first.then = replace_wait
        result = await old.execute(call)
        pending = await old.approvals.pending()
        requests = {r.id: r.status for r in await first.list_approvals()}
    assert replaced[0].status is CallStatus.AWAITING_APPROVAL
    assert result.status is CallStatus.AWAITING_APPROVAL
    assert [r.id for r in pending] == [result.approval_id]
    assert requests == {
        asked.approval_id: ApprovalStatus.WITHDRAWN,
        replaced[0].approval_id: ApprovalStatus.WITHDRAWN,
        result.approval_id: ApprovalStatus.PENDING,
    }
    assert wiped == []


async def test_a_decision_landing_after_a_call_found_its_request_expired_is_refused(
    one_ledger: Callable[[], LedgerStore],
) -> None:
    """A person approved just as the request expired (the CLI read its clock in time, the
    write landed late); the gateway had refused the call as expired meanwhile, yet the person
    was told 'approved' and the ledger held it approved before its expiry."""
    clock = FakeClock()
    wiped: list[str] = []
    gateway = _replica(one_ledger(), "1", wiped, clock=clock, approval_ttl=60)
    call = ToolCall(call_id="w1", name="wipe", arguments={"disk": "d1"})
    cli_store = one_ledger()
    async with gateway:
        asked = await gateway.execute(call)
        assert asked.approval_id is not None
        clock.advance(61)
        refused = await gateway.execute(call)
        await cli_store.open()
        try:
            person = Approvals(lambda: cli_store, clock=lambda: clock.now - 2)
            with pytest.raises(ValueError, match="expired"):
                await person.approve(asked.approval_id, by="ops")
            request = await cli_store.get_approval(asked.approval_id)
        finally:
            await cli_store.aclose()
    assert refused.error is not None and refused.error.code is ErrorCode.APPROVAL_EXPIRED
    assert request is not None and request.status is ApprovalStatus.EXPIRED
    assert wiped == []


_APPROVED = '{"count": 41778229342798590}'
_NEAR = ['{"count": 41778229342798592}', '{"count": 4.177822934279859e16}']
_NEAR += ['{"count": 41778229342798590.0}', '{"count": 4177822934279859e1}']


@pytest.mark.parametrize("path", ["execute", "execute_many", "call_tool"])
async def test_an_approval_for_a_big_count_never_runs_a_count_next_to_it(
    tmp_path: Path, path: str
) -> None:
    """ECMAScript writes the double 41778229342798592 as 41778229342798590: the approved
    int's text. Neither it nor the next int runs under that approval, by its call id or
    another."""
    keeper = Keeper(principal=APP, ledger=f"sqlite:///{tmp_path / 'l.db'}")
    paid: list[int] = []

    @keeper.tool(effect="destructive")
    async def pay(count: int) -> str:
        paid.append(count)
        return "paid"

    keeper.enable_discovery()

    async def propose(call_id: str, arguments: str) -> ToolResult:
        call = ToolCall(call_id=call_id, name="pay", arguments=arguments)
        if path == "call_tool":
            inner = f'{{"name": "pay", "arguments": {arguments}}}'
            call = ToolCall(call_id=call_id, name="call_tool", arguments=inner)
        if path == "execute_many":
            [result] = await keeper.execute_many([call])
            return result
        return await keeper.execute(call)

    async with keeper:
        asked = await propose("p1", _APPROVED)
        assert asked.approval_id is not None
        await keeper.approvals.approve(asked.approval_id, by="alice")
        for i, other in enumerate(_NEAR):
            same_id = await propose("p1", other)
            assert same_id.error is not None
            assert same_id.error.code in (ErrorCode.CALL_ID_CONFLICT, ErrorCode.APPROVAL_REQUIRED)
            assert same_id.approval_id != asked.approval_id
            new_id = await propose(f"q{i}", other)
            assert new_id.status is CallStatus.AWAITING_APPROVAL
            assert new_id.approval_id != asked.approval_id
        assert paid == []
        ran = await propose("p1", _APPROVED)
    assert ran.ok and paid == [41778229342798590]
