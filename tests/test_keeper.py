"""The `Keeper` facade: its lifecycle around the calls it runs."""

import json
import math
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from toolkeeper import CallStatus, ErrorCode, Keeper, Principal, ToolCall, ToolResult
from toolkeeper.core.errors import ConfigurationError, StoreError
from toolkeeper.core.values import Effect, ToolSpec
from toolkeeper.ledger.sqlite import SQLiteStore
from toolkeeper.observe.audit import JsonlAuditSink

from .conftest import APP

pytestmark = pytest.mark.anyio


def _ship_on_release(keeper: Keeper) -> tuple[anyio.Event, anyio.Event]:
    """Add a write tool `ship(order_id)` that, once started, waits to be released."""
    started, release = anyio.Event(), anyio.Event()

    @keeper.tool(effect="write")
    async def ship(order_id: str) -> str:
        started.set()
        await release.wait()
        return f"shipped {order_id}"

    return started, release


async def test_closing_a_keeper_waits_for_its_calls_in_flight_to_be_recorded(
    tmp_path: Path,
) -> None:
    """Closed under them, the calls whose tools had run came back INTERNAL_ERROR and stayed
    RUNNING in the ledger."""
    db = f"sqlite:///{tmp_path / 'k.db'}"
    keeper = Keeper(principal=APP, ledger=db)
    started, release = _ship_on_release(keeper)
    results: list[object] = []

    async def ship_one() -> None:
        results.append(
            await keeper.execute(ToolCall(call_id="c1", name="ship", arguments={"order_id": "A"}))
        )

    with anyio.fail_after(5):
        await keeper.open()
        async with anyio.create_task_group() as tg:
            tg.start_soon(ship_one)
            await started.wait()
            tg.start_soon(keeper.aclose)
            await anyio.wait_all_tasks_blocked()
            with pytest.raises(ConfigurationError):  # closing: no new call starts
                await keeper.execute(ToolCall(call_id="c2", name="ship", arguments={}))
            release.set()
    [result] = results
    assert isinstance(result, ToolResult) and result.status is CallStatus.SUCCEEDED
    async with Keeper(principal=APP, ledger=db) as again:
        record = await again.store.get_call("default", "c1")
    assert record is not None and record.status is CallStatus.SUCCEEDED


async def test_a_second_close_returns_only_once_the_keeper_is_closed(tmp_path: Path) -> None:
    """It returned at once while the first still waited for a call in flight: code after it
    found the ledger open, and the call unrecorded."""
    keeper = Keeper(principal=APP, ledger=f"sqlite:///{tmp_path / 'k.db'}")
    started, release = _ship_on_release(keeper)
    closed: list[str] = []

    async def close(name: str) -> None:
        await keeper.aclose()
        closed.append(name)

    with anyio.fail_after(5):
        await keeper.open()
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                keeper.execute, ToolCall(call_id="c1", name="ship", arguments={"order_id": "A"})
            )
            await started.wait()
            tg.start_soon(close, "first")
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(close, "second")
            await anyio.wait_all_tasks_blocked()
            assert closed == []
            release.set()
    assert sorted(closed) == ["first", "second"]
    with pytest.raises(StoreError):  # closed, by then
        await keeper.store.get_call("default", "c1")


async def test_approvals_open_the_keeper_as_calls_do(tmp_path: Path) -> None:
    """An approvals dashboard made its own Keeper on the ledger and asked for the pending
    requests: `StoreError: the ledger store is new, not open`, where `execute` opens itself."""
    db = f"sqlite:///{tmp_path / 'a.db'}"
    agent = Keeper(principal=APP, ledger=db)

    @agent.tool(effect="destructive")
    async def wipe(disk: str) -> str:
        return f"wiped {disk}"

    call = ToolCall(call_id="c1", name="wipe", arguments={"disk": "d1"})
    async with agent:
        asked = await agent.execute(call)
    assert asked.status is CallStatus.AWAITING_APPROVAL

    dashboard = Keeper(principal=APP, ledger=db)
    [pending] = await dashboard.approvals.pending()
    assert await dashboard.approvals.get(pending.id) == pending
    await dashboard.approvals.approve(pending.id, by="alice")
    await dashboard.aclose()
    with pytest.raises(ConfigurationError):  # closed means closed: it is not opened again
        await dashboard.approvals.pending()

    async with Keeper(principal=APP, ledger=db) as again:
        again.add_function(wipe, effect="destructive")
        ran = await again.execute(call)
    assert ran.status is CallStatus.SUCCEEDED


