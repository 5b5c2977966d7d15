"""Promise 4: nothing secret reaches the model or the records.

A `SecretStr` argument carries a canary. The tool echoes it in its result and quotes it in an
exception (a tool's own words, which toolkeeper does not write but does pass on). The canary
is then searched for where an attacker looks: what every dialect shows the model, what the
gateway sends a client, the ledger file's bytes, the audit file, the log. And a short secret
(a PIN) is brute-forced from what the records and the gateway's call ids give away.
"""

from __future__ import annotations

import hashlib
import json
import logging
import stat
from pathlib import Path

import pytest

from toolkeeper import Keeper, ToolCall, ToolResult
from toolkeeper.dialects.registry import DIALECTS, get_dialect
from toolkeeper.schema.canonical import canonical_json
from toolkeeper.server import Deployment

from .conftest import TOKENS, TRANSPORTS, ClientFactory, gateway_client, text_of
from .tools import CANARY, MALLORY

pytestmark = pytest.mark.anyio

PATHS = ["execute", "execute_many", "call_tool"]


def _login(user: str, password: str, *, call_id: str, via_call_tool: bool) -> ToolCall:
    arguments = {"user": user, "password": password}
    if via_call_tool:
        return ToolCall(
            call_id=call_id,
            name="call_tool",
            arguments={"name": "adv.login", "arguments": arguments},
            principal=MALLORY,
        )
    return ToolCall(call_id=call_id, name="adv.login", arguments=arguments, principal=MALLORY)


async def _logins(keeper: Keeper, path: str) -> list[ToolResult]:
    """An echoed secret and a quoted one, each proposed twice (the second a replay)."""
    via = path == "call_tool"
    if via:
        keeper.enable_discovery()
    calls = [
        _login("ann", CANARY, call_id="echo", via_call_tool=via),
        _login("boom", CANARY, call_id="quote", via_call_tool=via),
    ] * 2
    async with keeper:
        if path == "execute_many":
            return await keeper.execute_many(calls[:2]) + await keeper.execute_many(calls[2:])
        return [await keeper.execute(call) for call in calls]


def _ledger_bytes(tmp_path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(tmp_path.glob("ledger.db*")))


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
@pytest.mark.parametrize("path", PATHS)
async def test_an_echoed_secret_is_not_shown_to_the_model(
    keeper: Keeper, path: str, dialect: str
) -> None:
    results = await _logins(keeper, path)
    for result in results:
        shown = json.dumps(get_dialect(dialect).format_result(result), ensure_ascii=False)
        assert CANARY not in shown


@pytest.mark.parametrize("path", PATHS)
async def test_an_echoed_secret_is_not_in_the_ledger_file(
    keeper: Keeper, tmp_path: Path, path: str
) -> None:
    await _logins(keeper, path)
    assert CANARY.encode() not in _ledger_bytes(tmp_path)


@pytest.mark.parametrize("path", PATHS)
async def test_a_secret_is_not_in_the_audit_file(keeper: Keeper, tmp_path: Path, path: str) -> None:
    await _logins(keeper, path)
    audit = tmp_path / "ledger.audit.jsonl"
    assert audit.read_text()  # (the events are there: the search is not vacuous)
    assert CANARY not in audit.read_text()


@pytest.mark.parametrize("path", PATHS)
async def test_a_secret_quoted_in_an_exception_is_not_logged(
    keeper: Keeper, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        await _logins(keeper, path)
    assert caplog.records  # (the failure was logged: the search is not vacuous)
    assert CANARY not in caplog.text


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_secret_is_not_sent_to_a_gateway_client(tmp_path: Path, transport: str) -> None:
    async with gateway_client(transport, tmp_path, "mallory") as mallory:
        echoed = await mallory.call_tool("adv.login", {"user": "ann", "password": CANARY})
        quoted = await mallory.call_tool("adv.login", {"user": "boom", "password": CANARY})
    for result in (echoed, quoted):
        assert CANARY not in text_of(result)
        assert CANARY not in json.dumps(result.structured_content or {})


# -- brute force ------------------------------------------------------------------------------

PINS = [f"{n:04d}" for n in range(10_000)]


def _guesses(principal: str, tool: str, pin: str) -> set[str]:
    """What an attacker who knows the other arguments computes for one guess: the SHA-256 of
    the canonical arguments, and of the identity the gateway derives call ids from (as the
    first 16 hex digits, enough to recognise either anywhere)."""
    canonical = canonical_json({"user": "boom", "password": pin})
    identity = f"{principal}\x00{tool}\x00{canonical}".encode()
    return {
        hashlib.sha256(canonical.encode()).hexdigest()[:16],
        hashlib.sha256(identity).hexdigest()[:16],
    }


def _cracked(haystack: str, principal: str, tool: str) -> list[str]:
    return [pin for pin in PINS if any(g in haystack for g in _guesses(principal, tool, pin))]


async def test_a_pin_cannot_be_brute_forced_from_the_ledger_file(
    keeper: Keeper, tmp_path: Path
) -> None:
    async with keeper:
        await keeper.execute(_login("boom", "4821", call_id="pin", via_call_tool=False))
    haystack = _ledger_bytes(tmp_path).decode("latin-1")
    assert _cracked(haystack, MALLORY.id, "adv.login") == []


async def test_a_pin_cannot_be_brute_forced_from_the_gateways_call_ids(
    http_client: ClientFactory, deployment: Deployment
) -> None:
    async with http_client(TOKENS["mallory"]) as mallory:
        failed = await mallory.call_tool("adv.login", {"user": "boom", "password": "4821"})
    call_id = str((failed.meta or {}).get("dev.toolkeeper/call-id", ""))
    records = await deployment.keeper.store.list_calls()
    seen = " ".join([call_id, *(r.call_id for r in records), *(r.digest for r in records)])
    assert _cracked(seen, "mallory", "adv.login") == []


async def test_the_ledger_and_audit_files_are_readable_by_their_owner_only(
    keeper: Keeper, tmp_path: Path
) -> None:
    async with keeper:
        await keeper.execute(_login("ann", CANARY, call_id="c", via_call_tool=False))
    modes = _modes(tmp_path)
    assert "ledger.db" in modes and "ledger.audit.jsonl" in modes
    assert all(mode & 0o077 == 0 for mode in modes.values()), modes


def _modes(folder: Path) -> dict[str, int]:
    """The permission bits of the ledger's files and the audit file."""
    files = [*folder.glob("ledger.db*"), folder / "ledger.audit.jsonl"]
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in files if p.exists()}
