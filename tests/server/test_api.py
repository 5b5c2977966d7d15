"""The operators' API against a real gateway: the official MCP client proposes, operators
decide over HTTP, and the client's next proposal runs (once) or is refused."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from toolkeeper.config import parse_config
from toolkeeper.core.states import CallStatus
from toolkeeper.ledger import ApprovalStatus
from toolkeeper.server import Deployment, build
from toolkeeper.server.openapi import document

from .conftest import OPERATORS, TOKENS, ClientFactory, config_text
from .test_gateway import code_of

pytestmark = pytest.mark.anyio

Api = Callable[[str | None], AbstractAsyncContextManager[httpx2.AsyncClient]]
WIRES: list[dict[str, Any]] = []
"""What the test tool `ops.wire` did, each time it ran."""


@pytest.fixture
async def deployment(tmp_path: Path) -> AsyncIterator[Deployment]:
    """The tests' gateway without its upstream: operators need none, and it starts faster."""
    text = config_text(tmp_path, upstream=False)
    async with build(parse_config(text, file="test.toml", base_dir=str(tmp_path))) as running:
        yield running


@pytest.fixture
def api(gateway_url: str) -> Api:
    """An HTTP client of the gateway's API, as an operator (by name) or with no token."""
    base = gateway_url.removesuffix("/mcp")

    @asynccontextmanager
    async def client(name: str | None) -> AsyncIterator[httpx2.AsyncClient]:
        headers = {"Authorization": f"Bearer {OPERATORS[name]}"} if name else {}
        async with httpx2.AsyncClient(base_url=base, headers=headers, timeout=30) as http:
            yield http

    return client


@pytest.fixture(autouse=True)
def wire_tool(deployment: Deployment) -> None:
    """A destructive tool with a default argument (what an approval must show filled in)."""
    WIRES.clear()

    @deployment.keeper.tool(name="ops.wire", effect="destructive", permissions=["notes:write"])
    def wire(to: str, amount: float = 5.0) -> str:
        """Send money.

        Args:
            to: Account.
            amount: How much.
        """
        WIRES.append({"to": to, "amount": amount})
        return f"sent {amount} to {to}"


async def _ask(client: Any, to: str = "acct-7") -> str:
    """Propose a wire; the gateway answers APPROVAL_REQUIRED with the approval's id."""
    asked = await client.call_tool("ops.wire", {"to": to})
    assert code_of(asked) == "APPROVAL_REQUIRED"
    return str((asked.meta or {})["dev.toolkeeper/approval-id"])


async def test_a_pending_request_shows_the_validated_arguments_with_defaults_and_digest(
    http_client: ClientFactory, api: Api
) -> None:
    async with http_client(TOKENS["alice"]) as alice:
        approval_id = await _ask(alice, to="acct\u202e7")
    async with api("vic") as vic:
        listed = (await vic.get("/api/v1/approvals", params={"status": "pending"})).json()
        one = (await vic.get(f"/api/v1/approvals/{approval_id}")).json()
    [shown] = listed["approvals"]
    assert shown == one
    assert one["arguments"] == {"to": "acct\u202e7", "amount": 5.0}
    assert (one["tool"], one["principal_id"], one["status"]) == ("ops.wire", "alice", "pending")
    assert len(one["digest"]) == 64
    assert one["expires_at"] > one["created_at"]


async def test_an_approval_by_an_operator_lets_the_next_proposal_run_once(
    http_client: ClientFactory, api: Api, deployment: Deployment
) -> None:
    async with http_client(TOKENS["alice"]) as alice:
        approval_id = await _ask(alice)
        async with api("olga") as olga:
            answer = await olga.post(
                f"/api/v1/approvals/{approval_id}/approve", json={"note": "checked the account"}
            )
        assert answer.status_code == 200
        ran = await alice.call_tool("ops.wire", {"to": "acct-7"})
        assert not ran.is_error
    assert WIRES == [{"to": "acct-7", "amount": 5.0}]
    decided = await deployment.keeper.store.get_approval(approval_id)
    assert decided is not None
    assert (decided.status, decided.decided_by, decided.note) == (
        ApprovalStatus.APPROVED,
        "operator:olga",
        "checked the account",
    )


