"""The operators' API and console mounted beside a library `Keeper` (no gateway): a call the
application proposes waits, an operator approves it over HTTP, and it runs when proposed
again, through the same executor."""

from __future__ import annotations

import httpx2
import pytest

from toolkeeper import Keeper, Principal, ToolCall
from toolkeeper.config_operators import OperatorConfig
from toolkeeper.core.states import CallStatus
from toolkeeper.ledger import MemoryStore
from toolkeeper.server import operator_app

pytestmark = pytest.mark.anyio

TOKEN = "library-operator-token-1"
ALICE = Principal(id="alice", grants=frozenset({"*"}))


async def test_an_operator_approves_a_library_keepers_call_over_http() -> None:
    runs: list[str] = []
    keeper = Keeper(ledger=MemoryStore())

    @keeper.tool(name="files.delete", effect="destructive")
    def delete(path: str) -> str:
        """Delete a file.

        Args:
            path: Which.
        """
        runs.append(path)
        return "deleted"

    app = operator_app(
        keeper,
        {"ops": OperatorConfig(token=TOKEN, role="approver")},
        principals={"alice": ALICE},
    )
    call = ToolCall(
        call_id="c1", name="files.delete", arguments={"path": "/tmp/x"}, principal=ALICE
    )
    async with (
        keeper,
        httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=app),
            base_url="http://app",
            headers={"Authorization": f"Bearer {TOKEN}"},
        ) as http,
    ):
        waiting = await keeper.execute(call)
        [pending] = (await http.get("/api/v1/approvals")).json()["approvals"]
        approved = await http.post(f"/api/v1/approvals/{pending['id']}/approve", json={})
        ran = await keeper.execute(call)
        tools = (await http.get("/api/v1/tools", params={"principal": "alice"})).json()
        login = await http.get("/console/login")
    assert waiting.status is CallStatus.AWAITING_APPROVAL
    assert pending["arguments"] == {"path": "/tmp/x"}
    assert approved.json()["decided_by"] == "operator:ops"
    assert ran.status is CallStatus.SUCCEEDED and runs == ["/tmp/x"]
    assert [t["name"] for t in tools["tools"]] == ["files.delete"]
    assert login.status_code == 200 and "content-security-policy" in login.headers


@pytest.mark.postgres
async def test_a_nul_anywhere_is_a_clear_refusal_on_postgresql_not_a_500(pg_schema: str) -> None:
    """PostgreSQL refuses a NUL in text: the desk answers before the ledger is asked."""
    from toolkeeper.ledger import PostgresStore

    from ..conftest import postgres_url

    store = PostgresStore(postgres_url(), schema=pg_schema, digest_key="k" * 32)
    keeper = Keeper(ledger=store)
    app = operator_app(keeper, {"ops": OperatorConfig(token=TOKEN, role="admin")})
    requests = [
        ("GET", "/api/v1/approvals/a%00b", None, 404),
        ("GET", "/api/v1/calls/t%00/c", None, 404),
        ("POST", "/api/v1/calls/t%00/c/settle", {"succeeded": True, "note": "x"}, 404),
        ("POST", "/api/v1/calls/t/c/settle", {"succeeded": True, "note": "a\u0000b"}, 422),
        ("POST", "/api/v1/approvals/apr_x/approve", {"note": "a\u0000b"}, 422),
        ("POST", "/api/v1/approvals/apr_x/deny", {"reason": "a\u0000b"}, 422),
        ("GET", "/api/v1/calls?tool=a%00b", None, 422),
    ]
    async with (
        keeper,
        httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=app),
            base_url="http://app",
            headers={"Authorization": f"Bearer {TOKEN}"},
        ) as http,
    ):
        for method, path, body, status in requests:
            answer = await http.request(method, path, json=body)
            assert answer.status_code == status, path


async def test_a_ledger_that_does_not_answer_is_a_503_with_a_stable_code() -> None:
    from toolkeeper.ledger import PostgresStore

    store = PostgresStore("postgresql://postgres@127.0.0.1:9/none", timeout=1, digest_key="k" * 32)
    keeper = Keeper(ledger=store)
    app = operator_app(keeper, {"ops": OperatorConfig(token=TOKEN, role="admin")})
    async with httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app),
        base_url="http://app",
        headers={"Authorization": f"Bearer {TOKEN}"},
    ) as http:
        answer = await http.get("/api/v1/approvals")
    assert (answer.status_code, answer.json()["error"]["code"]) == (503, "LEDGER_UNAVAILABLE")
