"""What a principal sees and what each tools/call does: the ledger, approvals (by error result,
or by elicitation in both protocol eras), an upstream dying mid-call, progressive exposure."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Annotated, Any

import anyio
import mcp_types
import pytest
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, Field, SecretStr

from toolkeeper import Keeper
from toolkeeper.config import parse_config
from toolkeeper.core import CallStatus, Effect, Principal
from toolkeeper.ledger.base import ApprovalStatus
from toolkeeper.ledger.sqlite import SQLiteStore
from toolkeeper.policy.approvals import Approvals
from toolkeeper.schema.canonical import canonical_json
from toolkeeper.server import Deployment, build
from toolkeeper.server.gateway import Gateway, GatewayPrincipal

from ..conftest import APP
from .conftest import TOKENS, UPSTREAM, ClientFactory, config_text, connected, serving

pytestmark = pytest.mark.anyio


def code_of(result: mcp_types.CallToolResult) -> str | None:
    return (result.meta or {}).get("dev.toolkeeper/error-code")


async def test_repeated_reads_run_each_time_and_are_each_recorded(
    http_client: ClientFactory, deployment: Deployment
) -> None:
    async with http_client(TOKENS["alice"]) as alice:
        first = await alice.call_tool("demo.list_notes", {})
        await alice.call_tool("demo.add_note", {"text": "x"})
        second = await alice.call_tool("demo.list_notes", {})
    assert first.structured_content is None or first.structured_content == {"result": []}
    assert code_of(second) is None
    assert "x" in second.content[0].text  # type: ignore[union-attr]
    reads = [r for r in await deployment.keeper.store.list_calls() if r.tool == "demo.list_notes"]
    assert len(reads) == 2
    assert {r.status for r in reads} == {CallStatus.SUCCEEDED}


async def test_approval_is_named_in_the_error_and_the_retry_runs_once_when_approved(
    http_client: ClientFactory, deployment: Deployment
) -> None:
    keeper = deployment.keeper
    async with http_client(TOKENS["alice"]) as alice:
        await alice.call_tool("demo.add_note", {"text": "a"})
        asked = await alice.call_tool("demo.clear_notes", {})
        assert asked.is_error
        assert code_of(asked) == "APPROVAL_REQUIRED"
        approval_id = (asked.meta or {})["dev.toolkeeper/approval-id"]
        assert f"toolkeeper approvals approve {approval_id}" in asked.content[0].text  # type: ignore[union-attr]
        assert "make the same call again" in asked.content[0].text  # type: ignore[union-attr]
        still_waiting = await alice.call_tool("demo.clear_notes", {})
        assert code_of(still_waiting) == "APPROVAL_REQUIRED"
        await keeper.approvals.approve(approval_id, by="ops", note="fine")
        ran = await alice.call_tool("demo.clear_notes", {})
        again = await alice.call_tool("demo.clear_notes", {})
    assert not ran.is_error
    assert ran.content[0].text == "1 notes deleted"  # type: ignore[union-attr]
    assert code_of(again) == "APPROVAL_REQUIRED"
    assert (again.meta or {})["dev.toolkeeper/approval-id"] != approval_id
    clears = [r for r in await keeper.store.list_calls() if r.tool == "demo.clear_notes"]
    assert sorted(r.status for r in clears) == [
        CallStatus.AWAITING_APPROVAL,
        CallStatus.SUCCEEDED,
    ]


def answering(approve: bool | None, asked: list[str]) -> Any:
    async def elicit(context: Any, params: Any) -> mcp_types.ElicitResult:
        asked.append(params.message)
        if approve is None:
            return mcp_types.ElicitResult(action="cancel")
        if not approve:
            return mcp_types.ElicitResult(action="decline")
        return mcp_types.ElicitResult(action="accept", content={"approve": True})

    return elicit


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_elicitation_asks_the_user_and_an_accepted_call_runs(
    http_client: ClientFactory, deployment: Deployment, mode: str
) -> None:
    asked: list[str] = []
    async with http_client(
        TOKENS["alice"], elicitation_callback=answering(True, asked), mode=mode
    ) as alice:
        result = await alice.call_tool("demo.clear_notes", {})
    assert not result.is_error, result
    assert len(asked) == 1
    assert "demo.clear_notes" in asked[0]
    [approval] = await deployment.keeper.store.list_approvals()
    assert (approval.status, approval.decided_by) == (ApprovalStatus.APPROVED, "elicitation:alice")
    assert approval.note is not None and "elicitation" in approval.note
    [record] = await deployment.keeper.store.list_calls()
    assert (record.status, record.approval_id) == (CallStatus.SUCCEEDED, approval.id)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_declined_elicitation_denies_the_call(
    http_client: ClientFactory, deployment: Deployment, mode: str
) -> None:
    asked: list[str] = []
    async with http_client(
        TOKENS["alice"], elicitation_callback=answering(False, asked), mode=mode
    ) as alice:
        result = await alice.call_tool("demo.clear_notes", {})
    assert code_of(result) == "APPROVAL_DENIED"
    [approval] = await deployment.keeper.store.list_approvals()
    assert approval.status is ApprovalStatus.DENIED


async def test_a_dismissed_elicitation_leaves_the_approval_pending(
    http_client: ClientFactory, deployment: Deployment
) -> None:
    asked: list[str] = []
    async with http_client(TOKENS["alice"], elicitation_callback=answering(None, asked)) as alice:
        result = await alice.call_tool("demo.clear_notes", {})
    assert code_of(result) == "APPROVAL_REQUIRED"
    assert [a.status for a in await deployment.keeper.store.list_approvals()] == [
        ApprovalStatus.PENDING
    ]


async def test_the_user_is_asked_with_sensitive_arguments_redacted_as_every_approver_sees_them(
    http_client: ClientFactory, deployment: Deployment
) -> None:
    """The question quoted the arguments as the call gave them: a password the tool marks
    sensitive, redacted in the approval request, went to the client in clear."""

    @deployment.keeper.tool(name="demo.set_password", effect="destructive", permissions=["notes:*"])
    def set_password(
        user: str, password: Annotated[str, Field(json_schema_extra={"x-sensitive": True})]
    ) -> str:
        return "set"

    asked: list[str] = []
    async with http_client(TOKENS["alice"], elicitation_callback=answering(None, asked)) as alice:
        result = await alice.call_tool(
            "demo.set_password", {"user": "ann", "password": "sk-SECRET-123"}
        )
    assert code_of(result) == "APPROVAL_REQUIRED"
    [question] = asked
    assert '"user": "ann"' in question and '"password": "[REDACTED]"' in question
    assert "sk-SECRET-123" not in question


async def test_a_principal_barred_from_self_approval_is_not_asked(
    http_client: ClientFactory, deployment: Deployment
) -> None:
    asked: list[str] = []
    async with http_client(TOKENS["erin"], elicitation_callback=answering(True, asked)) as erin:
        result = await erin.call_tool("demo.clear_notes", {})
    assert code_of(result) == "APPROVAL_REQUIRED"
    assert asked == []


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_by_default_a_client_cannot_approve_its_own_call_by_elicitation(
    http_client: ClientFactory, deployment: Deployment, mode: str
) -> None:
    """A client that accepts every elicitation ran destructive tools with no person
    involved: a principal's client answers approval questions only when the operator says so
    (`approve_by_elicitation = true`)."""
    asked: list[str] = []
    async with http_client(
        TOKENS["dave"], elicitation_callback=answering(True, asked), mode=mode
    ) as dave:
        await dave.call_tool("demo.add_note", {"text": "keep me"})
        result = await dave.call_tool("demo.clear_notes", {})
        listed = await dave.call_tool("demo.list_notes", {})
    assert code_of(result) == "APPROVAL_REQUIRED"
    assert asked == []
    assert "keep me" in listed.content[0].text  # type: ignore[union-attr]
    [approval] = await deployment.keeper.store.list_approvals()
    assert approval.status is ApprovalStatus.PENDING


async def test_upstream_killed_mid_call_gives_a_clean_error_and_unknown_outcome(
    http_client: ClientFactory, deployment: Deployment, tmp_path: Path
) -> None:
    marker = tmp_path / "marker.txt"
    async with http_client(TOKENS["alice"]) as alice:
        result = await alice.call_tool("t.die_midway", {"path": str(marker)})
    assert result.is_error
    assert code_of(result) == "UNKNOWN_OUTCOME"
    assert marker.read_text() == "started\n"
    [record] = await deployment.keeper.store.list_calls()
    assert (record.tool, record.status) == ("t.die_midway", CallStatus.UNKNOWN_OUTCOME)


async def test_an_upstreams_hints_waive_no_approval_unless_the_operator_trusts_them(
    tmp_path: Path,
) -> None:
    """`readOnlyHint: true` from a server we do not control ran its tool with no approval and
    let a failed attempt run again; only `trust_hints` or a tool's own table says so."""
    text = config_text(tmp_path, trust_hints=False)
    text += '\n[upstreams.t.tools.picture]\neffect = "read_only"\n'
    config = parse_config(text, file="test.toml", base_dir=str(tmp_path))
    async with (
        build(config) as running,
        serving(running) as url,
        connected(url, TOKENS["alice"]) as alice,
    ):
        echo = await alice.call_tool("t.echo", {"text": "hi"})  # hinted read-only
        picture = await alice.call_tool("t.picture", {})  # stated read-only in the file
    assert code_of(echo) == "APPROVAL_REQUIRED"
    assert not picture.is_error
    assert running.keeper.catalog.get("t.echo").spec.effect is Effect.DESTRUCTIVE  # type: ignore[union-attr]


