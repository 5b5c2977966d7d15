"""A secret argument echoed by its tool, quoted in its failure, logged in its traceback: a
canary searched for in everything the model sees and everything kept."""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import Field, SecretStr

from toolkeeper import Keeper, ToolCall, ToolResult
from toolkeeper.connectors.base import ToolOutput
from toolkeeper.core.signals import OutcomeUnknown, RetryLater, ToolFailed
from toolkeeper.dialects import DIALECTS
from toolkeeper.dialects.base import shown_result
from toolkeeper.observe.audit import JsonlAuditSink
from toolkeeper.observe.redact import REDACTED, hidden_values, mask
from toolkeeper.policy.rules import RuleInput

from ..conftest import APP

pytestmark = pytest.mark.anyio

CORE = "CANARY-7f3b9c"
SECRET = f'zq-{CORE}-"end\\'
"""A quote and a backslash: JSON text writes it escaped, and the escaped form is masked too."""
PIN = 48151623
"""A sensitive number: echoed as a number, or as its digits in text."""


def _keeper(tmp_path: Path) -> Keeper:
    keeper = Keeper(
        principal=APP,
        ledger=f"sqlite:///{tmp_path / 'l.db'}",
        audit=JsonlAuditSink(tmp_path / "a.jsonl"),
    )

    @keeper.tool(effect="read_only")
    def login(user: str, password: SecretStr) -> dict[str, Any]:
        said = password.get_secret_value()
        return {
            "user": user,
            "echo": said,
            "note": f"logged in with {said}",
            "json": json.dumps({"password": said}),
            "ascii_json": json.dumps({"password": said + "é"}, ensure_ascii=True),
            said: [{"deep": [said]}],
        }

    @keeper.tool(effect="write", permissions=[])
    def unlock(pin: Annotated[int, Field(json_schema_extra={"x-sensitive": True})]) -> Any:
        return {"pin": pin, "text": f"pin {pin} accepted", "other": 7}

    @keeper.tool(effect="read_only")
    def crash(password: SecretStr) -> str:
        raise RuntimeError(f"could not log in with {password.get_secret_value()}")

    @keeper.tool(effect="read_only")
    def refuse(password: SecretStr) -> str:
        said = password.get_secret_value()
        raise ToolFailed(f"wrong password {said}", details={"tried": said, "n": [said]})

    @keeper.tool(effect="read_only")
    def blocks(password: SecretStr) -> ToolOutput:
        said = password.get_secret_value()
        return ToolOutput(
            data={"ok": said},
            content=({"type": "text", "text": f"hello {said}"},),
        )

    def broken_rule(inp: RuleInput) -> None:
        raise ValueError(f"cannot judge {inp.arguments['password']}")

    def odd_rule(inp: RuleInput) -> Any:
        return dict(inp.arguments)  # (not a Decision: logged, masked)

    @keeper.tool(effect="read_only", rules=[broken_rule])
    def judged(password: SecretStr) -> str:
        return "never"

    @keeper.tool(effect="read_only", rules=[odd_rule])
    def judged_oddly(password: SecretStr) -> str:
        return "never"

    keeper.enable_discovery()
    return keeper


def _calls() -> list[ToolCall]:
    secret = {"password": SECRET}
    return [
        ToolCall(call_id="1", name="login", arguments={"user": "ann", **secret}),
        ToolCall(call_id="2", name="unlock", arguments={"pin": PIN}),
        ToolCall(call_id="3", name="crash", arguments=secret),
        ToolCall(call_id="4", name="refuse", arguments=secret),
        ToolCall(call_id="5", name="blocks", arguments=secret),
        ToolCall(call_id="7", name="judged", arguments=secret),
        ToolCall(call_id="8", name="judged_oddly", arguments=secret),
        ToolCall(
            call_id="6",
            name="call_tool",
            arguments={"name": "login", "arguments": {"user": "bob", **secret}},
        ),
    ]


def _leaks(text: str) -> bool:
    return CORE in text or str(PIN) in text


def _kept_leaks(folder: Path) -> list[str]:
    """The files of the ledger (its WAL too) and the audit log holding a secret's bytes."""
    return [
        kept.name
        for kept in (*folder.glob("l.db*"), folder / "a.jsonl")
        if CORE.encode() in kept.read_bytes() or str(PIN).encode() in kept.read_bytes()
    ]


