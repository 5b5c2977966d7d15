"""No client freezes the process: an oversized proposal, made twice, is refused both times at
once, in the library and over the gateway, and `serve` still stops when asked. Nor does a
proposal no ledger can store end in a traceback.

A proposal that spins holds the event loop, where no anyio timeout can end it: each attack
runs in a process of its own, under a watchdog or a hard timeout, so a spin fails the test
instead of hanging the run.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests.server.test_stdio_calls import RawSession
from toolkeeper import ErrorCode, Keeper, ToolCall
from toolkeeper.ledger import PostgresStore

from ..conftest import postgres_url
from .conftest import MCP_INITIALIZE_LINES, ROOT, stdio_params
from .tools import MALLORY, register

pytestmark = pytest.mark.anyio

CHILD = Path(__file__).with_name("oversized_child.py")
HUGE = "x" * (1024 * 1024 + 10)


@pytest.mark.parametrize("path", ["execute", "execute_many", "call_tool"])
def test_an_oversized_call_proposed_twice_is_refused_twice_at_once(
    tmp_path: Path, path: str
) -> None:
    child = subprocess.run(
        [sys.executable, str(CHILD), f"sqlite:///{tmp_path / 'x.db'}", path],
        capture_output=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert child.returncode == 0, child.stderr.decode()[-2000:]
    answers = json.loads(child.stdout)
    assert [a["code"] for a in answers] == ["PAYLOAD_TOO_LARGE", "PAYLOAD_TOO_LARGE"]
    assert all(a["seconds"] < 2.0 for a in answers), answers


async def test_an_oversized_call_proposed_twice_to_the_gateway_does_not_freeze_it(
    config_file: Path,
) -> None:
    params = stdio_params(config_file)
    async with await anyio.open_process(
        [params.command, *params.args],
        env={**os.environ, **(params.env or {})},
        stderr=subprocess.DEVNULL,
    ) as process:
        try:
            gateway = RawSession(process)
            with anyio.fail_after(30):  # (starting the gateway and its upstream)
                for line in MCP_INITIALIZE_LINES:
                    await gateway.send(line)
                await gateway.answer(1)
            with anyio.fail_after(20):  # (for ever, not a busy machine)
                for request_id in (2, 3):
                    await gateway.call(request_id, "adv.read", {"text": HUGE})
                    answer = await gateway.answer(request_id)
                    meta = answer["result"].get("_meta", {})
                    assert meta.get("dev.toolkeeper/error-code") == "PAYLOAD_TOO_LARGE"
                await gateway.call(4, "adv.read", {"text": "still here"})
                assert "still here" in json.dumps(await gateway.answer(4))
            process.send_signal(signal.SIGTERM)
            with anyio.fail_after(10):
                await process.wait()
        finally:
            if process.returncode is None:
                process.kill()


@pytest.mark.parametrize(
    ("backend", "name"),
    [("sqlite", "adv.\ud800"), pytest.param("postgresql", "adv.\x00", marks=pytest.mark.postgres)],
)
async def test_a_tool_name_no_ledger_can_store_is_refused_and_recorded_without_a_traceback(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    request: pytest.FixtureRequest,
    backend: str,
    name: str,
) -> None:
    if backend == "sqlite":
        keeper = Keeper(ledger=f"sqlite:///{tmp_path / 'x.db'}")
    else:
        schema = request.getfixturevalue("pg_schema")
        keeper = Keeper(ledger=PostgresStore(postgres_url(), schema=schema))
    register(keeper)
    with caplog.at_level(logging.WARNING):
        async with keeper:
            result = await keeper.execute(
                ToolCall(call_id="odd", name=name, arguments={}, principal=MALLORY)
            )
            records = await keeper.store.list_calls()
    assert result.error is not None and result.error.code is ErrorCode.UNKNOWN_TOOL
    assert [r.call_id for r in records] == ["odd"]
    assert not [r for r in caplog.records if r.exc_info]