async def test_progressive_principal_sees_meta_tools_and_calls_through_them(
    http_client: ClientFactory, deployment: Deployment
) -> None:
    async with http_client(TOKENS["carol"]) as carol:
        listed = {t.name for t in (await carol.list_tools()).tools}
        found = await carol.call_tool("search_tools", {"query": "keep a short note"})
        details = await carol.call_tool("get_tool_details", {"names": ["demo.list_notes"]})
        hidden = await carol.call_tool("get_tool_details", {"names": ["t.append_line"]})
        forbidden = await carol.call_tool(
            "call_tool", {"name": "t.append_line", "arguments": {"path": "x", "line": "y"}}
        )
        called = await carol.call_tool("call_tool", {"name": "demo.list_notes", "arguments": {}})
        malformed = await carol.call_tool("call_tool", {"arguments": {}})
        with pytest.raises(MCPError):
            await carol.call_tool("demo.list_notes", {})
    assert listed == {"search_tools", "get_tool_details", "call_tool"}
    names = [t["name"] for t in (found.structured_content or {})["tools"]]
    assert "demo.add_note" in names
    assert all(not n.startswith("t.") for n in names)
    assert [t["name"] for t in (details.structured_content or {})["tools"]] == ["demo.list_notes"]
    assert (hidden.structured_content or {}) == {"tools": [], "unknown": ["t.append_line"]}
    assert code_of(forbidden) == "UNKNOWN_TOOL"
    assert not called.is_error
    assert code_of(malformed) == "INVALID_ARGUMENTS"
    text = malformed.content[0].text  # type: ignore[union-attr]
    assert "/name: " in text and "Violation(" not in text
    assert (malformed.meta or {}).get("dev.toolkeeper/error-code") == "INVALID_ARGUMENTS"
    assert "dev.toolkeeper/call-id" not in (malformed.meta or {})  # no call was proposed
    [record] = await deployment.keeper.store.list_calls()
    assert (record.tool, record.principal_id) == ("demo.list_notes", "carol")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_call_tool_asks_for_approval_as_a_direct_call_does(
    http_client: ClientFactory, deployment: Deployment, mode: str
) -> None:
    asked: list[str] = []
    async with http_client(
        TOKENS["carol"], elicitation_callback=answering(True, asked), mode=mode
    ) as carol:
        await carol.call_tool("call_tool", {"name": "demo.add_note", "arguments": {"text": "a"}})
        cleared = await carol.call_tool("call_tool", {"name": "demo.clear_notes", "arguments": {}})
    assert not cleared.is_error, cleared
    assert cleared.content[0].text == "1 notes deleted"  # type: ignore[union-attr]
    assert len(asked) == 1 and "demo.clear_notes" in asked[0]
    [approval] = await deployment.keeper.store.list_approvals()
    assert (approval.status, approval.decided_by) == (ApprovalStatus.APPROVED, "elicitation:carol")


