"""`FastCalls`, the stdio gateway's own path for `tools/call`, driven line by line in-process
(the wire shapes are checked against a real gateway process in `test_stdio_calls.py`)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from toolkeeper import Keeper, Principal
from toolkeeper.server._fastcall import FastCalls
from toolkeeper.server.gateway import Gateway, GatewayPrincipal

from ..conftest import APP

pytestmark = pytest.mark.anyio

ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _call(request_id: Any, n: int) -> dict[str, Any]:
    params = {"name": "hold", "arguments": {"n": n}, "_meta": ENVELOPE}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def _cancel(request_id: Any) -> dict[str, Any]:
    params = {"requestId": request_id}
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}


async def test_a_request_id_reused_after_a_cancellation_can_be_cancelled_again() -> None:
    """A client may use the id of a call it cancelled for a new call. The cancelled call's
    handler, ending after the new call was taken, dropped the new call's cancel scope: a
    cancellation of the new call went unheard and the call ran on."""
    keeper = Keeper(principal=APP, ledger="memory://", audit=None)
    started: list[int] = []
    cancelled: list[int] = []

    @keeper.tool(effect="read_only")
    async def hold(n: int) -> str:
        """Wait until cancelled."""
        started.append(n)
        try:
            await anyio.Event().wait()
        except anyio.get_cancelled_exc_class():
            cancelled.append(n)
            raise
        return "never"

    who = GatewayPrincipal(
        principal=Principal(id="a", grants=frozenset({"*"})), token=None, exposure="direct"
    )
    lines: list[bytes] = []

    async def write(line: bytes) -> None:
        lines.append(line)

    with anyio.fail_after(10):
        async with keeper, anyio.create_task_group() as tg:
            calls = FastCalls(
                Gateway(keeper, [who]), who, server_info={"name": "t"}, write=write, tasks=tg
            )
            assert calls.take(_call(7, 1))
            await anyio.wait_all_tasks_blocked()
            assert calls.take(_cancel(7))
            assert calls.take(_call(7, 2))  # before the cancelled call's handler has ended
            await anyio.wait_all_tasks_blocked()
            assert started == [1, 2] and cancelled == [1]
            assert not calls.take(_call(7, 3))  # in flight: the SDK answers a duplicate id
            assert calls.take(_cancel(7))
            await anyio.wait_all_tasks_blocked()
            assert cancelled == [1, 2]
    assert lines == []  # a cancelled request is not answered
