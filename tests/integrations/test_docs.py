"""docs/integrations.md: each framework's example runs as written, and its refund is
approved, run once and recorded."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest

from toolkeeper import CallStatus, Keeper

PAGE = Path(__file__).parents[2] / "docs" / "integrations.md"

SECTIONS = {
    "pydantic-ai": "pydantic_ai",
    "OpenAI Agents SDK": "agents",
    "LangChain and LangGraph": "langgraph",
}


def example(section: str) -> str:
    found = re.search(rf"## {section}\n.*?```python[^\n]*\n(.*?)```", PAGE.read_text(), re.S)
    assert found is not None, section
    return found.group(1)


async def recorded(path: Path) -> CallStatus | None:
    async with Keeper(ledger=path) as keeper:
        record = await keeper.store.get_call("ticket-7", "call_1")
        return None if record is None else record.status


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_the_example_runs_and_its_refund_is_recorded_once_approved(
    section: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip(SECTIONS[section])
    monkeypatch.chdir(tmp_path)
    exec(compile(example(section), f"{PAGE}:{section}", "exec"), {"__name__": "__main__"})
    assert capsys.readouterr().out.splitlines()[-1] == "Refunded."
    assert anyio.run(recorded, tmp_path / "shop.db") is CallStatus.SUCCEEDED
