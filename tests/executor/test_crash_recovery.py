"""A process killed between its side effect and its terminal ledger write: after a restart the
effect happened exactly once and the call is UNKNOWN_OUTCOME or reconciled, never re-run."""

import json
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from toolkeeper import CallStatus, ErrorCode, Keeper, ToolCall

from ..conftest import APP
from .crash_child import CALL, build

pytestmark = pytest.mark.anyio


def _crash(ledger: str, effects: Path) -> None:
    child = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("crash_child.py")), ledger, str(effects)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()


async def test_sigkill_after_the_effect_is_never_executed_again(tmp_path: Path) -> None:
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    effects = tmp_path / "effects.txt"
    effects.touch()
    _crash(ledger, effects)
    assert len(effects.read_text().splitlines()) == 1

    async with build(ledger, effects, die=False) as keeper:
        [unknown] = await keeper.unknown()
        assert (unknown.task_id, unknown.call_id) == (CALL.task_id, CALL.call_id)

        again = await keeper.execute(CALL)
        assert again.status is CallStatus.UNKNOWN_OUTCOME
        assert again.error is not None and again.error.code is ErrorCode.UNKNOWN_OUTCOME
        assert len(effects.read_text().splitlines()) == 1

        [settled] = await keeper.reconcile()
        assert settled.status is CallStatus.SUCCEEDED
        assert settled.effect_ref == "tx-5"
        assert await keeper.unknown() == []

        final = await keeper.execute(CALL)
        assert final.ok and final.replayed and final.data == {"transfer": "tx-5"}
    assert len(effects.read_text().splitlines()) == 1
    # Recovery and reconciliation changed the record: the audit log says so, and by whom.
    audit = (tmp_path / "ledger.audit.jsonl").read_text()
    events = [json.loads(line) for line in audit.splitlines()]
    changes = [(e["previous"], e["status"], e.get("extra", {}).get("by")) for e in events]
    assert ("RUNNING", "UNKNOWN_OUTCOME", "recovery") in changes
    assert ("UNKNOWN_OUTCOME", "SUCCEEDED", "reconcile") in changes


async def test_unknown_outcome_stays_when_the_tool_cannot_tell(tmp_path: Path) -> None:
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    effects = tmp_path / "effects.txt"
    effects.touch()
    _crash(ledger, effects)
    effects.write_text("")  # the downstream service lost track too

    async with build(ledger, effects, die=False) as keeper:
        assert await keeper.reconcile() == []
        [still] = await keeper.unknown()
        assert still.status is CallStatus.UNKNOWN_OUTCOME
        result = await keeper.execute(CALL)
        assert result.status is CallStatus.UNKNOWN_OUTCOME
    assert effects.read_text() == ""


async def test_a_failing_or_hanging_reconciler_leaves_only_its_own_call_unknown() -> None:
    from toolkeeper import Keeper, ToolCall, ToolResult
    from toolkeeper.core.signals import OutcomeUnknown
    from toolkeeper.core.values import CallContext

    def broken(ctx: CallContext) -> ToolResult:
        raise ConnectionError("the payment service is down")

    async def hanging(ctx: CallContext) -> ToolResult:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    def answers(ctx: CallContext) -> ToolResult:
        return ToolResult(call_id=ctx.call_id, tool=ctx.tool, status=CallStatus.SUCCEEDED, data=1)

    keeper = Keeper(principal=APP, ledger="memory://")
    for name, reconcile in (("a_broken", broken), ("b_hanging", hanging), ("c_fine", answers)):

        async def lost(name: str = name) -> str:
            raise OutcomeUnknown(f"{name}: the connection dropped after sending")

        keeper.add_function(
            lost, name=name, effect="write", permissions=[], reconcile=reconcile, timeout=0.2
        )
    async with keeper:
        for name in ("a_broken", "b_hanging", "c_fine"):
            result = await keeper.execute(ToolCall(call_id=name, name=name, arguments={}))
            assert result.status is CallStatus.UNKNOWN_OUTCOME
        with anyio.fail_after(10):
            settled = await keeper.reconcile()
        assert [r.call_id for r in settled] == ["c_fine"]
        assert sorted(r.call_id for r in await keeper.unknown()) == ["a_broken", "b_hanging"]


async def test_every_unknown_call_is_listed_not_the_first_thousand() -> None:
    from toolkeeper import Keeper
    from toolkeeper.testing import MemoryStore

    from ..ledger.records import call

    store = MemoryStore()
    for i in range(1001):
        await store.claim_call(call(f"c{i}", status=CallStatus.UNKNOWN_OUTCOME))
    async with Keeper(principal=APP, ledger=store) as keeper:
        assert len(await keeper.unknown()) == 1001


async def test_a_person_settles_an_unknown_call_through_the_keeper() -> None:
    from toolkeeper.core.signals import OutcomeUnknown

    keeper = Keeper(principal=APP, ledger="memory://")
    sent: list[int] = []

    @keeper.tool(effect="write", permissions=[])
    async def charge(cents: int) -> str:
        sent.append(cents)
        raise OutcomeUnknown("the connection dropped after sending")

    call = ToolCall(call_id="c1", name="charge", arguments={"cents": 500})
    async with keeper:
        unknown = await keeper.execute(call)
        with pytest.raises(ValueError, match="needs who decided"):
            await keeper.settle("default", "c1", succeeded=False, by="ann", note=" ")
        settled = await keeper.settle(
            "default", "c1", succeeded=False, by="ann", note="no charge at the bank"
        )
        replayed = await keeper.execute(call)
        left = await keeper.unknown()
        with pytest.raises(ValueError, match="is FAILED, not UNKNOWN_OUTCOME"):
            await keeper.settle("default", "c1", succeeded=True, by="ann", note="oops")
    assert unknown.status is CallStatus.UNKNOWN_OUTCOME
    assert settled.status is CallStatus.FAILED and left == []
    assert replayed.replayed and replayed.status is CallStatus.FAILED
    assert replayed.error is not None and "no charge at the bank" in replayed.error.message
    assert sent == [500]
    events = keeper.audit.events  # type: ignore[attr-defined]
    assert events[-1].extra == {"by": "person:ann", "note": "no charge at the bank"}
