"""PostgreSQL goes away under load and comes back (a restart, a failover): meanwhile calls are
refused with a retryable code and nothing runs; once it is back, the same keeper runs them
again, each once, and no call is lost or left RUNNING.

The database is cut off by a TCP relay the test owns between the keeper and the real server:
closing the relay drops every connection and refuses new ones, as a restart does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

import anyio
import anyio.abc
import pytest

from toolkeeper import CallStatus, ErrorCode, Keeper, ToolCall
from toolkeeper.ledger.postgres import PostgresStore

from ..conftest import APP, postgres_url

pytestmark = pytest.mark.anyio


class Relay:
    """Forwards TCP connections from a local port to PostgreSQL while it is up."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0
        self._scope: anyio.CancelScope | None = None

    @asynccontextmanager
    async def up(self, tg: anyio.abc.TaskGroup) -> AsyncIterator[None]:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=self.port)
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        scope = anyio.CancelScope()

        async def serve() -> None:
            with scope:
                async with listener:
                    await listener.serve(self._forward)

        tg.start_soon(serve)
        try:
            yield
        finally:
            scope.cancel()  # (every forwarded connection with it: the server "restarts")
            await anyio.wait_all_tasks_blocked()

    async def _forward(self, client: anyio.abc.SocketStream) -> None:
        async with client, await anyio.connect_tcp(*self.target) as server:

            async def pump(a: anyio.abc.SocketStream, b: anyio.abc.SocketStream) -> None:
                try:
                    async for chunk in a:
                        await b.send(chunk)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    pass
                tg.cancel_scope.cancel()

            async with anyio.create_task_group() as tg:
                tg.start_soon(pump, client, server)
                tg.start_soon(pump, server, client)


def _through(url: str, port: int) -> str:
    parts = urlsplit(url)
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{port}"))


async def test_a_ledger_that_goes_away_refuses_calls_retryably_and_runs_them_once_back(
    pg_schema: str,
) -> None:
    url = postgres_url()
    target = urlsplit(url)
    relay = Relay((target.hostname or "127.0.0.1", target.port or 5432))
    effects: list[str] = []

    async with anyio.create_task_group() as tg:
        async with relay.up(tg):
            store = PostgresStore(
                _through(url, relay.port), schema=pg_schema, max_size=4, timeout=1.0
            )
            keeper = Keeper(principal=APP, ledger=store)

            @keeper.tool(effect="write")
            async def pay(ref: str) -> str:
                """Pay."""
                effects.append(ref)
                return ref

            await keeper.open()
            before = await keeper.execute_many(
                [
                    ToolCall(call_id=f"a{i}", name="pay", arguments={"ref": f"a{i}"})
                    for i in range(8)
                ]
            )
        # The database is gone: every call is refused, retryably, and nothing runs.
        during = await keeper.execute_many(
            [ToolCall(call_id=f"b{i}", name="pay", arguments={"ref": f"b{i}"}) for i in range(8)]
        )
        async with relay.up(tg):  # back, on the same address: the same keeper goes on
            again = [
                ToolCall(call_id=f"b{i}", name="pay", arguments={"ref": f"b{i}"}) for i in range(8)
            ] + [
                ToolCall(call_id=f"a{i}", name="pay", arguments={"ref": f"a{i}"}) for i in range(8)
            ]
            with anyio.fail_after(60):
                # As a client does with a retryable error: propose the same calls again, until
                # the pool has connected anew (its reconnection backs off: about 7 s here).
                while True:
                    after = await keeper.execute_many(again)
                    if all(r.status is CallStatus.SUCCEEDED for r in after):
                        break
                    assert all(r.error is not None and r.error.retryable for r in after if not r.ok)
                    await anyio.sleep(0.1)
            records = await store.list_calls()
            await keeper.aclose()
        tg.cancel_scope.cancel()

    assert all(r.status is CallStatus.SUCCEEDED for r in before)
    assert all(r.error is not None and r.error.retryable for r in during), during
    assert {r.error.code for r in during if r.error} <= {ErrorCode.INTERNAL_ERROR}
    assert all(r.status is CallStatus.SUCCEEDED for r in after)
    assert [r.replayed for r in after[8:]] == [True] * 8
    # Each call ran exactly once, and each has its one record, ended.
    assert sorted(effects) == sorted([f"a{i}" for i in range(8)] + [f"b{i}" for i in range(8)])
    assert sorted(r.call_id for r in records) == sorted(effects)
    assert {r.status for r in records} == {CallStatus.SUCCEEDED}