async def test_call_tool_names_the_approval_in_meta_when_the_client_cannot_be_asked(
    http_client: ClientFactory, deployment: Deployment
) -> None:
    async with http_client(TOKENS["carol"]) as carol:
        asked = await carol.call_tool("call_tool", {"name": "demo.clear_notes", "arguments": {}})
        approval_id = (asked.meta or {}).get("dev.toolkeeper/approval-id")
        assert code_of(asked) == "APPROVAL_REQUIRED" and approval_id
        await deployment.keeper.approvals.approve(approval_id, by="ops", note="fine")
        ran = await carol.call_tool("call_tool", {"name": "demo.clear_notes", "arguments": {}})
    assert not ran.is_error, ran
    clears = [r for r in await deployment.keeper.store.list_calls() if r.tool == "demo.clear_notes"]
    assert [(r.status, r.approval_id) for r in clears] == [(CallStatus.SUCCEEDED, approval_id)]


async def test_a_client_call_id_in_meta_makes_its_retry_a_replay(
    http_client: ClientFactory, deployment: Deployment, tmp_path: Path
) -> None:
    target = tmp_path / "lines.txt"
    args = {"path": str(target), "line": "once"}
    meta: Any = {"dev.toolkeeper/call-id": "client-42"}
    async with http_client(TOKENS["alice"]) as alice:
        first = await alice.call_tool("t.append_line", args, meta=meta)
        retry = await alice.call_tool("t.append_line", args, meta=meta)
    assert not first.is_error
    assert not retry.is_error
    assert target.read_text() == "once\n"
    [record] = await deployment.keeper.store.list_calls()
    assert record.call_id == "client-42"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_clients_hear_when_an_upstream_adds_a_tool(
    http_client: ClientFactory, mode: str
) -> None:
    heard = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            heard.set()

    async with http_client(TOKENS["alice"], mode=mode, message_handler=on_message) as alice:
        if mode == "auto":
            async with alice.listen(tools_list_changed=True) as changes:
                await alice.call_tool("t.add_tool", {"name": "fresh"})
                with anyio.fail_after(20):
                    async for _event in changes:
                        break
        else:
            await alice.call_tool("t.add_tool", {"name": "fresh"})
            with anyio.fail_after(20):
                await heard.wait()
        listed = {t.name for t in (await alice.list_tools()).tools}
    assert "t.fresh" in listed


async def test_several_upstreams_open_and_close_together(tmp_path: Path) -> None:
    # Each upstream's session lives in a task group of its own, nested in the one before;
    # closing them used to let the outer one's cancellation escape (a traceback at Ctrl-C).
    text = config_text(tmp_path)
    for extra in ("u2", "u3"):
        text += f'\n[upstreams.{extra}]\ncommand = "{sys.executable}"\nargs = ["{UPSTREAM}"]\n'
    config = parse_config(text, file="test.toml", base_dir=str(tmp_path))
    with anyio.fail_after(60):
        async with build(config) as running:
            assert [u.connected for u in running.upstreams] == [True, True, True]
            names = {t.spec.name for t in running.keeper.catalog}
    assert {"t.echo", "u2.echo", "u3.echo"} <= names


