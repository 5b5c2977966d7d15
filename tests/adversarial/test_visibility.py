"""Promise 5: a principal only ever sees what it may use.

An attacker probes for tools it was not granted: listing, searching, asking for details, and
calling them by name. A tool it may not use must be indistinguishable from one that does not
exist, on every path: the same code, the same words (but for the name), the same details.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from toolkeeper import Keeper, ToolCall, ToolResult

from .conftest import TRANSPORTS, gateway_client, text_of
from .tools import MALLORY, effects

pytestmark = pytest.mark.anyio

NOWHERE = "adv.nowhere"
"""A tool that does not exist."""
HIDDEN = {
    "permission": "adv.wipe",  # needs admin:wipe
    "tenant": "adv.other_tenant",
    "environment": "adv.staging_only",
}


def _add_hidden(keeper: Keeper) -> None:
    def other_tenant(note: str = "") -> str:
        """Another tenant's tool: wipe everything."""
        return "ran"

    def staging_only(note: str = "") -> str:
        """A staging tool: wipe everything."""
        return "ran"

    keeper.add_function(other_tenant, name=HIDDEN["tenant"], effect="read_only", tenants=["other"])
    keeper.add_function(
        staging_only, name=HIDDEN["environment"], effect="read_only", environments=["staging"]
    )


def _as_seen(result: ToolResult, name: str) -> tuple[Any, ...]:
    """What the refusal tells its caller, with the name it was asked about taken out. The
    suggestions (`did_you_mean`) depend on the name asked; they are checked apart."""
    error = result.error
    assert error is not None
    details = dict(error.details or {})
    suggested = details.pop("did_you_mean", [])
    assert not set(suggested) & set(HIDDEN.values())  # suggestions name visible tools only
    shown = repr(sorted(details.items())).replace(name, "NAME")
    return (result.status, error.code, error.message.replace(name, "NAME"), shown)


async def _ask(keeper: Keeper, path: str, name: str) -> ToolResult:
    arguments = {"path": "/dev/null"}
    if path == "call_tool":
        call = ToolCall(
            call_id=f"c-{name}",
            name="call_tool",
            arguments={"name": name, "arguments": arguments},
            principal=MALLORY,
        )
    else:
        call = ToolCall(call_id=f"c-{name}", name=name, arguments=arguments, principal=MALLORY)
    if path == "execute_many":
        [result] = await keeper.execute_many([call])
        return result
    return await keeper.execute(call)


@pytest.mark.parametrize(
    "reason",
    [
        "permission",
        "tenant",
        "environment",
    ],
)
@pytest.mark.parametrize("path", ["execute", "execute_many"])
async def test_a_hidden_tool_is_refused_as_one_that_does_not_exist_in_the_library(
    keeper: Keeper, path: str, reason: str
) -> None:
    _add_hidden(keeper)
    async with keeper:
        hidden = await _ask(keeper, path, HIDDEN[reason])
        missing = await _ask(keeper, path, NOWHERE)
    assert _as_seen(hidden, HIDDEN[reason]) == _as_seen(missing, NOWHERE)


