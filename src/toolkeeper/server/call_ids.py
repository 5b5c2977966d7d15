"""Task and call ids for MCP `tools/call` requests, which carry neither.

A client may name them in the request's `_meta`: `dev.toolkeeper/call-id` (a client that
wants exactly-once across its own retries sends a call id) and, if its principal may
(`client_task_ids`; the gateway refuses the call otherwise), `dev.toolkeeper/task-id`.
Otherwise:

- the task is `mcp:<principal id>` (a colon in the id escaped as `%3A`): one task per
  principal, so an approval given in one session is found again by the next one;
- the call id is derived from the principal, the tool and the canonical arguments, keyed with
  the ledger's digest key (`ledger.keys`: it is sent to the client, and the arguments may hold
  a secret), plus a generation number. A proposal joins the latest generation while that is
  still the same call: open in the ledger (waiting for approval, refused, cancelled, running),
  of unknown outcome, or settled as done by a person or a reconciler after an unknown outcome
  and not yet answered by this process. Such a retry gets that call's result (its replay, or
  its one run), and a write whose outcome is unknown is never run again until it is settled.
  A write (or a settled success) also joins its latest generation for `repeat_window` seconds
  after that ended or this process last answered it: a plain client cannot tell the gateway a
  retry from a repeat, and identical proposals raced from several connections reach it spread
  over milliseconds, some after a fast write ended. So 10 identical proposals made at once run
  once. Past the window, or once a read has ended, the same arguments make a new call (the
  next generation). A settled failure lets the next proposal run at once; a client that means
  to repeat a write within the window sends its own call id.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from ..core.ids import id_problem
from ..core.states import CallStatus
from ..core.values import Principal
from ..ledger.base import CallRecord, LedgerStore
from ..ledger.keys import digest_key
from ..schema.canonical import canonical_json, digest_bytes

__all__ = ["CALL_META_KEY", "TASK_META_KEY", "CallIds"]

TASK_META_KEY = "dev.toolkeeper/task-id"
CALL_META_KEY = "dev.toolkeeper/call-id"

_OPEN = frozenset(
    {
        CallStatus.PROPOSED,
        CallStatus.VALIDATED,
        CallStatus.AUTHORIZED,
        CallStatus.AWAITING_APPROVAL,
        CallStatus.RUNNING,
        CallStatus.REJECTED,
        CallStatus.CANCELLED,  # proposed again, it runs (where that is safe) or replays
        CallStatus.UNKNOWN_OUTCOME,  # answered again as unknown until it is settled
    }
)
"""States in which a same proposal is the same call (a retry), not a new one: no later
generation exists while one is in them."""


def _same_call(record: CallRecord) -> bool:
    """Whether a proposal joins the call whose latest generation is `record`: while it is open,
    or settled as done after an unknown outcome (the retry gets what was found)."""
    return record.status in _OPEN or (
        record.status is CallStatus.SUCCEEDED
        and any(status is CallStatus.UNKNOWN_OUTCOME for status, _ in record.history)
    )


def _recent(record: CallRecord, now: float, window: float, answered: float = 0.0) -> bool:
    """Whether `record` ended, or was last `answered` here, less than `window` seconds before
    `now`, and is done: a call settled as not done after an unknown outcome lets the next
    proposal run at once."""
    settled = any(status is CallStatus.UNKNOWN_OUTCOME for status, _ in record.history)
    return (
        record.status.terminal
        and now - max(record.updated_at, answered) < window
        and not (settled and record.status is not CallStatus.SUCCEEDED)
    )


REPEAT_WINDOW = 5.0
"""Seconds after a write ends during which a plain client's identical proposal still joins it."""

_REMEMBERED = 4096
"""Calls whose generation is remembered; an older one is looked up again in the ledger."""