async def test_two_names_rewritten_alike_are_listed_apart_and_each_can_be_called(
    tmp_path: Path,
) -> None:
    tools = tmp_path / "odd_tools.py"
    tools.write_text(
        "def register(keeper):\n"
        "    @keeper.tool(name='odd.a b', effect='read_only', permissions=['odd:read'])\n"
        "    def space() -> str:\n"
        "        return 'space'\n"
        "    @keeper.tool(name='odd.a:b', effect='read_only', permissions=['odd:read'])\n"
        "    def colon() -> str:\n"
        "        return 'colon'\n"
    )
    text = (
        f'[server]\nledger = "sqlite:///{tmp_path}/l.db"\n'
        f'[[tools]]\nfile = "{tools}"\n'
        '[principals.alice]\ntoken = "alice-token-1"\ngrants = ["odd:read"]\n'
    )
    config = parse_config(text, file="odd.toml", base_dir=str(tmp_path))
    async with build(config) as running:
        gateway = running.gateway
        alice = gateway.principals["alice"]
        names = [t.name for t in gateway.list_tools(alice).tools]
        answers = []
        for name in names:
            params = mcp_types.CallToolRequestParams(name=name, arguments={})
            answer = await gateway.answer(alice, params, None)
            assert isinstance(answer, dict)
            answers.append(answer["content"][0]["text"])
    assert len(set(names)) == 2
    assert sorted(answers) == ["colon", "space"]


async def test_an_upstreams_image_reaches_the_client_as_an_image(
    http_client: ClientFactory,
) -> None:
    async with http_client(TOKENS["alice"]) as alice:
        result = await alice.call_tool("t.picture", {})
    assert not result.is_error, result
    # Between the fence's opening and closing blocks (an upstream's output is fenced).
    kinds = [type(block).__name__ for block in result.content]
    assert kinds == ["TextContent", "TextContent", "ImageContent", "TextContent"]
    image = result.content[2]
    assert image.mime_type == "image/png" and image.data.startswith("iVBOR")  # type: ignore[union-attr]


async def test_a_replayed_call_gives_the_client_the_upstreams_image_again(
    http_client: ClientFactory,
) -> None:
    # A client retrying with its own call id (its answer was lost) is answered from the
    # ledger: the image came back as a text block holding the blocks' JSON.
    meta: Any = {"dev.toolkeeper/call-id": "client-picture"}
    async with http_client(TOKENS["alice"]) as alice:
        first = await alice.call_tool("t.picture", {}, meta=meta)
        replay = await alice.call_tool("t.picture", {}, meta=meta)
    assert not first.is_error and not replay.is_error
    kinds = [type(block).__name__ for block in first.content]
    assert kinds == ["TextContent", "TextContent", "ImageContent", "TextContent"]
    assert replay.content == first.content
    assert replay.structured_content == first.structured_content


async def test_a_tool_changed_many_times_leaves_one_export_behind() -> None:
    keeper = Keeper(principal=APP, ledger="memory://")
    gateway = Gateway(
        keeper,
        [
            GatewayPrincipal(
                principal=Principal(id="a", grants=frozenset({"*"})), token=None, exposure="direct"
            )
        ],
    )
    who = gateway.principals["a"]
    for version in range(200):
        keeper.add_function(
            lambda text: text, name="echo", effect="read_only", version=str(version)
        )
        [tool] = gateway.list_tools(who).tools
        assert tool.name == "echo"
    keeper.catalog.remove("echo")
    assert gateway.list_tools(who).tools == []
    assert gateway._exported == {}


def decided_elsewhere(ledger: Path, approve: bool, asked: list[str]) -> Any:
    """A user who accepts the question after a person, at `toolkeeper approvals` in another
    process, denied the request (or approved it, when `approve`)."""

    async def elicit(context: Any, params: Any) -> mcp_types.ElicitResult:
        asked.append(params.message)
        async with SQLiteStore(ledger) as other:
            approvals = Approvals(lambda: other)
            [request] = await approvals.pending()
            if approve:
                await approvals.approve(request.id, by="ops")
            else:
                await approvals.deny(request.id, by="ops", reason="not today")
        return mcp_types.ElicitResult(action="accept", content={"approve": True})

    return elicit


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize("approve", [False, True])
async def test_an_elicited_answer_after_a_person_decided_elsewhere_gets_that_decision(
    http_client: ClientFactory, deployment: Deployment, tmp_path: Path, mode: str, approve: bool
) -> None:
    """The request is decided once: the user's answer came second, its decision failed with
    ValueError ('not pending'), and the tools/call failed instead of telling the user what the
    decision that stands did."""
    asked: list[str] = []
    elicit = decided_elsewhere(tmp_path / "ledger.db", approve, asked)
    async with http_client(TOKENS["alice"], elicitation_callback=elicit, mode=mode) as alice:
        await alice.call_tool("demo.add_note", {"text": "a"})
        result = await alice.call_tool("demo.clear_notes", {})
    assert len(asked) == 1
    [request] = await deployment.keeper.store.list_approvals()
    if approve:
        assert not result.is_error, result
        assert result.content[0].text == "1 notes deleted"  # type: ignore[union-attr]
        assert request.status is ApprovalStatus.APPROVED
    else:
        assert code_of(result) == "APPROVAL_DENIED"
        assert request.status is ApprovalStatus.DENIED
    assert request.decided_by == "ops"


