"""The demo scenario a newcomer runs with `make run`."""

from pathlib import Path

import pytest

from toolkeeper import CallStatus, ErrorCode
from toolkeeper.demo import run_demo

pytestmark = pytest.mark.anyio


async def test_demo_publishes_once_and_refuses_what_it_must(tmp_path: Path) -> None:
    lines: list[str] = []
    results = await run_demo(tmp_path, out=lines.append)
    statuses = [r.status for r in results]
    assert statuses == [
        CallStatus.SUCCEEDED,  # search
        CallStatus.SUCCEEDED,  # read
        CallStatus.SUCCEEDED,  # write inside the sandbox
        CallStatus.REJECTED,  # write outside the sandbox
        CallStatus.AWAITING_APPROVAL,  # publish
        CallStatus.SUCCEEDED,  # approved, runs
        CallStatus.SUCCEEDED,  # replay
        CallStatus.REJECTED,  # same id, changed arguments
        CallStatus.AWAITING_APPROVAL,  # new id, changed arguments
    ]
    codes = [r.error.code if r.error else None for r in results]
    assert codes[3] is ErrorCode.PERMISSION_DENIED
    assert codes[7] is ErrorCode.CALL_ID_CONFLICT
    assert results[6].replayed
    log = (tmp_path / "published" / "log.txt").read_text().splitlines()
    assert len(log) == 1
    assert not (tmp_path.parent.parent / "etc" / "cron.d" / "job").exists()
    assert any("the ledger:" in line for line in lines)


async def test_a_demo_in_a_temporary_folder_says_how_to_keep_its_ledger() -> None:
    lines: list[str] = []
    await run_demo(None, out=lines.append)
    assert "toolkeeper demo --dir DIR" in lines[-1]


async def test_a_demo_in_a_kept_folder_does_not_say_it_was_removed(tmp_path: Path) -> None:
    lines: list[str] = []
    await run_demo(tmp_path, out=lines.append)
    assert not any("temporary folder" in line for line in lines)
