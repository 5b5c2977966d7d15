"""The web console over HTTP: signing in, CSRF, the headers, what pages show, live updates.
(The same console in a real browser: `test_console_browser.py`.)"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import anyio
import httpx2
import pytest

from toolkeeper.ledger import ApprovalStatus
from toolkeeper.server import Deployment
from toolkeeper.server.headers import CSP

from . import test_api
from .conftest import OPERATORS, TOKENS, ClientFactory
from .test_api import _ask

pytestmark = pytest.mark.anyio

deployment = test_api.deployment
"""The API tests' gateway (no upstream), with their `ops.wire` tool."""
wire_tool = test_api.wire_tool

Browser = Callable[[str | None], AbstractAsyncContextManager[httpx2.AsyncClient]]


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None
    return found.group(1)


@pytest.fixture
def browser(gateway_url: str) -> Browser:
    """An HTTP client with a cookie jar, signed in as an operator (by name) or not at all."""
    base = gateway_url.removesuffix("/mcp")

    @asynccontextmanager
    async def client(name: str | None) -> AsyncIterator[httpx2.AsyncClient]:
        async with httpx2.AsyncClient(base_url=base, timeout=30) as http:
            if name is not None:
                form = await http.get("/console/login")
                signed = await http.post(
                    "/console/login", data={"csrf": _csrf(form.text), "token": OPERATORS[name]}
                )
                assert signed.status_code == 303
            yield http

    return client


async def test_signing_in_sets_an_httponly_strict_session_cookie(gateway_url: str) -> None:
    base = gateway_url.removesuffix("/mcp")
    async with httpx2.AsyncClient(base_url=base) as http:
        form = await http.get("/console/login")
        signed = await http.post(
            "/console/login", data={"csrf": _csrf(form.text), "token": OPERATORS["olga"]}
        )
        queue = await http.get("/console/approvals")
    cookie = next(
        v for k, v in signed.headers.multi_items() if k == "set-cookie" and "tk_session" in v
    )
    attributes = {part.strip().lower() for part in cookie.split(";")}
    assert {"httponly", "samesite=strict", "path=/console"} <= attributes
    assert signed.headers["location"] == "/console/approvals"
    assert queue.status_code == 200 and "olga (approver)" in queue.text


@pytest.mark.parametrize("token", ["wrong-token-0000000000", TOKENS["alice"], ""])
async def test_no_session_without_an_operators_token(gateway_url: str, token: str) -> None:
    base = gateway_url.removesuffix("/mcp")
    async with httpx2.AsyncClient(base_url=base) as http:
        form = await http.get("/console/login")
        refused = await http.post("/console/login", data={"csrf": _csrf(form.text), "token": token})
        page = await http.get("/console/approvals")
    assert refused.status_code == 401
    assert "tk_session" not in refused.headers.get("set-cookie", "")
    assert (page.status_code, page.headers["location"]) == (303, "/console/login")


async def test_signing_in_needs_the_forms_own_csrf_token(gateway_url: str) -> None:
    base = gateway_url.removesuffix("/mcp")
    async with httpx2.AsyncClient(base_url=base) as http:
        await http.get("/console/login")
        forged = await http.post(
            "/console/login", data={"csrf": "guessed", "token": OPERATORS["olga"]}
        )
    assert forged.status_code == 403
    assert "tk_session" not in forged.headers.get("set-cookie", "")


@pytest.mark.parametrize("csrf", [None, "guessed", "other-session"])
async def test_a_decision_without_the_sessions_csrf_token_decides_nothing(
    http_client: ClientFactory, browser: Browser, deployment: Deployment, csrf: str | None
) -> None:
    async with http_client(TOKENS["dave"]) as dave:
        approval_id = await _ask(dave)
    async with browser("olga") as olga, browser("ada") as ada:
        data = {"note": "fine"}
        if csrf == "other-session":
            data["csrf"] = _csrf((await ada.get("/console/approvals")).text)
        elif csrf is not None:
            data["csrf"] = csrf
        refused = await olga.post(f"/console/approvals/{approval_id}/approve", data=data)
    assert refused.status_code == 403
    assert 'id="error-code">CSRF<' in refused.text
    still = await deployment.keeper.store.get_approval(approval_id)
    assert still is not None and still.status is ApprovalStatus.PENDING


async def test_approving_in_the_console_records_the_operator(
    http_client: ClientFactory, browser: Browser, deployment: Deployment
) -> None:
    async with http_client(TOKENS["dave"]) as dave:
        approval_id = await _ask(dave)
    async with browser("olga") as olga:
        page = await olga.get(f"/console/approvals/{approval_id}")
        done = await olga.post(
            f"/console/approvals/{approval_id}/approve",
            data={"csrf": _csrf(page.text), "note": "looked fine"},
            follow_redirects=True,
        )
    assert 'id="approval-status">approved<' in done.text
    decided = await deployment.keeper.store.get_approval(approval_id)
    assert decided is not None and decided.decided_by == "operator:olga"


async def test_four_eyes_holds_in_the_console_too(
    http_client: ClientFactory, browser: Browser, deployment: Deployment
) -> None:
    async with http_client(TOKENS["alice"]) as alice:
        approval_id = await _ask(alice)
    async with browser("alma") as alma:
        page = await alma.get(f"/console/approvals/{approval_id}")
        refused = await alma.post(
            f"/console/approvals/{approval_id}/approve", data={"csrf": _csrf(page.text)}
        )
    assert refused.status_code == 403 and 'id="error-code">FOUR_EYES<' in refused.text
    still = await deployment.keeper.store.get_approval(approval_id)
    assert still is not None and still.status is ApprovalStatus.PENDING