async def test_a_call_opening_the_keeper_while_it_closes_is_refused() -> None:
    """`aclose` did not count a call still opening the keeper: it returned at once, then the
    call set the keeper OPEN again and ran on a closed keeper."""
    from toolkeeper.testing import MemoryStore

    class SlowToOpen(MemoryStore):
        def __init__(self) -> None:
            super().__init__()
            self.opening, self.go = anyio.Event(), anyio.Event()

        async def open(self) -> None:
            self.opening.set()
            await self.go.wait()
            await super().open()

    store = SlowToOpen()
    keeper = Keeper(principal=APP, ledger=store)
    ran: list[str] = []

    @keeper.tool(effect="read_only")
    async def look() -> str:
        ran.append("look")
        return "seen"

    outcome: list[object] = []

    async def call() -> None:
        try:
            outcome.append(await keeper.execute(ToolCall(call_id="c1", name="look", arguments={})))
        except ConfigurationError as exc:
            outcome.append(exc)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await store.opening.wait()
            tg.start_soon(keeper.aclose)
            await anyio.wait_all_tasks_blocked()
            store.go.set()
    assert ran == []
    assert len(outcome) == 1 and isinstance(outcome[0], ConfigurationError)
    assert keeper.state.value == "closed"


def test_a_misspelled_effect_names_the_effects_there_are() -> None:
    keeper = Keeper(principal=APP, ledger="memory://")
    expected = r"use one of read_only, write, destructive \(did you mean 'read_only'\?\)"
    with pytest.raises(ValueError, match=expected):
        keeper.tool(name="t", effect="readonly")(lambda: None)
    with pytest.raises(ValueError, match=expected):
        ToolSpec(name="t", effect="readonly")  # type: ignore[arg-type]
    assert Effect("write") is Effect.WRITE


@pytest.mark.parametrize("timeout", [0, -1.0, math.nan, math.inf])
def test_a_tool_without_a_finite_positive_timeout_is_refused(timeout: float) -> None:
    """A NaN timeout was taken, and a tool that hung then held its call for ever."""
    keeper = Keeper(principal=APP, ledger="memory://")

    def ping() -> str:
        return "pong"

    with pytest.raises(ConfigurationError):
        keeper.add_function(ping, effect="read_only", timeout=timeout)


@pytest.mark.parametrize("budgets", [None, {"max_calls_per_task": 10}])
def test_a_rate_limiter_without_a_rate_is_refused(budgets: dict[str, int] | None) -> None:
    """`Keeper(rate_limiter=...)`, as docs/library.md shows it, with no `calls_per_minute`: the
    limiter was never asked, and every call ran unlimited without a word."""
    from toolkeeper import Budgets
    from toolkeeper.policy.budgets import MemoryRateLimiter

    with pytest.raises(ConfigurationError, match="calls_per_minute"):
        Keeper(
            principal=APP,
            ledger="memory://",
            budgets=None if budgets is None else Budgets(**budgets),
            rate_limiter=MemoryRateLimiter(),
        )