@pytest.mark.parametrize("reason", sorted(HIDDEN))
async def test_a_hidden_tool_is_refused_as_one_that_does_not_exist_by_call_tool(
    keeper: Keeper, reason: str
) -> None:
    _add_hidden(keeper)
    keeper.enable_discovery()
    async with keeper:
        hidden = await _ask(keeper, "call_tool", HIDDEN[reason])
        missing = await _ask(keeper, "call_tool", NOWHERE)
        found = await keeper.execute(
            ToolCall(
                call_id="s",
                name="search_tools",
                arguments={"query": "wipe everything"},
                principal=MALLORY,
            )
        )
        details = await keeper.execute(
            ToolCall(
                call_id="d",
                name="get_tool_details",
                arguments={"names": [HIDDEN[reason], NOWHERE]},
                principal=MALLORY,
            )
        )
    assert _as_seen(hidden, HIDDEN[reason]) == _as_seen(missing, NOWHERE)
    assert found.ok and HIDDEN[reason] not in repr(found.data)
    assert details.ok and details.data["tools"] == []
    assert sorted(details.data["unknown"]) == sorted([HIDDEN[reason], NOWHERE])


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_gateway_client_cannot_tell_a_hidden_tool_from_a_missing_one(
    tmp_path: Path, transport: str
) -> None:
    """Nor run it: the refusals leave no effect behind."""
    effect_file = tmp_path / "effects.txt"
    async with gateway_client(transport, tmp_path, "reader") as reader:
        listed = {t.name for t in (await reader.list_tools()).tools}
        refusals = []
        for name in ("adv.wipe", "adv.append", "t.slow_append", NOWHERE):
            with pytest.raises(MCPError) as refused:
                await reader.call_tool(name, {"path": str(effect_file), "line": "x"})
            refusals.append(
                (refused.value.error.code, refused.value.error.message.replace(name, "NAME"))
            )
    assert listed == {"adv.read", "adv.read_file", "adv.inspect", "adv.login"}
    assert len(set(refusals)) == 1
    assert effects(effect_file) == []


def _refusal(result: Any, name: str) -> str:
    """A gateway's refusal as its client reads it, the name asked and the suggestions (which
    depend on it, and must name no hidden tool) taken out."""
    refusal = json.loads(text_of(result))
    suggested = refusal["error"].get("details", {}).pop("did_you_mean", [])
    assert not {"adv.wipe", "adv.grant_admin"} & set(suggested)
    return json.dumps(refusal).replace(name, "NAME")


async def test_a_progressive_client_never_finds_a_hidden_tool(tmp_path: Path) -> None:
    async with gateway_client("http", tmp_path, "prog") as prog:
        listed = {t.name for t in (await prog.list_tools()).tools}
        found = await prog.call_tool("search_tools", {"query": "wipe delete everything admin"})
        details = await prog.call_tool("get_tool_details", {"names": ["adv.wipe", NOWHERE]})
        hidden = await prog.call_tool(
            "call_tool", {"name": "adv.wipe", "arguments": {"path": "/dev/null"}}
        )
        missing = await prog.call_tool(
            "call_tool", {"name": NOWHERE, "arguments": {"path": "/dev/null"}}
        )
    assert listed == {"search_tools", "get_tool_details", "call_tool"}
    names = [t["name"] for t in (found.structured_content or {})["tools"]]
    assert not {"adv.wipe", "adv.grant_admin"} & set(names)
    assert (details.structured_content or {})["tools"] == []
    seen = [_refusal(hidden, "adv.wipe"), _refusal(missing, NOWHERE)]
    assert seen[0] == seen[1]
    assert (hidden.meta or {}).get("dev.toolkeeper/error-code") == "UNKNOWN_TOOL"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_gateway_client_is_told_the_close_names_it_may_see(
    tmp_path: Path, transport: str
) -> None:
    async with gateway_client(transport, tmp_path, "reader") as reader:
        listed = {t.name for t in (await reader.list_tools()).tools}
        suggestions = {}
        for name in ("adv.reed", "adv.wipes"):  # (close to a visible tool, to a hidden one)
            with pytest.raises(MCPError) as refused:
                await reader.call_tool(name, {})
            suggestions[name] = (refused.value.error.data or {}).get("did_you_mean", [])
    assert suggestions["adv.reed"][0] == "adv.read"
    assert set(suggestions["adv.wipes"]) <= listed


async def test_call_tool_suggests_close_names_the_principal_may_use(keeper: Keeper) -> None:
    _add_hidden(keeper)
    keeper.enable_discovery()
    async with keeper:
        near_visible = await _ask(keeper, "call_tool", "adv.reed")
        near_hidden = await _ask(keeper, "call_tool", HIDDEN["tenant"][:-1])
    assert near_visible.error is not None and near_visible.error.code == "UNKNOWN_TOOL"
    assert near_visible.error.details["did_you_mean"][0] == "adv.read"
    assert near_hidden.error is not None
    assert not set(near_hidden.error.details.get("did_you_mean", [])) & set(HIDDEN.values())