async def test_a_request_shows_hidden_characters_escaped_and_markup_inert(
    http_client: ClientFactory, browser: Browser
) -> None:
    sly = "acct-7\u202e\u200b\x1b[2J<script>alert(1)</script>"
    async with http_client(TOKENS["dave"]) as dave:
        approval_id = await _ask(dave, to=sly)
    async with browser("vic") as vic:
        page = await vic.get(f"/console/approvals/{approval_id}")
    shown = re.search(r'<pre id="arguments">(.*?)</pre>', page.text, re.S)
    assert shown is not None
    assert "\\u202e\\u200b\\u001b[2J&lt;script&gt;alert(1)&lt;/script&gt;" in shown.group(1)
    assert not re.search("[\u202e\u200b\x1b]", page.text)
    assert "<script>alert" not in page.text
    assert 'id="approve"' not in page.text  # a viewer is shown no decision to make


async def test_every_page_is_served_under_a_strict_csp_with_no_inline_script(
    http_client: ClientFactory, browser: Browser
) -> None:
    async with http_client(TOKENS["alice"]) as alice:
        approval_id = await _ask(alice)
        await alice.call_tool("demo.add_note", {"text": "hello"})
    async with browser("olga") as olga:
        [row] = (await olga.get("/console/calls?tool=ops.wire")).text.split("/console/calls/")[1:2]
        call_path = "/console/calls/" + row.split('"')[0]
        pages = [
            "/console/login",
            "/console/approvals",
            "/console/approvals?status=all",
            f"/console/approvals/{approval_id}",
            "/console/calls",
            call_path,
            "/console/unknown",
            "/console/audit?principal=alice",
            "/console/tools?principal=bob",
            "/console/search",
        ]
        answers = [await olga.get(path) for path in pages]
    for path, answer in zip(pages, answers, strict=True):
        assert answer.status_code == 200, path
        assert answer.headers["content-security-policy"] == CSP
        assert answer.headers["x-frame-options"] == "DENY"
        assert answer.headers["cache-control"] == "no-store"
        assert not re.search(r"<script(?![^>]*\bsrc=)", answer.text), path
        assert " style=" not in answer.text and "<style" not in answer.text, path
        assert len(answer.content) < 100_000, path
    assert "AWAITING_APPROVAL" in answers[5].text  # the call's timeline


async def test_the_search_playground_shows_only_a_principals_tools(browser: Browser) -> None:
    async with browser("vic") as vic:
        page = await vic.get("/console/search")
        found = await vic.post(
            "/console/search",
            data={"csrf": _csrf(page.text), "query": "delete every note", "principal": "alice"},
        )
        as_bob = await vic.post(
            "/console/search",
            data={"csrf": _csrf(page.text), "query": "delete every note", "principal": "bob"},
        )
    assert "<td>demo.clear_notes</td>" in found.text
    assert "demo.clear_notes" not in as_bob.text


async def test_signing_out_ends_the_session(browser: Browser) -> None:
    async with browser("olga") as olga:
        page = await olga.get("/console/approvals")
        out = await olga.post("/console/logout", data={"csrf": _csrf(page.text)})
        sid = out.headers.get("set-cookie", "")
        again = await olga.get("/console/approvals")
    assert out.status_code == 303 and "tk_session=" in sid
    assert again.status_code == 303


async def test_the_queue_is_live_new_requests_arrive_as_events(
    http_client: ClientFactory, browser: Browser, deployment: Deployment
) -> None:
    assert deployment.operators is not None
    deployment.operators.console.poll_interval = 0.05
    async with browser("vic") as vic, vic.stream("GET", "/console/events") as events:
        assert events.headers["content-type"].startswith("text/event-stream")
        lines = events.aiter_lines()

        async def next_event() -> list[dict[str, str]]:
            async for line in lines:
                if line.startswith("data: "):
                    return list(json.loads(line.removeprefix("data: ")))
            raise AssertionError("the stream ended")

        with anyio.fail_after(60):  # (a client's connection: seconds on a busy machine)
            assert await next_event() == []
            async with http_client(TOKENS["dave"]) as dave:
                approval_id = await _ask(dave)
            [arrived] = await next_event()
    assert (arrived["id"], arrived["tool"], arrived["principal"]) == (
        approval_id,
        "ops.wire",
        "dave",
    )


async def test_the_event_stream_needs_a_session(gateway_url: str) -> None:
    base = gateway_url.removesuffix("/mcp")
    async with httpx2.AsyncClient(base_url=base) as http:
        answer = await http.get("/console/events")
    assert answer.status_code == 303


async def test_pages_stay_under_100_kb_whatever_the_ledger_holds(
    browser: Browser, deployment: Deployment
) -> None:
    from msgspec.structs import replace

    from tests.ledger.records import call
    from toolkeeper.core.states import CallStatus

    store = deployment.keeper.store
    for n in range(150):
        record, _ = await store.claim_call(
            replace(call(f"big-{n}", task_id="t-big"), arguments={"blob": "x" * 5_000})
        )
        await store.transition(
            "t-big",
            record.call_id,
            expected=CallStatus.RUNNING,
            target=CallStatus.UNKNOWN_OUTCOME,
        )
    async with browser("vic") as vic:
        pages = [
            "/console/calls?limit=500",
            "/console/unknown?limit=500",
            "/console/audit?limit=500",
        ]
        answers = [await vic.get(path) for path in pages]
    for path, answer in zip(pages, answers, strict=True):
        assert answer.status_code == 200, path
        assert len(answer.content) < 100_000, path
    assert answers[1].text.count("/console/calls/t-big/") == 100  # the most a page lists