@pytest.mark.parametrize("ledger", ["memory://", "sqlite"])
async def test_what_a_reconciler_finds_is_recorded_as_json_and_junk_leaves_only_its_call_unknown(
    ledger: str, tmp_path: Path
) -> None:
    """A reconciler's data went to the ledger as it was: a date was kept as a date in memory
    and as its str in SQLite, and data no ledger can hold made reconcile() raise NotJSON with
    every call after it left unasked."""
    import datetime

    from toolkeeper.core.signals import OutcomeUnknown
    from toolkeeper.core.values import CallContext

    def answer(data: object) -> Callable[[CallContext], ToolResult]:
        def reconcile(ctx: CallContext) -> ToolResult:
            return ToolResult(
                call_id=ctx.call_id, tool=ctx.tool, status=CallStatus.SUCCEEDED, data=data
            )

        return reconcile

    url = f"sqlite:///{tmp_path / 'r.db'}" if ledger == "sqlite" else ledger
    keeper = Keeper(principal=APP, ledger=url)
    answers = {"a_junk": object(), "b_date": {"on": datetime.date(2024, 5, 1)}, "c_nan": math.nan}
    for name, data in answers.items():

        async def lost(name: str = name) -> str:
            raise OutcomeUnknown(f"{name}: the connection dropped after sending")

        keeper.add_function(lost, name=name, effect="write", permissions=[], reconcile=answer(data))
    async with keeper:
        for name in answers:
            result = await keeper.execute(ToolCall(call_id=name, name=name, arguments={}))
            assert result.status is CallStatus.UNKNOWN_OUTCOME
        settled = await keeper.reconcile()
        assert [(r.call_id, r.data) for r in settled] == [
            ("b_date", {"on": "2024-05-01"}),
            ("c_nan", None),
        ]
        [still] = await keeper.unknown()
        assert still.call_id == "a_junk"
        replayed = await keeper.execute(ToolCall(call_id="b_date", name="b_date", arguments={}))
        assert replayed.replayed and replayed.data == {"on": "2024-05-01"}


async def test_a_blocking_reconciler_runs_in_a_thread_cut_short_at_its_timeout() -> None:
    """A sync reconciler (a status lookup over a blocking client) ran on the event loop: it
    stalled every other task, the tool's timeout never applied, and one that hung held
    reconcile() for as long as it did."""
    import threading

    from toolkeeper.core.signals import OutcomeUnknown
    from toolkeeper.core.values import CallContext

    release, returned = threading.Event(), threading.Event()

    def hangs(ctx: CallContext) -> None:
        release.wait(timeout=30)
        returned.set()

    def answers(ctx: CallContext) -> ToolResult:
        return ToolResult(call_id=ctx.call_id, tool=ctx.tool, status=CallStatus.SUCCEEDED, data=1)

    keeper = Keeper(principal=APP, ledger="memory://")
    for name, reconcile in (("a_hangs", hangs), ("b_answers", answers)):

        async def lost(name: str = name) -> str:
            raise OutcomeUnknown(f"{name}: the connection dropped after sending")

        keeper.add_function(
            lost, name=name, effect="write", permissions=[], reconcile=reconcile, timeout=0.2
        )
    try:
        async with keeper:
            for name in ("a_hangs", "b_answers"):
                await keeper.execute(ToolCall(call_id=name, name=name, arguments={}))
            settled = await keeper.reconcile()
            assert not returned.is_set()  # reconcile() went on without it
            assert [r.call_id for r in settled] == ["b_answers"]
            assert [r.call_id for r in await keeper.unknown()] == ["a_hangs"]
    finally:
        release.set()


async def test_a_ledger_given_as_a_path_is_that_sqlite_file(tmp_path: Path) -> None:
    """`Keeper(ledger=Path(...))` was taken for a store object: opening it called
    `Path.open()`, which raised FileNotFoundError (or, the file there, returned a file object
    that the keeper then awaited)."""
    db = tmp_path / "ledger.db"
    keeper = Keeper(principal=APP, ledger=db)
    keeper.add_function(lambda text: text, name="echo", effect="read_only")
    async with keeper:
        result = await keeper.execute(ToolCall(call_id="c1", name="echo", arguments={"text": "a"}))
    assert result.status is CallStatus.SUCCEEDED
    async with Keeper(principal=APP, ledger=f"sqlite:///{db}") as again:
        record = await again.store.get_call("default", "c1")
    assert record is not None and record.status is CallStatus.SUCCEEDED
    assert (tmp_path / "ledger.audit.jsonl").exists()