def test_a_principals_token_is_not_in_its_repr_and_still_authenticates() -> None:
    """A stray log of a principal (or of an error holding one) wrote its bearer token."""
    entry = GatewayPrincipal(
        principal=Principal(id="a", grants=frozenset({"*"})),
        token="secret-token-42",
        exposure="direct",
    )
    gateway = Gateway(Keeper(principal=APP, ledger="memory://"), [entry])
    assert "secret-token-42" not in repr(entry)
    assert gateway.authenticate("secret-token-42") is entry


async def test_a_long_result_reaches_the_client_cut_with_a_note_and_the_ledger_keeps_it_whole() -> (
    None
):
    keeper = Keeper(principal=APP, ledger="memory://")
    keeper.add_function(lambda n: "z" * n, name="blob", effect="read_only")
    gateway = Gateway(
        keeper,
        [
            GatewayPrincipal(
                principal=Principal(id="a", grants=frozenset({"*"})), token=None, exposure="direct"
            )
        ],
        max_result_chars=500,
    )
    who = gateway.principals["a"]
    async with keeper:
        cut = await gateway.call_tool(
            who, mcp_types.CallToolRequestParams(name="blob", arguments={"n": 5000})
        )
        short = await gateway.call_tool(
            who, mcp_types.CallToolRequestParams(name="blob", arguments={"n": 400})
        )
        [record] = [r for r in await keeper.store.list_calls() if r.result == "z" * 5000]
    assert isinstance(cut, mcp_types.CallToolResult) and not cut.is_error
    text = cut.content[0].text  # type: ignore[union-attr]
    assert text.startswith("z" * 500) and not text.startswith("z" * 501)
    assert "5,000 characters" in text and record.call_id in text
    assert isinstance(short, mcp_types.CallToolResult)
    assert short.content[0].text == "z" * 400  # type: ignore[union-attr]


async def test_a_configured_result_limit_of_zero_sends_results_whole(tmp_path: Path) -> None:
    text = config_text(tmp_path).replace("[server]\n", "[server]\nmax_result_chars = 0\n", 1)
    config = parse_config(text, file="test.toml", base_dir=str(tmp_path))
    assert config.server.max_result_chars == 0
    async with build(config) as running:
        assert running.gateway.max_result_chars is None
    default = parse_config(config_text(tmp_path), file="test.toml", base_dir=str(tmp_path))
    assert default.server.max_result_chars == 100_000


@pytest.mark.parametrize("bad", [0, -1])
def test_a_result_limit_below_one_is_refused_when_the_gateway_is_made(bad: int) -> None:
    # Not at each call's answer, after the call has run and the ledger holds it done.
    with pytest.raises(ValueError, match="max_result_chars"):
        Gateway(Keeper(principal=APP, ledger="memory://"), [], max_result_chars=bad)


async def test_a_cut_approval_request_still_says_to_make_the_same_call_again() -> None:
    keeper = Keeper(principal=APP, ledger="memory://")
    keeper.add_function(lambda: "gone", name="wipe", effect="destructive")
    who = GatewayPrincipal(
        principal=Principal(id="a", grants=frozenset({"*"})), token=None, exposure="direct"
    )
    gateway = Gateway(keeper, [who], max_result_chars=60)
    async with keeper:
        asked = await gateway.call_tool(who, mcp_types.CallToolRequestParams(name="wipe"))
    assert isinstance(asked, mcp_types.CallToolResult) and asked.is_error
    text = asked.content[0].text  # type: ignore[union-attr]
    assert "only the first 60" in text and "make the same call again" in text
    assert (asked.meta or {})["dev.toolkeeper/approval-id"] in text


@pytest.mark.parametrize("task", ["\ud800", "a\x00b", "t" * 600])
async def test_a_task_id_no_ledger_can_key_is_refused_as_an_invalid_call_id(
    tmp_path: Path, task: str
) -> None:
    keeper = Keeper(principal=APP, ledger=f"sqlite:///{tmp_path}/ledger.db")
    keeper.add_function(lambda: "read", name="look", effect="read_only")
    who = GatewayPrincipal(
        principal=Principal(id="a", grants=frozenset({"*"})),
        token=None,
        exposure="direct",
        client_task_ids=True,
    )
    gateway = Gateway(keeper, [who])
    params = mcp_types.CallToolRequestParams(
        name="look",
        _meta={"dev.toolkeeper/task-id": task},  # type: ignore[call-arg]
    )
    async with keeper:
        refused = await gateway.call_tool(who, params)
        assert await keeper.store.list_calls() == []
    assert isinstance(refused, mcp_types.CallToolResult) and refused.is_error
    assert code_of(refused) == "INVALID_CALL_ID"


