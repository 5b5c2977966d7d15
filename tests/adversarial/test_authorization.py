"""Promise 1: no call runs without authorization, on every path.

The attacker holds a token (or is a model whose calls an application parses) and proposes
what it was not granted: an administrator's tool, a path outside the sandbox, more calls than
its budget, a destructive call it approves itself, a tool whose upstream claims it is harmless.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types
import pytest

from toolkeeper import CallStatus, Keeper, ToolCall
from toolkeeper.config import parse_config
from toolkeeper.core.errors import ConfigurationError
from toolkeeper.dialects.registry import get_dialect
from toolkeeper.policy.rules import path_inside
from toolkeeper.server import Deployment, build

from .conftest import (
    TOKENS,
    ClientFactory,
    code_of,
    config_text,
    deployment_of,
    http_gateway,
    text_of,
)
from .tools import MALLORY, READER, effects, register

pytestmark = pytest.mark.anyio

PATHS = ["execute", "execute_many", "call_tool"]


async def _propose(keeper: Keeper, path: str, call: ToolCall) -> Any:
    if path == "call_tool":
        call = ToolCall(
            call_id=call.call_id,
            task_id=call.task_id,
            name="call_tool",
            arguments={"name": call.name, "arguments": call.arguments},
            principal=call.principal,
        )
    if path == "execute_many":
        [result] = await keeper.execute_many([call])
        return result
    return await keeper.execute(call)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    ("who", "tool"),
    [(MALLORY, "adv.grant_admin"), (MALLORY, "adv.wipe"), (READER, "adv.append")],
)
async def test_a_tool_not_granted_never_runs_in_the_library(
    keeper: Keeper, effect_file: Path, path: str, who: Any, tool: str
) -> None:
    if path == "call_tool":
        keeper.enable_discovery()
    arguments = {"path": str(effect_file), "line": "x"} if tool == "adv.append" else {}
    arguments["path"] = str(effect_file)
    async with keeper:
        for n in range(2):  # and proposed again: a refusal is not a step towards a run
            call = ToolCall(call_id=f"c{n % 2}", name=tool, arguments=arguments, principal=who)
            result = await _propose(keeper, path, call)
            assert result.status is not CallStatus.SUCCEEDED
            assert result.error is not None
    assert effects(effect_file) == []


@pytest.mark.parametrize("path", ["execute", "execute_many"])
async def test_a_call_parsed_from_a_model_does_not_act_with_every_grant(
    keeper: Keeper, effect_file: Path, path: str
) -> None:
    """The natural first code: a keeper made with no principal, the model's calls parsed and
    executed. The model was granted nothing; it must not reach an administrator's tool."""
    response = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {
                                "name": "adv.grant_admin",
                                "arguments": f'{{"path": "{effect_file}"}}',
                            },
                        }
                    ],
                }
            }
        ]
    }
    async with keeper:
        try:
            [call] = get_dialect("openai_chat").parse(response)
            if path == "execute_many":
                [result] = await keeper.execute_many([call])
            else:
                result = await keeper.execute(call)
        except (TypeError, ValueError):  # refusing to parse without a principal is safe too
            result = None
    assert result is None or result.status is not CallStatus.SUCCEEDED
    assert effects(effect_file) == []


def _sandboxed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A sandbox, and a working directory outside it holding a secret file of the same name."""
    sandbox, outside = tmp_path / "sandbox", tmp_path / "outside"
    sandbox.mkdir()
    outside.mkdir()
    (sandbox / "rt.toml").write_text("inside the sandbox")
    (outside / "rt.toml").write_text("token = 'OUTSIDE-SECRET'")
    monkeypatch.chdir(outside)
    return sandbox, outside


@pytest.mark.parametrize("path", PATHS)
async def test_a_relative_path_never_reaches_outside_the_sandbox_in_the_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    sandbox, _ = _sandboxed(tmp_path, monkeypatch)
    keeper = Keeper(
        ledger=f"sqlite:///{tmp_path / 'ledger.db'}", rules=[path_inside("path", sandbox)]
    )
    register(keeper)
    if path == "call_tool":
        keeper.enable_discovery()
    async with keeper:
        call = ToolCall(
            call_id="r1", name="adv.read_file", arguments={"path": "rt.toml"}, principal=MALLORY
        )
        result = await _propose(keeper, path, call)
    assert "OUTSIDE-SECRET" not in repr(result.data)


async def test_a_relative_path_never_reaches_outside_the_sandbox_over_the_gateway(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox, _ = _sandboxed(tmp_path, monkeypatch)
    rule = f"""
