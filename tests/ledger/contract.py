"""The contract every `LedgerStore` keeps; runs unchanged against each backend.

A backend's test module subclasses `LedgerContract` and provides one fixture, `connect`: an
async function that returns a new, open store on the backend's database for this test (a
new connection each time for durable stores, so that tests can race several of them and
reopen the data).
"""

from __future__ import annotations

import hashlib
import json
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, ClassVar

import anyio
import msgspec
import pytest

from toolkeeper.core.errors import ErrorCode, IllegalTransition
from toolkeeper.core.states import TRANSITIONS, CallStatus
from toolkeeper.ledger import (
    ApprovalStatus,
    CallRecord,
    LedgerStore,
    StaleState,
    current_owner,
    recover_abandoned,
)
from toolkeeper.ledger._rows import RESULT_INLINE_LIMIT
from toolkeeper.ledger.recovery import settle

from .pin_contract import PinContract
from .records import approval, call, dead_pid, hold
from .run_contract import RunContract

Connect = Callable[[], Awaitable[LedgerStore]]
S = CallStatus


@pytest.mark.anyio
class LedgerContract(RunContract, PinContract):
    durable: ClassVar[bool] = True
    """Whether records survive closing the store (and results over the limit go apart)."""

    @pytest.fixture
    async def store(self, connect: Connect) -> LedgerStore:
        return await connect()

    # -- claims ----------------------------------------------------------------------------

    async def test_first_claim_inserts_and_stamps_the_record(self, store: LedgerStore) -> None:
        before = time.time()
        stored, inserted = await store.claim_call(call())
        assert inserted
        assert before <= stored.created_at == stored.updated_at <= time.time()
        assert stored.history == ((S.RUNNING, stored.created_at),)
        assert await store.get_call("task-1", "call-1") == stored

    async def test_second_claim_returns_the_existing_record(self, store: LedgerStore) -> None:
        first, _ = await store.claim_call(call(owner="host-a:1"))
        again, inserted = await store.claim_call(call(owner="host-b:2", status=S.SUCCEEDED))
        assert not inserted
        assert again == first

    async def test_concurrent_claimants_get_exactly_one_win(self, connect: Connect) -> None:
        stores = [await connect() for _ in range(8)]
        outcomes: list[tuple[str, bool, str]] = []

        async def claim(i: int) -> None:
            record, inserted = await stores[i].claim_call(call("raced", owner=f"host:{i}"))
            outcomes.append((f"host:{i}", inserted, record.owner))

        async with anyio.create_task_group() as tg:
            for i in range(len(stores)):
                tg.start_soon(claim, i)
        winners = [owner for owner, inserted, _ in outcomes if inserted]
        assert len(winners) == 1
        assert {seen for _, _, seen in outcomes} == set(winners)

    async def test_listing_limits_are_counts_and_every_call_can_be_listed(
        self, store: LedgerStore
    ) -> None:
        from toolkeeper.ledger.base import EVERY

        for i in range(3):
            await store.claim_call(call(f"c{i}"))
        assert [r.call_id for r in await store.list_calls(limit=2)] == ["c0", "c1"]
        assert len(await store.list_calls(limit=EVERY)) == 3
        # (beyond the databases' 64-bit integers: `ledger list --limit 99999999999999999999`)
        assert len(await store.list_calls(limit=2**64)) == 3
        assert await store.list_calls(limit=0) == []
        with pytest.raises(ValueError, match="limit"):
            await store.list_calls(limit=-1)

    async def test_missing_call_reads_as_none(self, store: LedgerStore) -> None:
        assert await store.get_call("task-1", "nope") is None

    # -- transitions -----------------------------------------------------------------------

    async def test_every_legal_transition_is_persisted(self, store: LedgerStore) -> None:
        pairs = [(a, b) for a, targets in TRANSITIONS.items() for b in sorted(targets)]
        assert len(pairs) > 40
        for n, (current, target) in enumerate(pairs):
            await store.claim_call(call(f"legal-{n}", status=current))
            moved = await store.transition("task-1", f"legal-{n}", expected=current, target=target)
            assert (moved.status, [s for s, _ in moved.history]) == (target, [current, target])
            assert await store.get_call("task-1", f"legal-{n}") == moved

    async def test_every_illegal_transition_is_refused(self, store: LedgerStore) -> None:
        illegal = [(a, b) for a in S for b in S if b not in TRANSITIONS[a]]
        assert (S.SUCCEEDED, S.RUNNING) in illegal
        for n, (current, target) in enumerate(illegal):
            stored, _ = await store.claim_call(call(f"illegal-{n}", status=current))
            with pytest.raises(IllegalTransition) as raised:
                await store.transition("task-1", f"illegal-{n}", expected=current, target=target)
            assert (raised.value.current, raised.value.target) == (current, target)
            assert await store.get_call("task-1", f"illegal-{n}") == stored

    async def test_wrong_expected_state_raises_stale_state(self, store: LedgerStore) -> None:
        stored, _ = await store.claim_call(call(status=S.SUCCEEDED))
        with pytest.raises(StaleState) as raised:
            await store.transition("task-1", "call-1", expected=S.RUNNING, target=S.FAILED)
        assert (raised.value.expected, raised.value.actual) == (S.RUNNING, S.SUCCEEDED)
        assert await store.get_call("task-1", "call-1") == stored

    async def test_transition_of_a_missing_call_raises_key_error(self, store: LedgerStore) -> None:
        with pytest.raises(KeyError):
            await store.transition("task-1", "nope", expected=S.RUNNING, target=S.SUCCEEDED)

    async def test_an_illegal_transition_is_refused_as_such_before_the_record_is_read(
        self, store: LedgerStore
    ) -> None:
        # Every store says the same of a transition no call may make: the memory store said
        # KeyError (a missing call) or StaleState (another attempt) where the SQL stores said
        # IllegalTransition.
        with pytest.raises(IllegalTransition):
            await store.transition("task-1", "nope", expected=S.SUCCEEDED, target=S.RUNNING)
        await store.claim_call(call(status=S.RUNNING))
        with pytest.raises(IllegalTransition):
            await store.transition(
                "task-1", "call-1", expected=S.SUCCEEDED, target=S.RUNNING, expected_attempt=9
            )

    async def test_concurrent_transitions_from_one_state_have_one_winner(
        self, connect: Connect
    ) -> None:
        stores = [await connect() for _ in range(6)]
        await stores[0].claim_call(call())
        won: list[int] = []
        stale: list[CallStatus | None] = []

        async def finish(i: int) -> None:
            try:
                await stores[i].transition(
                    "task-1",
                    "call-1",
                    expected=S.RUNNING,
                    target=S.SUCCEEDED,
                    changes={"result": {"by": i}},
                )
                won.append(i)
            except StaleState as exc:
                stale.append(exc.actual)

        async with anyio.create_task_group() as tg:
            for i in range(len(stores)):
                tg.start_soon(finish, i)
        assert len(won) == 1
        assert stale == [S.SUCCEEDED] * (len(stores) - 1)
        final = await stores[0].get_call("task-1", "call-1")
        assert final is not None and final.result == {"by": won[0]}
        assert [s for s, _ in final.history] == [S.RUNNING, S.SUCCEEDED]

    async def test_a_transition_builds_on_what_another_store_wrote(self, connect: Connect) -> None:
        first, second = await connect(), await connect()
        await first.claim_call(call())
        await second.transition(
            "task-1",
            "call-1",
            expected=S.RUNNING,
            target=S.RUNNING,
            changes={"attempt": 2, "owner": "host-b:2"},
        )
        final = await first.transition(
            "task-1", "call-1", expected=S.RUNNING, target=S.SUCCEEDED, changes={"result": 1}
        )
        assert [s for s, _ in final.history] == [S.RUNNING, S.RUNNING, S.SUCCEEDED]
        assert (final.attempt, final.owner, final.result) == (2, "host-b:2", 1)
        assert await second.get_call("task-1", "call-1") == final

    async def test_history_has_one_timestamp_per_transition(self, store: LedgerStore) -> None:
        await store.claim_call(call())
        await store.transition("task-1", "call-1", expected=S.RUNNING, target=S.RUNNING)
        final = await store.transition("task-1", "call-1", expected=S.RUNNING, target=S.SUCCEEDED)
        assert [s for s, _ in final.history] == [S.RUNNING, S.RUNNING, S.SUCCEEDED]
        times = [t for _, t in final.history]
        assert times == sorted(times)
        assert (times[0], times[-1]) == (final.created_at, final.updated_at)

    async def test_transition_applies_its_changes(self, store: LedgerStore) -> None:
        await store.claim_call(call(status=S.AWAITING_APPROVAL))
        running = await store.transition(
            "task-1",
            "call-1",
            expected=S.AWAITING_APPROVAL,
            target=S.RUNNING,
            changes={"approval_id": "apr-9", "attempt": 1, "owner": "h:9", "deadline": 123.5},
        )
        assert (running.approval_id, running.attempt, running.owner, running.deadline) == (
            "apr-9",
            1,
            "h:9",
            123.5,
        )
        error = {"code": "TOOL_ERROR", "message": "declined", "retryable": False}
        failed = await store.transition(
            "task-1",
            "call-1",
            expected=S.RUNNING,
            target=S.FAILED,
            changes={"error": error, "effect_ref": "tx-1", "result": [1, "two", None]},
        )
        assert (failed.error, failed.effect_ref, failed.result) == (error, "tx-1", [1, "two", None])
        assert failed.approval_id == "apr-9" and failed.deadline == 123.5
        assert await store.get_call("task-1", "call-1") == failed

    @pytest.mark.parametrize("field", ["status", "history", "task_id", "updated_at", "colour"])
    async def test_transition_refuses_changes_to_derived_or_unknown_fields(
        self, store: LedgerStore, field: str
    ) -> None:
        stored, _ = await store.claim_call(call())
        with pytest.raises(ValueError, match=field):
            await store.transition(
                "task-1", "call-1", expected=S.RUNNING, target=S.FAILED, changes={field: "x"}
            )
        assert await store.get_call("task-1", "call-1") == stored

    # -- queries ---------------------------------------------------------------------------

    async def _populate(self, store: LedgerStore) -> None:
        for call_id, task_id, status, tool in [
            ("a", "t1", S.RUNNING, "x.read"),
            ("b", "t1", S.SUCCEEDED, "x.read"),
            ("c", "t2", S.RUNNING, "x.write"),
            ("d", "t1", S.UNKNOWN_OUTCOME, "x.write"),
            ("e", "t2", S.SUCCEEDED, "x.write"),
        ]:
            await store.claim_call(call(call_id, task_id=task_id, status=status, tool=tool))

    async def test_list_calls_filters_oldest_first(self, store: LedgerStore) -> None:
        await self._populate(store)

        async def ids(**filters: Any) -> list[str]:
            return [r.call_id for r in await store.list_calls(**filters)]

        assert await ids() == ["a", "b", "c", "d", "e"]
        assert await ids(statuses=[S.RUNNING]) == ["a", "c"]
        assert await ids(statuses=[S.SUCCEEDED, S.UNKNOWN_OUTCOME]) == ["b", "d", "e"]
        assert await ids(statuses=[]) == []
        assert await ids(task_id="t1") == ["a", "b", "d"]
        assert await ids(task_id="t2", statuses=[S.SUCCEEDED]) == ["e"]
        assert await ids(limit=2) == ["a", "b"]

    # -- budget holds ----------------------------------------------------------------------

    async def test_a_budget_hold_is_taken_while_the_task_has_room(self, store: LedgerStore) -> None:
        await store.claim_call(call("ran", task_id="t", status=S.SUCCEEDED))
        await store.claim_call(call("refused", task_id="t", status=S.REJECTED))
        assert await store.hold_budget(hold("a", limits=((None, 3),))) is None
        # Taken again by the same call, the hold replaces its own: still room for one more.
        assert await store.hold_budget(hold("a", limits=((None, 3),))) is None
        assert await store.hold_budget(hold("b", limits=((None, 3),))) is None
        # 1 counted call + 2 holds: the task's 3 places are taken.
        assert await store.hold_budget(hold("c", limits=((None, 3),))) == 0
        # Per tool: another tool's calls and holds do not count.
        assert await store.hold_budget(hold("d", tool="other", limits=(("other", 1),))) is None
        assert await store.hold_budget(hold("e", tool="other", limits=(("other", 1),))) == 0
        # The first full budget is the one named.
        limits = (("payments.transfer", 9), (None, 4))
        assert await store.hold_budget(hold("f", limits=limits)) == 1

    async def test_a_hold_stops_counting_once_its_call_has_a_record(
        self, store: LedgerStore
    ) -> None:
        now = time.time()
        assert await store.hold_budget(hold("a", limits=((None, 1),), at=now - 10)) is None
        assert await store.hold_budget(hold("b", limits=((None, 1),), at=now)) == 0
        # The call ran: its record counts in place of its hold (one place, not two).
        await store.claim_call(call("a", task_id="t", status=S.RUNNING))
        assert await store.hold_budget(hold("b", limits=((None, 1),), at=now)) == 0
        assert await store.hold_budget(hold("b", limits=((None, 2),), at=now)) is None
        # A call refused after its hold was taken gives its place back.
        assert await store.hold_budget(hold("c", limits=((None, 3),), at=now - 5)) is None
        await store.claim_call(call("c", task_id="t", status=S.REJECTED))
        assert await store.hold_budget(hold("d", limits=((None, 3),), at=now)) is None

    async def test_a_hold_whose_process_died_counts_until_it_expires(
        self, store: LedgerStore
    ) -> None:
        now = time.time()
        assert (
            await store.hold_budget(hold("a", limits=((None, 1),), at=now - 100, lasts=50)) is None
        )
        assert await store.hold_budget(hold("b", limits=((None, 1),), at=now - 60, lasts=50)) == 0
        assert await store.hold_budget(hold("b", limits=((None, 1),), at=now)) is None
        # Another tenant's task of the same id is another task.
        other = replace(hold("c", limits=((None, 1),), at=now), tenant="globex")
        assert await store.hold_budget(other) is None

    async def test_concurrent_holds_take_exactly_the_places_there_are(
        self, connect: Connect
    ) -> None:
        stores = [await connect() for _ in range(8)]
        taken: list[int] = []

        async def take(i: int) -> None:
            if await stores[i].hold_budget(hold(f"c{i}", limits=((None, 3),))) is None:
                taken.append(i)

        async with anyio.create_task_group() as tg:
            for i in range(len(stores)):
                tg.start_soon(take, i)
        assert len(taken) == 3

    async def test_count_calls_by_task_tool_and_state(self, store: LedgerStore) -> None:
        await self._populate(store)
        assert await store.count_calls("t1") == 3
        assert await store.count_calls("t1", tool="x.write") == 1
        assert await store.count_calls("t2", statuses=[S.RUNNING, S.SUCCEEDED]) == 2
        assert await store.count_calls("t2", tool="x.read", statuses=[S.RUNNING]) == 0
        assert await store.count_calls("t3") == 0
        await store.claim_call(
            msgspec.structs.replace(call("f", task_id="t1", tool="x.read"), tenant="globex")
        )
        assert await store.count_calls("t1") == 4
        assert await store.count_calls("t1", tenant="globex") == 1
        assert await store.count_calls("t1", tool="x.read", tenant="globex") == 1
        assert await store.count_calls("t1", tenant="nobody") == 0

    # -- approvals -------------------------------------------------------------------------

    async def test_approval_is_created_and_read_back(self, store: LedgerStore) -> None:
        request = approval()
        assert await store.create_approval(request) == request
        assert await store.get_approval("apr-1") == request
        assert await store.get_approval("apr-2") is None
        with pytest.raises(ValueError, match="apr-1"):
            await store.create_approval(request)

    async def test_pending_approval_is_decided_once(self, store: LedgerStore) -> None:
        await store.create_approval(approval())
        decided = await store.decide_approval(
            "apr-1", status=ApprovalStatus.APPROVED, by="bob", note="fine", at=2000.0
        )
        assert (decided.status, decided.decided_by, decided.note, decided.decided_at) == (
            ApprovalStatus.APPROVED,
            "bob",
            "fine",
            2000.0,
        )
        assert await store.get_approval("apr-1") == decided
        with pytest.raises(ValueError, match="approved"):
            await store.decide_approval(
                "apr-1", status=ApprovalStatus.DENIED, by="eve", note=None, at=2001.0
            )
        assert await store.get_approval("apr-1") == decided

    async def test_pending_is_no_decision(self, store: LedgerStore) -> None:
        # It stamped who decided and when on a request that stayed pending.
        request = await store.create_approval(approval())
        with pytest.raises(ValueError, match="pending"):
            await store.decide_approval(
                "apr-1", status=ApprovalStatus.PENDING, by="eve", note="hm", at=2000.0
            )
        assert await store.get_approval("apr-1") == request

    async def test_deciding_a_missing_approval_raises_key_error(self, store: LedgerStore) -> None:
        with pytest.raises(KeyError):
            await store.decide_approval(
                "nope", status=ApprovalStatus.DENIED, by=None, note=None, at=1.0
            )

    async def test_list_approvals_filters_oldest_first(self, store: LedgerStore) -> None:
        for n, created in enumerate([30.0, 10.0, 20.0]):
            await store.create_approval(approval(f"apr-{n}", created_at=created))
        await store.decide_approval(
            "apr-2", status=ApprovalStatus.EXPIRED, by=None, note=None, at=40.0
        )
        assert [a.id for a in await store.list_approvals()] == ["apr-1", "apr-2", "apr-0"]
        pending = await store.list_approvals(status=ApprovalStatus.PENDING)
        assert [a.id for a in pending] == ["apr-1", "apr-0"]
        assert [a.id for a in await store.list_approvals(limit=1)] == ["apr-1"]
        assert len(await store.list_approvals(limit=2**64)) == 3
        assert await store.list_approvals(limit=0) == []
        with pytest.raises(ValueError, match="limit"):  # (not all, nor all but the last)
            await store.list_approvals(limit=-1)

    # -- durability ------------------------------------------------------------------------

    async def test_open_twice_is_harmless(self, store: LedgerStore) -> None:
        await store.claim_call(call())
        await store.open()
        assert await store.get_call("task-1", "call-1") is not None

    async def test_records_survive_close_and_reopen(
        self, store: LedgerStore, connect: Connect
    ) -> None:
        if not self.durable:
            pytest.skip("this store keeps nothing once closed")
        await store.claim_call(call())
        final = await store.transition(
            "task-1", "call-1", expected=S.RUNNING, target=S.SUCCEEDED, changes={"result": 7}
        )
        await store.create_approval(approval())
        await store.aclose()
        await store.aclose()
        again = await connect()
        assert await again.get_call("task-1", "call-1") == final
        assert await again.get_approval("apr-1") == approval()

    async def test_large_results_round_trip(self, store: LedgerStore) -> None:
        big = {"rows": ["é" * 1000 + str(i) for i in range(RESULT_INLINE_LIMIT // 1000)]}
        small = {"rows": ["tiny"]}
        claimed, _ = await store.claim_call(call("big-claim", status=S.SUCCEEDED, result=big))
        await store.claim_call(call("big-later"))
        later = await store.transition(
            "task-1", "big-later", expected=S.RUNNING, target=S.SUCCEEDED, changes={"result": big}
        )
        await store.claim_call(call("small", status=S.SUCCEEDED, result=small))
        digest = hashlib.sha256(
            json.dumps(big, separators=(",", ":"), ensure_ascii=False).encode()
        ).hexdigest()
        for record in (claimed, later, await store.get_call("task-1", "big-later")):
            assert record is not None and record.result == big
            assert record.result_ref == (digest if self.durable else None)
        [listed] = await store.list_calls(statuses=[S.SUCCEEDED], task_id="task-1", limit=1)
        assert listed.result == big
        small_record = await store.get_call("task-1", "small")
        assert small_record is not None
        assert (small_record.result, small_record.result_ref) == (small, None)

    async def test_content_blocks_round_trip(self, store: LedgerStore) -> None:
        blocks = (
            {"type": "text", "text": "a picture"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
        )
        claimed, _ = await store.claim_call(
            call("claimed", status=S.SUCCEEDED, result={"n": 1}, content=blocks)
        )
        await store.claim_call(call("later"))
        later = await store.transition(
            "task-1",
            "later",
            expected=S.RUNNING,
            target=S.SUCCEEDED,
            changes={"result": [dict(b) for b in blocks], "content": blocks},
        )
        read = [await store.get_call("task-1", c) for c in ("claimed", "later")]
        listed = await store.list_calls(statuses=[S.SUCCEEDED], task_id="task-1")
        for record in (claimed, later, *read, *listed):
            assert record is not None and record.content == blocks
        plain, _ = await store.claim_call(call("plain", status=S.SUCCEEDED, result="text"))
        assert plain.content is None
        assert (await store.get_call("task-1", "plain")) == plain

    # -- recovery --------------------------------------------------------------------------

    async def test_recovery_marks_only_abandoned_non_idempotent_calls(
        self, store: LedgerStore
    ) -> None:
        here = socket.gethostname()
        gone = f"{here}:{dead_pid()}"
        await store.claim_call(call("crashed", owner=gone))
        await store.claim_call(call("crashed-idem", owner=gone, idempotent=True))
        await store.claim_call(call("mine", owner=current_owner()))
        await store.claim_call(call("far-late", owner="elsewhere:1", deadline=100.0))
        await store.claim_call(call("far-busy", owner="elsewhere:1", deadline=10_000.0))
        await store.claim_call(call("done", owner=gone, status=S.SUCCEEDED))

        changed = await recover_abandoned(store, now=1_000.0)

        assert sorted(r.call_id for r in changed) == ["crashed", "far-late"]
        for record in changed:
            assert record.status is S.UNKNOWN_OUTCOME
            assert record.error is not None
            assert record.error["code"] == ErrorCode.UNKNOWN_OUTCOME
            assert record.error["retryable"] is False
            assert await store.get_call("task-1", record.call_id) == record
        running = await store.list_calls(statuses=[S.RUNNING])
        assert sorted(r.call_id for r in running) == ["crashed-idem", "far-busy", "mine"]
        assert await recover_abandoned(store, now=1_000.0) == []

    async def test_a_takeover_is_won_by_one_of_those_who_read_the_same_attempt(
        self, store: LedgerStore
    ) -> None:
        """RUNNING -> RUNNING is checked by status alone: every process that read the same
        abandoned record took it over, and ran an idempotent tool at once (up to 7 of 8)."""
        await store.claim_call(call("idem", attempt=1, idempotent=True))

        async def take_over() -> CallRecord:
            return await store.transition(
                "task-1",
                "idem",
                expected=S.RUNNING,
                target=S.RUNNING,
                changes={"attempt": 2},
                expected_attempt=1,
            )

        took = await take_over()
        assert took.attempt == 2
        with pytest.raises(StaleState):
            await take_over()
        assert (await store.get_call("task-1", "idem")) == took

    async def test_a_settled_call_keeps_who_decided_and_what_they_found(
        self, store: LedgerStore
    ) -> None:
        """On PostgreSQL nothing but the record is kept: no audit file beside it."""
        await store.claim_call(call("paid", status=S.UNKNOWN_OUTCOME))
        await store.claim_call(call("unpaid", status=S.UNKNOWN_OUTCOME))
        ok = await settle(store, "task-1", "paid", succeeded=True, by="ann", note="tx 42 seen")
        no = await settle(store, "task-1", "unpaid", succeeded=False, by="bo", note="not there")
        assert (ok.status, ok.owner, ok.effect_ref) == (
            S.SUCCEEDED,
            "person:ann",
            "settled: tx 42 seen",
        )
        assert (no.status, no.owner) == (S.FAILED, "person:bo")
        assert no.error is not None and no.error["details"] == {
            "settled_by": "bo",
            "note": "not there",
        }
        assert await store.get_call("task-1", "paid") == ok
        with pytest.raises(ValueError, match="not UNKNOWN_OUTCOME"):
            await settle(store, "task-1", "paid", succeeded=False, by="ann", note="again")