async def test_a_client_cannot_escape_its_task_budget_by_naming_a_task_per_call(
    tmp_path: Path,
) -> None:
    """The task came from the client's `_meta`: a fresh task id per call ran 8 of 8 calls
    with a budget of 3. A principal names its tasks only when the operator lets it."""
    text = config_text(tmp_path) + "\n[budgets]\nmax_calls_per_task = 3\n"
    text = text.replace(
        "approve_by_elicitation = false\n",
        "approve_by_elicitation = false\nclient_task_ids = true\n",
    )
    config = parse_config(text, file="test.toml", base_dir=str(tmp_path))

    def task(name: str) -> Any:
        return {"dev.toolkeeper/task-id": name}

    async with (
        build(config) as running,
        serving(running) as url,
        connected(url, TOKENS["bob"]) as bob,
        connected(url, TOKENS["erin"]) as erin,
    ):
        named = [
            await bob.call_tool("demo.list_notes", {}, meta=task(f"run-{i}")) for i in range(8)
        ]
        unknown = await bob.call_tool("no.such_tool", {}, meta=task("run-x"))
        plain = [await bob.call_tool("demo.list_notes", {}) for _ in range(4)]
        allowed = [await erin.call_tool("demo.list_notes", {}, meta=task("a")) for _ in range(4)]
        other = await erin.call_tool("demo.list_notes", {}, meta=task("b"))
        records = await running.keeper.store.list_calls()
    assert [code_of(r) for r in named] == ["PERMISSION_DENIED"] * 8
    assert code_of(unknown) == "PERMISSION_DENIED"  # (before the tool is looked up: no leak)
    assert [code_of(r) for r in plain] == [None, None, None, "BUDGET_EXCEEDED"]
    assert [code_of(r) for r in allowed] == [None, None, None, "BUDGET_EXCEEDED"]
    assert code_of(other) is None
    assert sorted({r.task_id for r in records}) == ["mcp:bob", "mcp:erin:a", "mcp:erin:b"]


async def test_an_approval_answer_sent_unasked_is_not_taken_and_the_user_is_asked(
    http_client: ClientFactory, deployment: Deployment
) -> None:
    """A 2026-07-28 client's answer with no request state (to a question never put to it)
    approved the call: the destructive tool ran and the user never saw what it would do."""
    asked: list[str] = []
    unasked = mcp_types.ElicitResult(action="accept", content={"approve": True})
    async with http_client(TOKENS["alice"], elicitation_callback=answering(None, asked)) as alice:
        await alice.call_tool("demo.add_note", {"text": "a"})
        answer = await alice.session.call_tool(
            "demo.clear_notes",
            {},
            input_responses={"toolkeeper-approval": unasked},
            allow_input_required=True,
        )
    assert isinstance(answer, mcp_types.InputRequiredResult)
    [approval] = await deployment.keeper.store.list_approvals()
    assert approval.status is ApprovalStatus.PENDING
    assert answer.request_state == approval.id
    clears = [r for r in await deployment.keeper.store.list_calls() if r.tool == "demo.clear_notes"]
    assert [r.status for r in clears] == [CallStatus.AWAITING_APPROVAL]


async def test_an_answer_sent_again_after_its_call_ran_gets_that_calls_result_not_a_new_question(
    http_client: ClientFactory, deployment: Deployment
) -> None:
    """A 2026-07-28 client sends its answering round again (its response was lost, or a
    second session of the principal answered the same question): the approved call had
    ended, so the round was taken for a new call of the next generation, the user was asked
    again, and a second yes ran the destructive tool a second time."""
    asked: list[str] = []
    accept = mcp_types.ElicitResult(action="accept", content={"approve": True})
    yes = {"toolkeeper-approval": accept}
    async with http_client(TOKENS["alice"], elicitation_callback=answering(True, asked)) as alice:
        await alice.call_tool("demo.add_note", {"text": "a"})
        question = await alice.session.call_tool("demo.clear_notes", {}, allow_input_required=True)
        assert isinstance(question, mcp_types.InputRequiredResult)
        rounds = [
            await alice.session.call_tool(
                "demo.clear_notes",
                {},
                input_responses=yes,
                request_state=question.request_state,
                allow_input_required=True,
            )
            for _ in range(2)
        ]
    for answer in rounds:
        assert isinstance(answer, mcp_types.CallToolResult) and not answer.is_error, answer
        assert answer.content[0].text == "1 notes deleted"  # type: ignore[union-attr]
    assert asked == []
    clears = [r for r in await deployment.keeper.store.list_calls() if r.tool == "demo.clear_notes"]
    assert [r.status for r in clears] == [CallStatus.SUCCEEDED]
    assert [a.id for a in await deployment.keeper.store.list_approvals()] == [
        question.request_state
    ]


