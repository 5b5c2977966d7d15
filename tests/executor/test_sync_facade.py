"""Scripts without an event loop use the sync facade."""

import atexit
import contextlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from toolkeeper import Keeper, ToolCall

from ..conftest import APP


def test_execute_sync_runs_and_records(tmp_path: Path) -> None:
    keeper = Keeper(principal=APP, ledger=f"sqlite:///{tmp_path / 'l.db'}")

    @keeper.tool(effect="read_only")
    def shout(text: str) -> str:
        return text.upper()

    try:
        first = keeper.execute_sync(
            ToolCall(call_id="c1", name="shout", arguments='{"text": "hi"}')
        )
        again = keeper.execute_sync(
            ToolCall(call_id="c1", name="shout", arguments='{"text": "hi"}')
        )
    finally:
        keeper.close_sync()
        keeper.close_sync()
    assert first.data == "HI"
    assert again.replayed


def test_execute_sync_inside_an_event_loop_is_refused_not_a_deadlock() -> None:
    keeper = Keeper(principal=APP, ledger="memory://")

    @keeper.tool(effect="read_only")
    def shout(text: str) -> str:
        return text.upper()

    async def inside() -> None:
        async with keeper:
            with pytest.raises(RuntimeError, match=r"await keeper\.execute\(call\)"):
                keeper.execute_sync(ToolCall(call_id="c1", name="shout", arguments={"text": "a"}))
            result = await keeper.execute(
                ToolCall(call_id="c1", name="shout", arguments={"text": "a"})
            )
            assert result.data == "A" and not result.replayed

    anyio.run(inside)