async def test_a_denial_reaches_the_client_as_approval_denied_with_the_reason(
    http_client: ClientFactory, api: Api
) -> None:
    async with http_client(TOKENS["alice"]) as alice:
        approval_id = await _ask(alice)
        async with api("olga") as olga:
            denied = await olga.post(
                f"/api/v1/approvals/{approval_id}/deny", json={"reason": "wrong account"}
            )
        assert denied.json()["decided_by"] == "operator:olga"
        again = await alice.call_tool("ops.wire", {"to": "acct-7"})
    assert code_of(again) == "APPROVAL_DENIED"
    assert "wrong account" in again.content[0].text  # type: ignore[union-attr]
    assert WIRES == []


async def test_four_eyes_an_operator_may_not_approve_its_own_principals_call(
    http_client: ClientFactory, api: Api, deployment: Deployment
) -> None:
    async with http_client(TOKENS["alice"]) as alice:
        approval_id = await _ask(alice)
    async with api("alma") as alma:
        refused = await alma.post(f"/api/v1/approvals/{approval_id}/approve", json={})
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "FOUR_EYES")
    still = await deployment.keeper.store.get_approval(approval_id)
    assert still is not None and still.status is ApprovalStatus.PENDING


async def test_four_eyes_does_not_stop_another_principals_call(
    http_client: ClientFactory, api: Api
) -> None:
    async with http_client(TOKENS["dave"]) as dave:
        approval_id = await _ask(dave)
    async with api("alma") as alma:
        answer = await alma.post(f"/api/v1/approvals/{approval_id}/approve")
    assert answer.status_code == 200


@pytest.mark.parametrize(
    ("who", "status", "code"),
    [("vic", 403, "FORBIDDEN"), (None, 401, "UNAUTHENTICATED")],
)
async def test_only_approvers_decide(
    http_client: ClientFactory, api: Api, who: str | None, status: int, code: str
) -> None:
    async with http_client(TOKENS["alice"]) as alice:
        approval_id = await _ask(alice)
    async with api(who) as client:
        refused = await client.post(f"/api/v1/approvals/{approval_id}/approve", json={})
    assert (refused.status_code, refused.json()["error"]["code"]) == (status, code)


async def test_a_principals_mcp_token_opens_no_part_of_the_api(gateway_url: str) -> None:
    base = gateway_url.removesuffix("/mcp")
    headers = {"Authorization": f"Bearer {TOKENS['alice']}"}
    async with httpx2.AsyncClient(base_url=base, headers=headers) as http:
        answer = await http.get("/api/v1/approvals")
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"].startswith("Bearer")


async def test_two_operators_deciding_at_once_one_decision_stands(
    http_client: ClientFactory, api: Api, deployment: Deployment
) -> None:
    async with http_client(TOKENS["dave"]) as dave:
        approval_id = await _ask(dave)
    answers: list[httpx2.Response] = []
    async with api("olga") as olga, api("ada") as ada, anyio.create_task_group() as tg:

        async def decide(client: httpx2.AsyncClient, what: str) -> None:
            body = {"reason": "no"} if what == "deny" else {}
            answers.append(await client.post(f"/api/v1/approvals/{approval_id}/{what}", json=body))

        tg.start_soon(decide, olga, "approve")
        tg.start_soon(decide, ada, "deny")
    assert sorted(a.status_code for a in answers) == [200, 409]
    [lost] = [a for a in answers if a.status_code == 409]
    assert lost.json()["error"]["code"] == "NOT_PENDING"
    stored = await deployment.keeper.store.get_approval(approval_id)
    [won] = [a for a in answers if a.status_code == 200]
    assert stored is not None and stored.status.value == won.json()["status"]


async def test_the_ledger_pages_newest_first_with_filters_and_a_cursor(
    http_client: ClientFactory, api: Api
) -> None:
    async with http_client(TOKENS["alice"]) as alice:
        for n in range(5):
            await alice.call_tool("demo.add_note", {"text": f"note {n}"})
        await _ask(alice)
    async with api("vic") as vic:
        first = (await vic.get("/api/v1/calls", params={"limit": 3})).json()
        rest = (await vic.get("/api/v1/calls", params={"cursor": first["next_cursor"]})).json()
        notes = (await vic.get("/api/v1/calls", params={"tool": "demo.add_note"})).json()
        waiting = (await vic.get("/api/v1/calls", params={"status": "awaiting_approval"})).json()
        nobody = (await vic.get("/api/v1/calls", params={"principal": "bob"})).json()
    everything = first["calls"] + rest["calls"]
    assert [c["tool"] for c in everything] == ["ops.wire"] + ["demo.add_note"] * 5
    assert rest["next_cursor"] is None
    created = [c["created_at"] for c in everything]
    assert created == sorted(created, reverse=True)
    assert len(notes["calls"]) == 5
    assert [c["tool"] for c in waiting["calls"]] == ["ops.wire"]
    assert nobody["calls"] == []