@pytest.mark.parametrize(
    "option",
    [
        {"principal": "alice"},
        {"audit": "audit.jsonl"},
        {"budgets": {"max_calls_per_task": 3}},
        {"retry": {"max_attempts": 3}},
        {"ledger": None},
        {"max_argument_bytes": 0},
        {"max_argument_bytes": -1},
        {"approval_ttl": -60.0},
        {"approval_ttl": math.nan},
        {"tool_threads": 2.5},
        {"tool_threads": "4"},
    ],
)
def test_an_option_of_the_wrong_type_or_value_is_refused_when_the_keeper_is_made(
    option: dict[str, object],
) -> None:
    """They were taken: a principal given as its id or budgets as a dict failed every call as
    an INTERNAL_ERROR, an audit file path failed it with an AttributeError, a retry policy as
    a dict was ignored, a max_argument_bytes under 1 refused every call as PAYLOAD_TOO_LARGE
    and a negative approval_ttl made each approval expired as it was asked for."""
    options: dict[str, object] = {"ledger": "memory://", **option}
    with pytest.raises(ConfigurationError):
        Keeper(**options)  # type: ignore[arg-type]


class _FailingClose(SQLiteStore):
    """A SQLite ledger whose close fails (a disk gone at the end, say)."""

    async def aclose(self) -> None:
        await super().aclose()
        raise StoreError("the disk went away")


async def test_a_ledger_that_fails_to_close_loses_no_audit_event(tmp_path: Path) -> None:
    # The audit sink was closed after the ledger, in the same block: a ledger that failed to
    # close left its buffered events unwritten.
    audit = tmp_path / "audit.jsonl"
    keeper = Keeper(
        principal=APP,
        ledger=_FailingClose(tmp_path / "l.db"),
        audit=JsonlAuditSink(audit, flush_every=1000),
    )

    @keeper.tool(effect="read_only")
    async def ping() -> str:
        """Answer."""
        return "pong"

    with pytest.raises(StoreError):
        async with keeper:
            assert (await keeper.execute(ToolCall(call_id="c1", name="ping", arguments={}))).ok
    assert '"call_id":"c1"' in audit.read_text(encoding="utf-8").replace(" ", "")


def test_a_script_that_never_closes_its_keeper_loses_no_record_and_no_audit_event(
    tmp_path: Path,
) -> None:
    # A read-only call's record waits for the ledger's next group commit, and its audit line
    # sits in the file's buffer: the end of the process must write both out.
    ledger = tmp_path / "ledger.db"
    script = (
        "import sys, asyncio\n"
        "from toolkeeper import Keeper, Principal, ToolCall\n"
        "async def add(a: int, b: int) -> int:\n"
        "    return a + b\n"
        "async def main():\n"
        "    app = Principal(id='app', grants=frozenset({'*'}))\n"
        "    keeper = Keeper(ledger=sys.argv[1], principal=app)\n"
        "    keeper.add_function(add, effect='read_only')\n"
        "    result = await keeper.execute(ToolCall(call_id='c1', name='add',\n"
        "                                           arguments={'a': 1, 'b': 2}))\n"
        "    print(result.status, result.data)\n"
        "asyncio.run(main())\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", script, f"sqlite:///{ledger}"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert child.stdout.decode().split() == ["SUCCEEDED", "3"], child.stderr.decode()
    with sqlite3.connect(ledger) as db:
        rows = db.execute("SELECT call_id, status FROM calls").fetchall()
    assert rows == [("c1", "SUCCEEDED")]
    audit = tmp_path / "ledger.audit.jsonl"
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(e["call_id"], e["status"]) for e in events] == [("c1", "SUCCEEDED")]