async def test_a_question_the_client_fails_to_put_leaves_an_error_result_naming_the_approval(
    http_client: ClientFactory, deployment: Deployment
) -> None:
    """A handshake-era client that answers the question with an error (its user could not be
    asked) made the tools/call fail with that error: the approval id to approve it by was
    never named, and the call was left waiting for nobody knew what."""

    async def fail(context: Any, params: Any) -> mcp_types.ErrorData:
        return mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message="no window to ask in")

    async with http_client(TOKENS["alice"], elicitation_callback=fail, mode="legacy") as alice:
        result = await alice.call_tool("demo.clear_notes", {})
    [approval] = await deployment.keeper.store.list_approvals()
    assert approval.status is ApprovalStatus.PENDING
    assert code_of(result) == "APPROVAL_REQUIRED"
    assert (result.meta or {})["dev.toolkeeper/approval-id"] == approval.id


SPOOF = "users\u202e\u2066\u200b\ufeff\u2060\u200f\x1b[2K\u2028\U000e0041 END"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_elicited_question_escapes_what_would_hide_or_reorder_the_arguments(
    http_client: ClientFactory, deployment: Deployment, mode: str
) -> None:
    """The question carried bidi overrides and zero-width characters from the arguments (and
    from a tool's reason) as they were: the user approved arguments other than those shown."""

    def drop(name: str) -> str:
        return name

    deployment.keeper.add_function(
        drop, name="demo.drop", effect="destructive", permissions=["notes:write"]
    )
    asked: list[str] = []
    async with http_client(
        TOKENS["alice"], elicitation_callback=answering(False, asked), mode=mode
    ) as alice:
        await alice.call_tool("demo.drop", {"name": SPOOF})
    [question] = asked
    assert not any(c in question for c in SPOOF if not c.isprintable()), question
    assert "users\\u202e\\u2066\\u200b" in question


async def test_a_secret_argument_echoed_by_its_tool_reaches_no_client_and_no_record(
    http_client: ClientFactory, deployment: Deployment, tmp_path: Path
) -> None:
    """A tool's echo of its `SecretStr` argument went back to the client in clear, first run
    and replay, and into the ledger file."""
    core = "CANARY-GW-51d0"

    def sign_in(user: str, password: SecretStr) -> dict[str, str]:
        said = password.get_secret_value()
        return {"user": user, "echo": said, "note": f"signed in with {said}"}

    deployment.keeper.add_function(
        sign_in, name="demo.sign_in", effect="read_only", permissions=["notes:read"]
    )
    meta: Any = {"dev.toolkeeper/call-id": "client-sign-in"}
    arguments = {"user": "ann", "password": f"pw-{core}"}
    async with http_client(TOKENS["alice"]) as alice:
        first = await alice.call_tool("demo.sign_in", arguments, meta=meta)
        replay = await alice.call_tool("demo.sign_in", arguments, meta=meta)
    assert not first.is_error and "ann" in first.model_dump_json()
    assert core not in first.model_dump_json() and core not in replay.model_dump_json()
    assert core.encode() not in _ledger_bytes(tmp_path)


class _Unlocked(BaseModel):
    pin: int
    ok: bool


async def test_a_masked_result_that_no_longer_fits_its_output_schema_is_an_error_result(
    http_client: ClientFactory, deployment: Deployment, tmp_path: Path
) -> None:
    """A tool declaring `pin: int` in its output echoed its sensitive pin: masked, the pin
    was the text '[REDACTED]' in structuredContent, and the official client's call_tool
    raised for a call the ledger holds done (run and replay)."""

    def unlock(pin: Annotated[int, Field(json_schema_extra={"x-sensitive": True})]) -> _Unlocked:
        return _Unlocked(pin=pin, ok=True)

    deployment.keeper.add_function(
        unlock, name="demo.unlock", effect="read_only", permissions=["notes:read"]
    )
    meta: Any = {"dev.toolkeeper/call-id": "client-unlock"}
    async with http_client(TOKENS["alice"]) as alice:
        first = await alice.call_tool("demo.unlock", {"pin": 48151623}, meta=meta)
        replay = await alice.call_tool("demo.unlock", {"pin": 48151623}, meta=meta)
    for result in (first, replay):
        assert result.is_error and "48151623" not in result.model_dump_json()
        assert (result.meta or {}).get("dev.toolkeeper/call-id") == "client-unlock"
    [record] = [r for r in await deployment.keeper.store.list_calls() if r.tool == "demo.unlock"]
    assert record.status is CallStatus.SUCCEEDED


def _ledger_bytes(folder: Path) -> bytes:
    """The SQLite ledger's files (its WAL too) as they are on disk."""
    return b"".join(path.read_bytes() for path in folder.glob("ledger.db*"))


async def test_an_approval_for_a_big_count_never_runs_the_float_next_to_it_or_the_next_int(
    http_client: ClientFactory, deployment: Deployment
) -> None:
    """The derived call id keys the exact arguments: ECMAScript writes the double
    41778229342798592 as 41778229342798590, which an approved int count was written as too."""
    paid: list[object] = []

    @deployment.keeper.tool(name="demo.pay", effect="destructive", permissions=["notes:write"])
    def pay(count: int) -> str:
        paid.append(count)
        return "paid"

    async with http_client(TOKENS["erin"]) as erin:  # (asked by error result, not elicitation)
        asked = await erin.call_tool("demo.pay", {"count": 41778229342798590})
        assert code_of(asked) == "APPROVAL_REQUIRED"
        approval_id = (asked.meta or {})["dev.toolkeeper/approval-id"]
        await deployment.keeper.approvals.approve(approval_id, by="ops")
        for other in (4.177822934279859e16, 41778229342798592, 41778229342798590.0):
            result = await erin.call_tool("demo.pay", {"count": other})
            assert code_of(result) == "APPROVAL_REQUIRED"
            assert (result.meta or {})["dev.toolkeeper/approval-id"] != approval_id
        assert paid == []
        ran = await erin.call_tool("demo.pay", {"count": 41778229342798590})
    assert not ran.is_error and paid == [41778229342798590]