async def test_a_calls_timeline_shows_its_states_and_who_approved_it(
    http_client: ClientFactory, api: Api
) -> None:
    async with http_client(TOKENS["alice"]) as alice:
        approval_id = await _ask(alice)
        async with api("olga") as olga:
            await olga.post(f"/api/v1/approvals/{approval_id}/approve", json={"note": "ok"})
        await alice.call_tool("ops.wire", {"to": "acct-7"})
    async with api("vic") as vic:
        [row] = (await vic.get("/api/v1/calls", params={"tool": "ops.wire"})).json()["calls"]
        one = (await vic.get(f"/api/v1/calls/{row['task_id']}/{row['call_id']}")).json()
        audit = (await vic.get("/api/v1/audit", params={"call": row["call_id"]})).json()
    assert [t["status"] for t in one["timeline"]] == [
        "AWAITING_APPROVAL",
        "RUNNING",
        "SUCCEEDED",
    ]
    assert one["approval"]["decided_by"] == "operator:olga"
    assert one["result"] == "sent 5.0 to acct-7"
    decisions = [e for e in audit["events"] if e["status"] == "approval approved"]
    assert [e["extra"]["by"] for e in decisions] == ["operator:olga"]


async def _unknown_call(deployment: Deployment) -> tuple[str, str]:
    """A call whose process died while it ran (as recovery leaves it)."""
    from tests.ledger.records import call

    store = deployment.keeper.store
    record, _ = await store.claim_call(call("lost-1", task_id="task-x", tool="ops.wire"))
    await store.transition(
        record.task_id,
        record.call_id,
        expected=CallStatus.RUNNING,
        target=CallStatus.UNKNOWN_OUTCOME,
    )
    return record.task_id, record.call_id


async def test_an_unknown_outcome_is_settled_once_and_the_settler_recorded(
    api: Api, deployment: Deployment
) -> None:
    task, call_id = await _unknown_call(deployment)
    async with api("vic") as vic:
        [listed] = (await vic.get("/api/v1/unknown")).json()["calls"]
        refused = await vic.post(
            f"/api/v1/calls/{task}/{call_id}/settle", json={"succeeded": True, "note": "x"}
        )
    assert (listed["call_id"], listed["idempotency_key"]) == (call_id, f"tk-{task}-{call_id}")
    assert refused.json()["error"]["code"] == "FORBIDDEN"
    async with api("olga") as olga:
        settled = await olga.post(
            f"/api/v1/calls/{task}/{call_id}/settle",
            json={"succeeded": True, "note": "the bank shows it"},
        )
        twice = await olga.post(
            f"/api/v1/calls/{task}/{call_id}/settle", json={"succeeded": False, "note": "no"}
        )
        audit = (await olga.get("/api/v1/audit", params={"task": task})).json()
        left = (await olga.get("/api/v1/unknown")).json()["calls"]
    assert (settled.status_code, settled.json()["status"]) == (200, "SUCCEEDED")
    assert settled.json()["owner"] == "person:operator:olga"
    assert twice.json()["error"]["code"] == "NOT_UNKNOWN"
    assert left == []
    assert any(e["extra"].get("by") == "operator:olga" for e in audit["events"])


async def test_only_an_admin_reconciles(api: Api) -> None:
    async with api("olga") as olga:
        refused = await olga.post("/api/v1/reconcile")
    async with api("ada") as ada:
        done = await ada.post("/api/v1/reconcile")
    assert refused.json()["error"]["code"] == "FORBIDDEN"
    assert (done.status_code, done.json()) == (200, {"settled": []})