def test_a_lambda_is_a_tool_only_under_a_name_given_to_it() -> None:
    """Both registered as "<lambda>", the second replaced the first without a word."""
    keeper = Keeper(principal=APP, ledger="memory://")
    with pytest.raises(ConfigurationError, match="lambda has no name"):
        keeper.add_function(lambda order_id: order_id)
    keeper.add_function(lambda order_id: order_id, name="echo", effect="read_only")
    assert [t.spec.name for t in keeper.catalog] == ["echo"]


def test_a_lambda_given_an_empty_name_is_refused_as_one_given_none() -> None:
    """An empty name falls back to the function's own, as None does: "<lambda>" again."""
    keeper = Keeper(principal=APP, ledger="memory://")
    with pytest.raises(ConfigurationError, match="lambda has no name"):
        keeper.add_function(lambda order_id: order_id, name="")
    with pytest.raises(ConfigurationError, match="lambda has no name"):
        keeper.tool(name="", effect="read_only")(lambda order_id: order_id)
    assert list(keeper.catalog) == []


ANTHROPIC_RESPONSE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "toolu_1", "name": "wipe", "input": {}}],
}
"""A model's answer proposing a destructive call."""


@pytest.mark.parametrize("path", ["execute", "execute_many", "call_tool"])
async def test_a_parsed_call_on_a_keeper_with_no_default_principal_runs_nothing(
    path: str,
) -> None:
    """`dialect.parse` names no principal, and such a call acted for the keeper's own, which
    held every grant: the natural first code ran anything the model proposed."""
    from toolkeeper.dialects import get_dialect

    keeper = Keeper(ledger="memory://")
    ran: list[str] = []

    @keeper.tool(effect="write")
    async def wipe() -> str:
        ran.append("wipe")
        return "wiped"

    @keeper.tool(effect="read_only")
    async def ping() -> str:
        ran.append("ping")
        return "pong"

    [call] = get_dialect("anthropic").parse(ANTHROPIC_RESPONSE)
    assert call.principal is None
    calls = [call, ToolCall(call_id="p1", name="ping")]
    if path == "call_tool":
        keeper.enable_discovery()
        calls = [
            ToolCall(call_id=c.call_id, name="call_tool", arguments={"name": c.name}) for c in calls
        ]
    async with keeper:
        if path == "execute_many":
            results = await keeper.execute_many(calls)
        else:
            results = [await keeper.execute(c) for c in calls]
        listed = await keeper.store.list_calls()
    for result in results:
        assert result.status is CallStatus.REJECTED
        assert result.error is not None and result.error.code is ErrorCode.PERMISSION_DENIED
    assert ran == [] and listed == []
    with pytest.raises(ConfigurationError):
        keeper.visible_tools()


async def test_a_call_naming_no_principal_acts_for_the_default_principal_it_was_given() -> None:
    reader = Principal(id="reader", grants=frozenset({"orders:read"}))
    keeper = Keeper(ledger="memory://", principal=reader)

    @keeper.tool(effect="write", permissions=["orders:write"])
    async def refund() -> str:
        raise AssertionError("must not run")

    @keeper.tool(effect="read_only", permissions=["orders:read"])
    async def lookup() -> str:
        return "found"

    async with keeper:
        refused = await keeper.execute(ToolCall(call_id="r", name="refund"))
        found = await keeper.execute(ToolCall(call_id="l", name="lookup"))
        record = await keeper.store.get_call("default", "l")
    assert refused.error is not None and refused.error.code is ErrorCode.UNKNOWN_TOOL
    assert found.ok and record is not None and record.principal_id == "reader"
    assert [s.name for s in keeper.visible_tools()] == ["lookup"]