async def test_a_secret_argument_reaches_neither_the_model_nor_any_record_nor_a_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The tool's echo of a `SecretStr` was shown to the model in every dialect and stored
    in clear in the ledger; an exception quoting it was logged whole."""
    caplog.set_level(logging.DEBUG)
    keeper = _keeper(tmp_path)
    results: list[ToolResult] = []
    async with keeper:
        for call in _calls():
            results.append(await keeper.execute(call))  # first run
            results.append(await keeper.execute(call))  # replay from the ledger
        renamed = [
            ToolCall(call_id=f"m{c.call_id}", name=c.name, arguments=c.arguments) for c in _calls()
        ]
        results += await keeper.execute_many(renamed)
    assert results[0].ok and results[0].data["user"] == "ann"
    assert results[0].data["echo"] == REDACTED and results[1].replayed
    assert results[2].ok and results[2].data["other"] == 7
    assert results[2].data["pin"] == REDACTED
    assert results[14].ok and results[14].data["user"] == "bob"
    shown = [repr(r) for r in results]
    for result in results:
        for dialect in DIALECTS.values():
            shown.append(json.dumps(dialect().format_result(result), default=str))
    assert [s for s in shown if _leaks(s)] == []
    assert _kept_leaks(tmp_path) == []
    # (the tracebacks are logged, masked)
    assert "could not log in" in caplog.text and "cannot judge" in caplog.text
    assert "not a Decision" in caplog.text
    assert not _leaks(caplog.text)


def test_masking_covers_json_text_and_leaves_short_values_and_other_numbers_alone() -> None:
    arguments = {"token": SECRET, "pin": "123", "code": PIN}
    redacted = {"token": REDACTED, "pin": REDACTED, "code": REDACTED}
    secrets = hidden_values(arguments, redacted)
    masked = mask(
        {
            "t": json.dumps([SECRET]),
            "a": json.dumps(SECRET + "é", ensure_ascii=True),
            "n": [PIN, PIN + 1, float(PIN), PIN * 10 + 7, float(PIN) + 0.5],
            "short": "pin 123",
        },
        secrets,
    )
    assert CORE not in json.dumps(masked)
    assert masked["n"] == [REDACTED, PIN + 1, REDACTED, PIN * 10 + 7, PIN + 0.5]
    assert masked["short"] == "pin 123"


async def test_a_secret_the_tool_writes_with_json_escapes_or_as_a_float_is_masked(
    tmp_path: Path,
) -> None:
    """Any character of JSON text may be an escape (`\\u0043`, `\\/`), and a PIN may come
    back as a float: each showed the secret to the model and kept it in the ledger."""
    keeper = Keeper(
        principal=APP,
        ledger=f"sqlite:///{tmp_path / 'l.db'}",
        audit=JsonlAuditSink(tmp_path / "a.jsonl"),
    )
    secret = f"{CORE}/é😀"

    def escaped(text: str) -> str:
        return "".join(f"\\u{ord(c):04X}" if ord(c) < 0x10000 else c for c in text)

    @keeper.tool(effect="read_only")
    def echo(password: SecretStr) -> list[str]:
        said = password.get_secret_value()
        return [
            escaped(said),
            said.replace("/", "\\/"),
            json.dumps(json.dumps({"p": said}, ensure_ascii=True)),
        ]

    @keeper.tool(effect="read_only")
    def unlock(pin: Annotated[int, Field(json_schema_extra={"x-sensitive": True})]) -> Any:
        return {"as_float": pin * 1.0, "other": 7.5}

    async with keeper:
        echoed = await keeper.execute(
            ToolCall(call_id="1", name="echo", arguments={"password": secret})
        )
        unlocked = await keeper.execute(
            ToolCall(call_id="2", name="unlock", arguments={"pin": PIN})
        )
    assert echoed.ok and unlocked.ok
    assert [REDACTED in text for text in echoed.data] == [True, True, True]
    assert unlocked.data == {"as_float": REDACTED, "other": 7.5}
    assert "\\u0043\\u0041\\u004E" not in repr(echoed) and not _leaks(repr(echoed))
    assert _kept_leaks(tmp_path) == []


async def test_a_secret_in_the_effect_reference_is_kept_in_no_record(tmp_path: Path) -> None:
    """A tool that names its effect after a card number ('charge-4111...') had it kept in
    the ledger's effect_ref in clear, and handed back in the result."""
    keeper = Keeper(
        principal=APP,
        ledger=f"sqlite:///{tmp_path / 'l.db'}",
        audit=JsonlAuditSink(tmp_path / "a.jsonl"),
    )

    @keeper.tool(effect="write", permissions=[])
    def charge(card: SecretStr) -> ToolOutput:
        return ToolOutput(data="charged", effect_ref=f"charge-{card.get_secret_value()}")

    call = ToolCall(call_id="1", name="charge", arguments={"card": SECRET})
    async with keeper:
        result = await keeper.execute(call)
        again = await keeper.execute(call)
    assert result.effect_ref == again.effect_ref == f"charge-{REDACTED}"
    assert _kept_leaks(tmp_path) == []


