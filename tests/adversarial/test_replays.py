"""A replay is what a client can rely on: told apart from a run, and valid for the tool it
answers for, including a call a person settled after its outcome was unknown."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from toolkeeper.server import Deployment

from .conftest import TOKENS, ClientFactory, code_of

pytestmark = pytest.mark.anyio


async def test_a_settled_call_replays_a_result_the_official_client_takes(
    http_client: ClientFactory, deployment: Deployment, tmp_path: Path
) -> None:
    marker = tmp_path / "marker.txt"
    meta = {"dev.toolkeeper/call-id": "client-7"}
    async with http_client(TOKENS["mallory"]) as mallory:
        first = await mallory.call_tool("t.die_midway", {"path": str(marker)}, meta=meta)
        assert code_of(first) == "UNKNOWN_OUTCOME"
        [record] = await deployment.keeper.unknown()
        await deployment.keeper.settle(
            record.task_id, record.call_id, succeeded=True, by="ops", note="it went through"
        )
        with anyio.fail_after(30):
            replayed = await mallory.call_tool("t.die_midway", {"path": str(marker)}, meta=meta)
    assert not replayed.is_error or code_of(replayed) is not None
    assert marker.read_text() == "started\n"


async def test_a_client_can_tell_a_replay_from_a_run(http_client: ClientFactory) -> None:
    meta = {"dev.toolkeeper/call-id": "client-8"}
    async with http_client(TOKENS["mallory"]) as mallory:
        ran = await mallory.call_tool("adv.read", {"text": "hi"}, meta=meta)
        replayed = await mallory.call_tool("adv.read", {"text": "hi"}, meta=meta)
    assert (ran.meta or {}).get("dev.toolkeeper/call-id") == "client-8"
    assert (replayed.meta or {}).get("dev.toolkeeper/call-id") == "client-8"
    assert ran.meta != replayed.meta
