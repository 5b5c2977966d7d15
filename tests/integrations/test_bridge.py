"""What the integrations share: the tools exported as the model sees them, and imports that
stay out of the way."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from toolkeeper import ErrorCode, Keeper, Principal, ToolResult
from toolkeeper.integrations._bridge import RunScope, export, model_text, run_call, tools_for

from .shop import ALICE, shop

ADMIN = Principal(id="root", grants=frozenset({"*"}))

FRAMEWORKS = {
    "pydantic_ai": ("pydantic_ai", "pydantic-ai"),
    "openai_agents": ("agents", "openai-agents"),
    "langchain": ("langchain_core", "langchain"),
}


CHECK = """
import json, sys
import toolkeeper.integrations
loaded = sorted({'pydantic_ai', 'agents', 'langchain_core'} & set(sys.modules))
said = {}
for module, (framework, _) in FRAMEWORKS.items():
    sys.modules[framework] = None
    try:
        __import__('toolkeeper.integrations.' + module)
    except ImportError as exc:
        said[module] = str(exc)
print(json.dumps({'loaded': loaded, 'said': said}))
"""


def test_the_package_imports_no_framework_and_a_missing_one_names_its_extra() -> None:
    code = f"FRAMEWORKS = {FRAMEWORKS!r}\n{CHECK}"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    found = json.loads(out.stdout)
    assert found["loaded"] == []
    assert sorted(found["said"]) == sorted(FRAMEWORKS)
    for module, (_, extra) in FRAMEWORKS.items():
        assert f'pip install "toolkeeper[{extra}]"' in found["said"][module]


def test_tools_are_exported_with_model_visible_fields_only() -> None:
    keeper = shop().keeper
    [get, refund] = tools_for(keeper, ALICE)
    assert (get.name, refund.name) == ("orders_get", "orders_refund")
    assert get.spec.name == "orders.get"
    assert get.parameters == dict(get.spec.input_schema)
    assert get.description == get.spec.description
    for field in ("permissions", "effect", "orders:read", "read_only"):
        assert field not in repr((get.name, get.description, get.parameters))


def test_names_the_vendor_would_refuse_are_rewritten_uniquely() -> None:
    keeper = Keeper(ledger="memory://")

    @keeper.tool(name="a.b", effect="read_only")
    def dotted() -> str:
        return "dotted"

    @keeper.tool(name="a_b", effect="read_only")
    def underscored() -> str:
        return "underscored"

    names = [e.name for e in export(keeper.catalog.specs())]
    assert len(set(names)) == 2 and "a_b" in names
    assert all(name.replace("_", "").isalnum() for name in names)


def test_a_principal_without_grants_is_shown_nothing() -> None:
    assert tools_for(shop().keeper, Principal(id="guest")) == []


@pytest.fixture
async def keeper() -> AsyncIterator[Keeper]:
    keeper = Keeper(ledger="memory://", max_argument_bytes=10_000)

    @keeper.tool(name="logs.dump", effect="read_only")
    def dump() -> str:
        return "x" * 300_000

    @keeper.tool(name="vault.open", effect="read_only")
    def open_vault(code: str) -> str:
        raise RuntimeError(f"upstream rejected password={code} at /srv/vault.py:12")

    async with keeper:
        yield keeper


async def _run(keeper: Keeper, tool: str, arguments: Any) -> ToolResult:
    return await run_call(
        keeper,
        tool=tool,
        wire_name=tool.replace(".", "_"),
        call_id="c1",
        arguments=arguments,
        scope=RunScope(principal=ADMIN),
        task_id="t1",
        framework="test",
    )


@pytest.mark.anyio
async def test_a_huge_result_is_cut_for_the_model_and_kept_whole(keeper: Keeper) -> None:
    result = await _run(keeper, "logs.dump", {})
    text = model_text(result)
    assert 100_000 <= len(text) < 101_000 and "c1" in text[100_000:]
    record = await keeper.store.get_call("t1", "c1")
    assert record is not None and len(record.result) == 300_000


@pytest.mark.anyio
async def test_huge_arguments_are_refused_coded(keeper: Keeper) -> None:
    result = await _run(keeper, "logs.dump", {"pad": "y" * 50_000})
    assert result.error is not None and result.error.code is ErrorCode.PAYLOAD_TOO_LARGE


@pytest.mark.anyio
async def test_a_failing_tool_reaches_the_model_coded_without_its_secrets(keeper: Keeper) -> None:
    text = model_text(await _run(keeper, "vault.open", {"code": "hunter2"}))
    assert json.loads(text)["error"]["code"] == ErrorCode.TOOL_ERROR
    for leaked in ("hunter2", "vault.py", "Traceback"):
        assert leaked not in text


def test_a_listing_is_the_callers_own_and_follows_a_changed_tool() -> None:
    keeper = shop().keeper
    [get, _] = tools_for(keeper, ALICE)
    get.parameters["properties"].clear()  # a framework editing what it was given
    [again, _] = tools_for(keeper, ALICE)
    assert again.parameters == dict(again.spec.input_schema)

    @keeper.tool(name="orders.get", effect="read_only", permissions=["orders:read"], version="2")
    def get_order_v2(order_id: str, currency: str = "EUR") -> str:
        """Look an order up, in a currency."""
        return order_id

    [changed, _] = tools_for(keeper, ALICE)
    assert changed.description == "Look an order up, in a currency."
    assert "currency" in changed.parameters["properties"]


@pytest.mark.anyio
@pytest.mark.parametrize("call_id", ["", "c\x00", "c" * 10_000])
async def test_a_strange_call_id_is_refused_coded_and_runs_nothing(
    keeper: Keeper, call_id: str
) -> None:
    result = await run_call(
        keeper,
        tool="logs.dump",
        wire_name="logs_dump",
        call_id=call_id,
        arguments={},
        scope=RunScope(principal=ADMIN),
        task_id="t1",
        framework="test",
    )
    assert result.error is not None and result.error.code is ErrorCode.INVALID_CALL_ID
    assert result.attempt == 0