async def test_the_catalog_and_search_show_only_what_a_principal_may_use(api: Api) -> None:
    async with api("vic") as vic:
        bobs = (await vic.get("/api/v1/tools", params={"principal": "bob"})).json()["tools"]
        every = (await vic.get("/api/v1/tools")).json()["tools"]
        nobody = await vic.get("/api/v1/tools", params={"principal": "mallory"})
        as_bob = await vic.post(
            "/api/v1/search", json={"query": "delete every note", "principal": "bob"}
        )
        as_alice = await vic.post(
            "/api/v1/search", json={"query": "delete every note", "principal": "alice", "k": 3}
        )
    assert [t["name"] for t in bobs] == ["demo.list_notes"]
    wire = next(t for t in every if t["name"] == "ops.wire")
    assert (wire["effect"], wire["permissions"], wire["source"]) == (
        "destructive",
        ["notes:write"],
        "python",
    )
    assert [v["version"] for v in wire["versions"]] == ["1"]
    assert nobody.json()["error"]["code"] == "NOT_FOUND"
    assert "demo.clear_notes" not in [t["name"] for t in as_bob.json()["tools"]]
    found = as_alice.json()
    assert found["tools"][0]["name"] == "demo.clear_notes"
    assert found["schema_tokens"] > 0 and len(found["tools"]) <= 3


async def test_health_names_the_ledger_and_each_upstream(api: Api) -> None:
    async with api("vic") as vic:
        health = (await vic.get("/api/v1/health")).json()
    assert health == {"status": "ok", "ledger": "ok", "upstreams": {}}


BAD_INPUT = [
    ("GET", "/api/v1/calls?limit=0", None, 422),
    ("GET", "/api/v1/calls?limit=abc", None, 422),
    ("GET", "/api/v1/calls?status=DONE", None, 422),
    ("GET", "/api/v1/calls?cursor=not-a-cursor", None, 422),
    ("GET", "/api/v1/calls?since=nan", None, 422),
    ("GET", "/api/v1/calls?since=yesterday", None, 422),
    ("GET", "/api/v1/approvals?status=maybe", None, 422),
    ("GET", "/api/v1/approvals/apr_nothing", None, 404),
    ("GET", "/api/v1/calls/t/c", None, 404),
    ("POST", "/api/v1/approvals/apr_nothing/approve", b"{not json", 400),
    ("POST", "/api/v1/approvals/apr_nothing/approve", b"[1]", 400),
    ("POST", "/api/v1/approvals/apr_nothing/approve", b'{"note": 7}', 422),
    ("POST", "/api/v1/approvals/apr_nothing/approve", b'{"extra": 1}', 422),
    ("POST", "/api/v1/approvals/apr_nothing/deny", b"{}", 422),
    ("POST", "/api/v1/search", b'{"query": "", "principal": "bob"}', 422),
    ("POST", "/api/v1/search", b'{"query": "x", "principal": "bob", "k": 0}', 422),
]
"""Requests no operator should get a 500 for: (method, path, body, status)."""


async def test_bad_input_gets_a_stable_code_and_no_500(api: Api) -> None:
    async with api("olga") as olga:
        for method, path, body, status in BAD_INPUT:
            answer = await olga.request(method, path, content=body)
            assert answer.status_code == status, path
            assert answer.json()["error"]["code"] in ("INVALID_REQUEST", "NOT_FOUND")


async def test_a_huge_note_is_refused_and_the_request_stays_pending(
    http_client: ClientFactory, api: Api, deployment: Deployment
) -> None:
    async with http_client(TOKENS["dave"]) as dave:
        approval_id = await _ask(dave)
    async with api("olga") as olga:
        answer = await olga.post(
            f"/api/v1/approvals/{approval_id}/approve", json={"note": "x" * 100_000}
        )
    assert answer.json()["error"]["code"] == "INVALID_REQUEST"
    still = await deployment.keeper.store.get_approval(approval_id)
    assert still is not None and still.status is ApprovalStatus.PENDING


async def test_the_openapi_document_describes_every_route_and_needs_no_token(
    api: Api, deployment: Deployment
) -> None:
    assert deployment.operators is not None
    async with api(None) as anyone:
        served = (await anyone.get("/api/v1/openapi.json")).json()
    assert served == document()
    routes = {
        getattr(r, "path", "")
        for r in deployment.operators.routes()
        if getattr(r, "path", "").startswith("/api/v1/")
    }
    assert set(served["paths"]) == routes - {"/api/v1/openapi.json"}