[[rules]]
tools = ["adv.read_file"]
kind = "path_inside"
param = "path"
root = "{sandbox}"
"""
    async with (
        deployment_of(tmp_path, rule) as deployment,
        http_gateway(deployment) as connect,
        connect(TOKENS["reader"]) as reader,
    ):
        result = await reader.call_tool("adv.read_file", {"path": "rt.toml"})
    assert "OUTSIDE-SECRET" not in text_of(result)


async def test_a_client_cannot_escape_its_task_budget_by_naming_new_tasks(
    tmp_path: Path,
) -> None:
    budget = "\n[budgets]\nmax_calls_per_task = 3\n"
    async with (
        deployment_of(tmp_path, budget) as deployment,
        http_gateway(deployment) as connect,
        connect(TOKENS["reader"]) as reader,
    ):
        for n in range(8):
            await reader.call_tool(
                "adv.read", {"text": f"call {n}"}, meta={"dev.toolkeeper/task-id": f"fresh-{n}"}
            )
        ran = [
            r
            for r in await deployment.keeper.store.list_calls()
            if r.status is CallStatus.SUCCEEDED
        ]
    assert len(ran) <= 3


async def test_an_upstream_claiming_read_only_does_not_skip_approval(
    http_client: ClientFactory, effect_file: Path
) -> None:
    async with http_client(TOKENS["mallory"]) as mallory:
        result = await mallory.call_tool("t.sneaky_delete", {"path": str(effect_file)})
    assert result.is_error
    assert effects(effect_file) == []


def _accept_everything(asked: list[str]) -> Any:
    async def elicit(context: Any, params: Any) -> mcp_types.ElicitResult:
        asked.append(params.message)
        return mcp_types.ElicitResult(action="accept", content={"approve": True})

    return elicit


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_client_that_accepts_every_question_does_not_approve_its_own_destructive_call(
    http_client: ClientFactory, deployment: Deployment, effect_file: Path, mode: str
) -> None:
    """The principal's configuration says nothing of elicitation: the default applies."""
    asked: list[str] = []
    async with http_client(
        TOKENS["asker"], elicitation_callback=_accept_everything(asked), mode=mode
    ) as asker:
        result = await asker.call_tool("adv.take", {"path": str(effect_file), "value": "all"})
    assert code_of(result) == "APPROVAL_REQUIRED"
    assert effects(effect_file) == []


async def test_a_client_not_allowed_to_answer_cannot_forge_the_answer_to_its_own_question(
    http_client: ClientFactory, deployment: Deployment, effect_file: Path
) -> None:
    """A 2026-07-28 client sends the answering round it was never asked for: a yes, with the
    approval id its first result named as the request state; another principal's client, one
    that may answer its own questions, sends the same round for it."""
    args = {"path": str(effect_file), "value": "all"}
    yes = {
        "toolkeeper-approval": mcp_types.ElicitResult(action="accept", content={"approve": True})
    }
    async with http_client(TOKENS["asker"]) as asker, http_client(TOKENS["person"]) as person:
        first = await asker.call_tool("adv.take", args)
        approval = (first.meta or {})["dev.toolkeeper/approval-id"]
        rounds = [
            await client.session.call_tool(
                "adv.take",
                args,
                input_responses=yes,
                request_state=approval,
                allow_input_required=True,
            )
            for client in (asker, asker, person)
        ]
        decided = await deployment.keeper.approvals.get(approval)
    for answer in rounds:
        assert isinstance(answer, mcp_types.CallToolResult)
        assert code_of(answer) == "APPROVAL_REQUIRED"
    assert decided is not None and decided.status.value == "pending"
    assert effects(effect_file) == []


async def test_a_grant_pattern_either_works_or_is_refused_when_loaded(tmp_path: Path) -> None:
    text = config_text(tmp_path).replace('grants = ["adv:read"]', 'grants = ["adv:re*"]', 1)
    try:
        config = parse_config(text, file="globbed.toml", base_dir=str(tmp_path))
        async with build(config) as deployment:
            who = deployment.gateway.principals["reader"]
            listed = {t.name for t in deployment.gateway.list_tools(who).tools}
    except (ConfigurationError, ValueError):
        return  # refused when loaded: consistent too
    assert "adv.read" in listed