def test_a_script_that_never_calls_close_sync_exits_once_its_threads_are_done(
    tmp_path: Path,
) -> None:
    """The portal's thread kept the interpreter waiting for ever at exit; closing the keeper
    before the program's other threads ended left their calls RUNNING and made them raise."""
    script = tmp_path / "script.py"
    db = tmp_path / "l.db"
    script.write_text(
        "import threading, time\n"
        "from toolkeeper import Keeper, Principal, ToolCall\n"
        "app = Principal(id='app', grants=frozenset({'*'}))\n"
        f"keeper = Keeper(ledger={f'sqlite:///{db}'!r}, principal=app)\n"
        "@keeper.tool(effect='write', permissions=[])\n"
        "def note(text: str) -> str:\n"
        "    time.sleep(0.2)\n"
        "    return text\n"
        "def worker() -> None:\n"
        "    for i in range(3):\n"
        "        call = ToolCall(call_id=f'w{i}', name='note', arguments={'text': 'x'})\n"
        "        print(keeper.execute_sync(call).status, flush=True)\n"
        "call = ToolCall(call_id='main', name='note', arguments={'text': 'x'})\n"
        "print(keeper.execute_sync(call).status, flush=True)\n"
        "threading.Thread(target=worker).start()\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["SUCCEEDED"] * 4 and "Traceback" not in done.stderr
    with sqlite3.connect(db) as ledger:
        rows = ledger.execute("SELECT status FROM calls").fetchall()
    assert rows == [("SUCCEEDED",)] * 4


def test_a_forked_child_of_a_script_using_execute_sync_exits(tmp_path: Path) -> None:
    """The child closed its copy of the parent's keeper at exit, through an event loop on a
    thread the child does not have: it waited for ever, and the parent waiting for it too."""
    script = tmp_path / "script.py"
    db = tmp_path / "l.db"
    script.write_text(
        "import os, sys\n"
        "from toolkeeper import Keeper, Principal, ToolCall\n"
        "app = Principal(id='app', grants=frozenset({'*'}))\n"
        f"keeper = Keeper(ledger={f'sqlite:///{db}'!r}, principal=app)\n"
        "keeper.add_function(lambda a: a, name='echo', effect='read_only')\n"
        "call = ToolCall(call_id='c1', name='echo', arguments={'a': 1})\n"
        "print(keeper.execute_sync(call).data, flush=True)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    sys.exit(0)  # a worker, or a daemonizing parent: it ends as any process does\n"
        "print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "0"]


def test_threads_calling_execute_sync_at_once_share_one_loop(tmp_path: Path) -> None:
    """Each thread made its own event loop: a call raised "bound to a different event loop"
    or hung, and the same call id could run more than once."""
    import threading

    keeper = Keeper(principal=APP, ledger=f"sqlite:///{tmp_path / 'l.db'}")
    runs: list[int] = []

    @keeper.tool(effect="read_only")
    def lookup(n: int) -> int:
        runs.append(n)
        return n

    results: list[object] = []
    barrier = threading.Barrier(8)

    def call() -> None:
        barrier.wait()
        results.append(
            keeper.execute_sync(ToolCall(call_id="same", name="lookup", arguments={"n": 1}))
        )

    threads = [threading.Thread(target=call) for _ in range(8)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        keeper.close_sync()
    assert len(results) == 8 and runs == [1]
    assert all(getattr(r, "ok", False) for r in results)


def test_keepers_closed_by_close_sync_leave_no_exit_handler_behind(
    tmp_path: Path,
) -> None:
    def use_one(call_id: str) -> None:
        keeper = Keeper(principal=APP, ledger=f"sqlite:///{tmp_path / 'l.db'}")
        keeper.add_function(lambda text: text, name="echo", effect="read_only")
        keeper.execute_sync(ToolCall(call_id=call_id, name="echo", arguments={"text": "a"}))
        keeper.close_sync()

    use_one("first")  # (the first keeper of a process may register the one exit handler)
    handlers = atexit._ncallbacks()
    for i in range(30):
        use_one(f"c{i}")
    assert atexit._ncallbacks() == handlers


def test_closing_on_one_event_loop_waits_for_an_execute_sync_call_and_is_woken_by_it(
    tmp_path: Path,
) -> None:
    """An `async with keeper` on one thread's event loop, closing while `execute_sync` ran a
    call on the facade's own loop, waited on an anyio event that the other loop's thread set:
    the closing loop was never woken, and `aclose` hung for ever."""
    import threading

    keeper = Keeper(principal=APP, ledger=f"sqlite:///{tmp_path / 'l.db'}")
    opened, started, release = threading.Event(), threading.Event(), threading.Event()

    @keeper.tool(effect="write")
    def ship(order_id: str) -> str:
        started.set()
        release.wait(timeout=30)
        return f"shipped {order_id}"

    async def serve() -> None:
        async with anyio.create_task_group() as tg:
            await keeper.open()
            opened.set()
            await anyio.to_thread.run_sync(started.wait)
            tg.start_soon(keeper.aclose)
            await anyio.wait_all_tasks_blocked()  # aclose waits for the call in flight
            release.set()

    loop = threading.Thread(target=anyio.run, args=(serve,), daemon=True)
    results: list[object] = []
    try:
        loop.start()
        opened.wait(timeout=30)
        results.append(
            keeper.execute_sync(ToolCall(call_id="c1", name="ship", arguments={"order_id": "A"}))
        )
        loop.join(timeout=30)
        assert not loop.is_alive()
    finally:
        release.set()
        keeper.close_sync()
    [result] = results
    assert getattr(result, "ok", False)
    with sqlite3.connect(tmp_path / "l.db") as ledger:
        assert ledger.execute("SELECT status FROM calls").fetchall() == [("SUCCEEDED",)]


def test_a_call_ending_after_a_cancelled_aclose_does_not_wait_on_its_stopped_loop(
    tmp_path: Path,
) -> None:
    """`aclose` cancelled while it waited for an `execute_sync` call left behind what wakes it:
    the call, ending, woke that event loop through `from_thread.run_sync`, and blocked the
    facade's loop for ever once the closing loop had stopped (as `run_until_complete` leaves
    it, open)."""
    import asyncio
    import threading

    keeper = Keeper(principal=APP, ledger=f"sqlite:///{tmp_path / 'l.db'}")
    started, release = threading.Event(), threading.Event()

    @keeper.tool(effect="write")
    def ship(order_id: str) -> str:
        started.set()
        release.wait(timeout=30)
        return f"shipped {order_id}"

    def call() -> None:
        # (its keeper's ledger is closed under it: how the call ends does not matter here)
        with contextlib.suppress(Exception):
            keeper.execute_sync(ToolCall(call_id="c1", name="ship", arguments={"order_id": "A"}))

    async def close_cut_short() -> None:
        await anyio.to_thread.run_sync(started.wait)
        async with anyio.create_task_group() as tg:
            tg.start_soon(keeper.aclose)
            await anyio.wait_all_tasks_blocked()  # aclose waits for the call in flight
            tg.cancel_scope.cancel()

    caller = threading.Thread(target=call, daemon=True)
    loop = asyncio.new_event_loop()
    try:
        caller.start()
        loop.run_until_complete(close_cut_short())
        release.set()
        caller.join(timeout=30)
        assert not caller.is_alive()
    finally:
        release.set()
        loop.run_until_complete(asyncio.sleep(0))  # (what the call waits for, had it woken us)
        caller.join(timeout=30)
        loop.close()
        keeper.close_sync()