class CallIds:
    """Derives task and call ids; remembers the last generation of recent calls to save
    lookups (the others are found in the ledger, in a few lookups however many there were)."""

    def __init__(
        self,
        store: LedgerStore,
        *,
        clock: Callable[[], float] = time.time,
        repeat_window: float = REPEAT_WINDOW,
    ) -> None:
        """Args:
        store: The ledger the calls are recorded in.
        clock: The keeper's wall clock (epoch seconds, as the records are stamped).
        repeat_window: Seconds after a write ends during which its identical proposal joins
            it (`probe` proposals only); 0 makes it a new call as soon as it ended.
        """
        self._store = store
        self._clock = clock
        self._window = repeat_window
        # (task, base id) -> (generation, fresh, answered): fresh when this process saw the
        # one before it end, so that a read may take it without reading the ledger
        # (`derive`), and when it answered that one last (the repeat window counts from it).
        self._known: OrderedDict[tuple[str, str], tuple[int, bool, float]] = OrderedDict()

    def _remember(
        self, key: tuple[str, str], generation: int, fresh: bool, answered: float = 0.0
    ) -> None:
        self._known[key] = (generation, fresh, answered)
        self._known.move_to_end(key)
        if len(self._known) > _REMEMBERED:
            self._known.popitem(last=False)

    @staticmethod
    def task_id(principal: Principal, meta: Mapping[str, Any] | None) -> str:
        """The task of a call: the client's `dev.toolkeeper/task-id`, else per principal."""
        given = (meta or {}).get(TASK_META_KEY)
        # A colon of the principal's id is escaped: else principal "a" with task "b" and
        # principal "a:b" with none shared a task, and its budgets. (Ids without one, nearly
        # all, keep the tasks they had.)
        who = principal.id.replace("%", "%25").replace(":", "%3A")
        return f"mcp:{who}:{given}" if given else f"mcp:{who}"

    async def call_id(
        self,
        principal: Principal,
        task_id: str,
        tool: str,
        arguments: Mapping[str, Any] | str,
        meta: Mapping[str, Any] | None,
        *,
        probe: bool = False,
    ) -> str:
        """The call id: the client's `dev.toolkeeper/call-id`, else derived (see the module)."""
        return (await self.derive(principal, task_id, tool, arguments, meta, probe=probe))[0]

    async def derive(
        self,
        principal: Principal,
        task_id: str,
        tool: str,
        arguments: Mapping[str, Any] | str,
        meta: Mapping[str, Any] | None,
        *,
        probe: bool = False,
    ) -> tuple[str, bool]:
        """The call id, and whether the ledger was read to choose it.

        A generation this process saw the previous one of end is used without reading the
        ledger, unless `probe`. Read, the id is that of the call the proposal joins (or of a
        call not yet made): whatever the executor answers for it is this proposal's answer.
        Unread, another process may have made and ended that generation meanwhile: when the
        executor answers with such a replay, the caller asks again with `probe=True`. A
        `probe` (a write's) joins a call that ended less than the repeat window ago.
        """
        given = (meta or {}).get(CALL_META_KEY)
        if given:
            return str(given), True
        base = _base(principal, tool, arguments, digest_key(self._store))
        if id_problem(task_id) is not None:
            # (a task the client named that no ledger can key: the executor refuses the call)
            return base, True
        key = (task_id, base)
        start, fresh, answered = self._known.get(key, (0, False, 0.0))
        generation, read = start, probe or not fresh
        if read:
            window = self._window if probe else 0.0
            generation = await self._current(task_id, base, start, window, answered)
        if generation >= start:  # (not the answered one the window joined: it stays answered)
            self._remember(key, generation, False, answered)
        return _name(base, generation), read

    async def _current(
        self, task_id: str, base: str, start: int, window: float, answered: float
    ) -> int:
        """The generation a proposal is of, from `start` (the generations before it ended here).

        Generations are made in order (a next one only once its previous one ended), so the
        ledger holds every one up to the latest and none after: a doubling search, then a
        halving one, find the latest in a few lookups however many times the call was made.
        The proposal joins it while it is the same call (`_same_call`) or, within `window`
        seconds of its end, a recent one (`_recent`), else makes the next."""
        now = self._clock()
        if start > 0 and window > 0:
            # (the generation this process saw end: a proposal right after it joins it)
            before = await self._store.get_call(task_id, _name(base, start - 1))
            if before is not None and _recent(before, now, window, answered):
                later = await self._store.get_call(task_id, _name(base, start))
                if later is None:
                    return start - 1
        first = await self._store.get_call(task_id, _name(base, start))
        if first is None or first.status in _OPEN:
            return start  # (no later generation exists: nothing more to read)
        latest, made, step = first, start, 1
        while (found := await self._store.get_call(task_id, _name(base, start + step))) is not None:
            latest, made, step = found, start + step, step * 2
        missing = start + step
        while missing - made > 1:
            middle = (made + missing) // 2
            found = await self._store.get_call(task_id, _name(base, middle))
            if found is None:
                missing = middle
            else:
                latest, made = found, middle
        return made if _same_call(latest) or _recent(latest, now, window) else made + 1

    def ended(self, task_id: str, call_id: str, status: CallStatus) -> None:
        """Note that a derived call was answered with `status` (the caller passes derived ids
        only): once a call has ended (or its settled success was answered), its next proposal
        is a new call, so the next lookup starts at the next generation."""
        if status in _OPEN or not call_id.startswith("mcp-"):
            return
        base, _, number = call_id.partition(".")
        generation = int(number) if number.isascii() and number.isdigit() else 0
        key = (task_id, base)
        if self._known.get(key, (0, False, 0.0))[0] <= generation:
            self._remember(key, generation + 1, True, self._clock())

    def derives(
        self, call_id: str, principal: Principal, tool: str, arguments: Mapping[str, Any] | str
    ) -> bool:
        """Whether `call_id` is a derived id (of any generation) of this call."""
        return call_id.partition(".")[0] == _base(
            principal, tool, arguments, digest_key(self._store)
        )

    @staticmethod
    def derived(meta: Mapping[str, Any] | None) -> bool:
        """Whether the call id of a request with this `_meta` is derived (not the client's)."""
        return not (meta or {}).get(CALL_META_KEY)


def _base(principal: Principal, tool: str, arguments: Mapping[str, Any] | str, key: bytes) -> str:
    """The id of the first generation of a call: its principal, tool and arguments, keyed."""
    try:
        args = canonical_json(arguments)
    except (TypeError, ValueError):
        args = repr(arguments)
    # surrogatepass: arguments holding a lone surrogate still get an id (and their refusal)
    identity = f"{principal.id}\x00{tool}\x00{args}".encode("utf-8", "surrogatepass")
    return ("mcp-" + digest_bytes(identity, key))[:36]


def _name(base: str, generation: int) -> str:
    return base if generation == 0 else f"{base}.{generation}"
