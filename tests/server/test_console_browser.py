"""The console in a real headless Chromium (Debian's, driven by Playwright): an operator signs
in, sees the request a real MCP client's call created appear in the live queue, opens it,
approves, and the client's next proposal runs once; denies another, and the client gets
APPROVAL_DENIED. Screenshots are kept under `.artifacts/console/` (see `make test`)."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from toolkeeper.ledger import ApprovalStatus
from toolkeeper.server import Deployment

from . import test_api
from .conftest import OPERATORS, TOKENS, ClientFactory
from .test_api import WIRES, _ask
from .test_gateway import code_of

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

deployment = test_api.deployment
wire_tool = test_api.wire_tool

CHROMIUM = os.environ.get("TOOLKEEPER_CHROMIUM", "/usr/bin/chromium")
"""Debian's chromium (`make test` installs it)."""
ARTIFACTS = Path(__file__).resolve().parents[2] / ".artifacts" / "console"
"""Where the screenshots are kept (ignored by git)."""


@pytest.fixture
async def page(deployment: Deployment) -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    if not shutil.which(CHROMIUM):
        pytest.fail(f"no Chromium at {CHROMIUM}: `make test` installs Debian's chromium")
    assert deployment.operators is not None
    deployment.operators.console.poll_interval = 0.05
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    async with async_playwright() as driver:
        browser = await driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        context = await browser.new_context(viewport={"width": 1280, "height": 720})
        opened = await context.new_page()
        opened.set_default_timeout(10_000)
        problems: list[str] = []
        opened.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        opened.on("pageerror", lambda e: problems.append(str(e)))
        yield opened
        await browser.close()
    assert problems == []  # no script error, no Content-Security-Policy violation


async def _sign_in(page: Any, base: str) -> None:
    await page.goto(f"{base}/console/approvals")
    assert page.url.endswith("/console/login")
    await page.fill("#token", OPERATORS["olga"])
    await page.click("button[type=submit]")
    await page.wait_for_url(f"{base}/console/approvals")


async def test_an_operator_approves_in_the_browser_and_the_call_runs_once(
    page: Any, gateway_url: str, http_client: ClientFactory, deployment: Deployment
) -> None:
    base = gateway_url.removesuffix("/mcp")
    await _sign_in(page, base)
    async with http_client(TOKENS["dave"]) as dave:
        approval_id = await _ask(dave, to="acct-7\u202e")
        link = page.locator(f"#queue a:text-is('{approval_id}')")
        await link.wait_for()  # arrived live: the page was not reloaded
        await page.screenshot(path=ARTIFACTS / "approvals-queue.png")
        await link.click()
        await page.wait_for_url(f"{base}/console/approvals/{approval_id}")
        stored = await deployment.keeper.store.get_approval(approval_id)
        assert stored is not None
        assert await page.inner_text("#digest") == stored.digest
        assert (
            await page.inner_text("#arguments") == '{\n  "amount": 5.0,\n  "to": "acct-7\\u202e"\n}'
        )
        await page.screenshot(path=ARTIFACTS / "approval.png", full_page=True)
        await page.fill("#approve-note", "checked with the bank")
        await page.click("#approve")
        await page.wait_for_selector("#approval-status:text-is('approved')")
        assert "operator:olga" in await page.inner_text("#decided-by")
        ran = await dave.call_tool("ops.wire", {"to": "acct-7\u202e"})
        assert not ran.is_error
    assert WIRES == [{"to": "acct-7\u202e", "amount": 5.0}]


async def test_an_operator_denies_in_the_browser_and_the_client_is_refused(
    page: Any, gateway_url: str, http_client: ClientFactory, deployment: Deployment
) -> None:
    base = gateway_url.removesuffix("/mcp")
    await _sign_in(page, base)
    async with http_client(TOKENS["dave"]) as dave:
        approval_id = await _ask(dave, to="acct-9")
        await page.click(f"#queue a:text-is('{approval_id}')")
        await page.fill("#deny-reason", "not our account")
        await page.click("#deny")
        await page.wait_for_selector("#approval-status:text-is('denied')")
        await page.screenshot(path=ARTIFACTS / "denied.png", full_page=True)
        again = await dave.call_tool("ops.wire", {"to": "acct-9"})
    assert code_of(again) == "APPROVAL_DENIED"
    assert WIRES == []
    denied = await deployment.keeper.store.get_approval(approval_id)
    assert denied is not None and denied.status is ApprovalStatus.DENIED