@given(
    secret=st.text(min_size=4, max_size=12),
    levels=st.lists(st.booleans(), max_size=3),
    every=st.booleans(),
)
def test_a_secret_written_as_json_text_at_any_depth_is_masked(
    secret: str, levels: list[bool], every: bool
) -> None:
    """Each level is JSON text of the one below (ASCII-only or not); `every` writes each
    character of the secret as its \\u escape first, as some encoders do."""
    written = "".join(f"\\u{u:04x}" for u in _units(secret)) if every else secret
    for ascii_only in levels:
        written = json.dumps(written, ensure_ascii=ascii_only)[1:-1]
    masked = mask(f"<{written}>", (secret,))
    assert written not in masked and REDACTED in masked


def _units(text: str) -> list[int]:
    raw = text.encode("utf-16-be", "surrogatepass")
    return [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2)]


def test_masking_a_long_run_of_escapes_takes_linear_time() -> None:
    """A pattern that matched a secret's escapes backtracked over a run of backslashes:
    200,000 of them held the event loop for seconds (a result of 1 MiB, for minutes). Eight
    times the text takes about eight times the CPU time, not sixty-four (a busy machine moves
    each figure, so the best of three runs of each is compared)."""

    def cpu(n: int) -> float:
        best = math.inf
        for _ in range(3):
            started = time.thread_time()
            for text in ("\\" * (2 * n), "\\u0041" * n, "a\\" * n):
                assert mask(text, (f"A{CORE}\\", "AAAA")) is not None
            best = min(best, time.thread_time() - started)
        return max(best, 1e-6)

    assert cpu(40_000) / cpu(5_000) < 24


async def test_a_secret_in_a_retry_an_unknown_outcome_or_a_cut_result_is_masked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Each retried attempt quoting the secret, a write whose outcome is unknown, a tool that
    raises on a later attempt, and a result cut at the gateway's size limit."""
    caplog.set_level(logging.DEBUG)
    keeper = Keeper(
        principal=APP,
        ledger=f"sqlite:///{tmp_path / 'l.db'}",
        audit=JsonlAuditSink(tmp_path / "a.jsonl"),
        sleep=lambda _: anyio.lowlevel.checkpoint(),
    )
    attempts: list[int] = []

    @keeper.tool(effect="read_only")
    def flaky(password: SecretStr) -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise RetryLater(f"busy for {password.get_secret_value()}", after=0)
        raise RuntimeError(f"gave up on {password.get_secret_value()}")

    @keeper.tool(effect="write", permissions=[])
    def send(password: SecretStr) -> str:
        raise OutcomeUnknown(f"lost the line while sending {password.get_secret_value()}")

    @keeper.tool(effect="read_only")
    def long(password: SecretStr) -> str:
        return "x" * 50 + password.get_secret_value() * 3 + "y" * 50_000

    secret = {"password": SECRET}
    async with keeper:
        results = [
            await keeper.execute(ToolCall(call_id=name, name=name, arguments=secret))
            for name in ("flaky", "send", "long")
        ]
    assert [r.status.value for r in results] == ["FAILED", "UNKNOWN_OUTCOME", "SUCCEEDED"]
    assert len(attempts) > 1
    mcp = DIALECTS["mcp"]()
    shown = [repr(r) for r in results] + [
        json.dumps(mcp.format_result(shown_result(r, 60)), default=str) for r in results
    ]
    assert [s for s in shown if _leaks(s)] == []
    assert _kept_leaks(tmp_path) == []
    assert "gave up on" in caplog.text and not _leaks(caplog.text)


def test_a_long_text_holding_a_secret_only_as_escapes_is_masked_whole() -> None:
    """Finding where each escape of it lies takes memory in proportion to the text (eight
    bytes a character, twice): past a MiB, such a text goes as REDACTED whole."""
    escaped = "".join(f"\\u{ord(c):04x}" for c in CORE)
    long = "x" * 2**21
    assert mask(long + escaped, (CORE,)) == REDACTED
    assert mask(f"{long}\\n{CORE}", (CORE,)) == f"{long}\\n{REDACTED}"
    assert mask(f"x\\n{escaped}y", (CORE,)) == f"x\\n{REDACTED}y"