async def test_a_derived_call_id_does_not_give_a_pin_away(
    http_client: ClientFactory, deployment: Deployment
) -> None:
    """The derived id (in the ledger, and sent back to the client) is keyed: the plain SHA-256
    of each of the 10,000 PINs matches none of it."""

    @deployment.keeper.tool(name="demo.unlock", effect="write", permissions=["notes:write"])
    def unlock(pin: Annotated[str, Field(json_schema_extra={"x-sensitive": True})]) -> str:
        return "open"

    async with http_client(TOKENS["alice"]) as alice:
        result = await alice.call_tool("demo.unlock", {"pin": "4821"})
    assert not result.is_error
    [record] = [r for r in await deployment.keeper.store.list_calls() if r.tool == "demo.unlock"]
    assert record.call_id.startswith("mcp-")
    guesses = {
        "mcp-"
        + hashlib.sha256(
            f"alice\x00demo.unlock\x00{canonical_json({'pin': f'{n:04}'})}".encode()
        ).hexdigest()[:32]
        for n in range(10_000)
    }
    assert record.call_id.partition(".")[0] not in guesses


LEAKY = Path(__file__).resolve().parents[1] / "connectors" / "leaky_upstream.py"


async def test_an_upstreams_echo_of_a_write_only_argument_reaches_no_client_over_http(
    tmp_path: Path,
) -> None:
    """Through `serve_http` and the official client: an upstream that echoes the argument
    its schema marks writeOnly (text, \\u escapes, structured content, errors)."""
    from functools import partial

    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from toolkeeper.server import serve_http

    core = "CANARY-GW-UP-77"
    text = (
        f'[server]\nledger = "sqlite:///{tmp_path}/ledger.db"\n'
        f'[upstreams.leaky]\ncommand = "{sys.executable}"\nargs = ["{LEAKY}"]\ntrust_hints = true\n'
        'protocol = "legacy"\n'
        '[principals.ann]\ntoken = "ann-token-1"\ngrants = ["leaky:*"]\n'
    )
    config = parse_config(text, file="test.toml", base_dir=str(tmp_path))
    ports: list[int] = []
    ready = anyio.Event()
    shown: list[str] = []
    with anyio.fail_after(60):
        async with build(config) as running, anyio.create_task_group() as tg:
            tg.start_soon(
                partial(
                    serve_http,
                    running.gateway,
                    port=0,
                    started=lambda port: (ports.append(port), ready.set()),
                )
            )
            await ready.wait()
            headers = {"Authorization": "Bearer ann-token-1"}
            url = f"http://127.0.0.1:{ports[0]}/mcp"
            async with (
                httpx2.AsyncClient(headers=headers, timeout=30.0) as http,
                Client(streamable_http_client(url, http_client=http)) as client,  # type: ignore[arg-type]
            ):
                for how in ("text", "structured", "is_error", "rpc_error"):
                    for _ in range(2):  # the run, then its replay
                        result = await client.call_tool("leaky.login", {"token": core, "how": how})
                        shown.append(result.model_dump_json())
            tg.cancel_scope.cancel()
    escaped = "".join(f"u{ord(c):04x}" for c in core)  # (the \\u escapes, backslashes aside)
    assert "([REDACTED])" in shown[0]
    assert [s for s in shown if core in s or escaped in s.replace("\\", "")] == []
    assert core.encode() not in _ledger_bytes(tmp_path)


async def test_a_tool_a_principal_may_not_use_is_answered_as_one_that_does_not_exist(
    http_client: ClientFactory, deployment: Deployment
) -> None:
    """Direct (bob) and progressive (carol): a hidden tool and a name no tool has get the same
    answer, and neither is recorded."""
    answers: dict[str, list[object]] = {"direct": [], "progressive": []}
    async with http_client(TOKENS["bob"]) as bob, http_client(TOKENS["carol"]) as carol:
        for name in ("t.append_line", "t.appendline"):  # hidden from both; no such tool
            with pytest.raises(MCPError) as refused:
                await bob.call_tool(name, {"path": "x", "line": "y"})
            answers["direct"].append(
                (refused.value.error.code, refused.value.message.replace(name, "NAME"))
            )
            result = await carol.call_tool(
                "call_tool", {"name": name, "arguments": {"path": "x", "line": "y"}}
            )
            text = result.content[0].text  # type: ignore[union-attr]
            answers["progressive"].append(
                (result.is_error, code_of(result), text.replace(name, "NAME"))
            )
    for path, (hidden, missing) in answers.items():
        assert hidden == missing, path
    assert await deployment.keeper.store.list_calls() == []  # (neither is recorded)
