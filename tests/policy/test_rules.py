import json
from pathlib import Path
from typing import Annotated

import anyio
import msgspec
import pytest
from pydantic import BaseModel, Field, SecretStr

from toolkeeper import (
    CallStatus,
    ErrorCode,
    Keeper,
    ToolCall,
    at_most,
    deny,
    domain_in,
    path_inside,
    require_approval,
)
from toolkeeper.observe.audit import JsonlAuditSink
from toolkeeper.observe.redact import REDACTED
from toolkeeper.policy.rules import Decision, RuleInput
from toolkeeper.testing import MemoryAuditSink, MemoryStore

from ..conftest import APP

pytestmark = pytest.mark.anyio


async def test_business_rules_guard_arguments(tmp_path: Path) -> None:
    keeper = Keeper(principal=APP, ledger=MemoryStore())
    done: list[str] = []

    @keeper.tool(
        effect="write",
        rules=[
            path_inside("path", tmp_path),
            domain_in("url", ["example.org"]),
            at_most("amount", 100, approve_above=True),
        ],
    )
    async def act(path: str, url: str, amount: int) -> str:
        done.append(path)
        return "ok"

    async def run(call_id: str, **args: object) -> object:
        return await keeper.execute(ToolCall(call_id=call_id, name="act", arguments=args))

    async with keeper:
        a = str(tmp_path / "a.txt")
        ok = await run("1", path=a, url="https://docs.example.org/x", amount=5)
        escape = await run("2", path=f"{tmp_path}/../x", url="https://example.org", amount=5)
        link = await run("3", path=a, url="https://example.org.evil.com/", amount=5)
        big = await run("4", path=a, url="https://example.org", amount=500)
    assert ok.status is CallStatus.SUCCEEDED  # type: ignore[attr-defined]
    assert escape.error.code is ErrorCode.PERMISSION_DENIED  # type: ignore[attr-defined]
    assert escape.error.details["violations"][0]["pointer"] == "/path"  # type: ignore[attr-defined]
    assert link.error.code is ErrorCode.PERMISSION_DENIED  # type: ignore[attr-defined]
    assert big.status is CallStatus.AWAITING_APPROVAL  # type: ignore[attr-defined]
    assert done == [str(tmp_path / "a.txt")]


async def test_an_amount_above_the_cap_asks_for_approval_without_quoting_it() -> None:
    """The reason said `salary=987654.25 is above 1000`: a sensitive amount, redacted in the
    request's arguments, reached the model, the request and the audit log in its reason."""
    audit = MemoryAuditSink()
    keeper = Keeper(principal=APP, ledger=MemoryStore(), audit=audit)

    @keeper.tool(
        effect="write", permissions=[], rules=[at_most("salary", 1000, approve_above=True)]
    )
    async def pay(salary: Annotated[float, Field(json_schema_extra={"x-sensitive": True})]) -> str:
        return "paid"

    async with keeper:
        result = await keeper.execute(
            ToolCall(call_id="1", name="pay", arguments={"salary": 987654.25})
        )
        [request] = await keeper.approvals.pending()
    assert result.error is not None and result.error.code is ErrorCode.APPROVAL_REQUIRED
    assert request.reason == "salary is above 1000"
    seen = json.dumps(result.error.to_dict()) + json.dumps(msgspec.to_builtins(request))
    seen += json.dumps(msgspec.to_builtins(list(audit.events)), default=str)
    assert "987654" not in seen


async def test_global_rules_run_after_tool_rules() -> None:
    seen: list[str] = []

    def no_weekend(inp: object) -> object:
        seen.append("global")
        return deny("not on weekends")

    keeper = Keeper(principal=APP, ledger=MemoryStore(), rules=[no_weekend])

    @keeper.tool(effect="read_only", rules=[lambda inp: seen.append("tool")])
    async def ping() -> str:
        return "pong"

    async with keeper:
        result = await keeper.execute(ToolCall(call_id="1", name="ping"))
    assert result.error is not None and result.error.code is ErrorCode.PERMISSION_DENIED
    assert seen == ["tool", "global"]


def _broken(inp: object) -> object:
    raise KeyError("internal/secret/path")


@pytest.mark.parametrize(
    "rule", [_broken, lambda inp: True, lambda inp: False, lambda inp: "deny", lambda inp: 0]
)
async def test_a_broken_rule_or_one_answering_no_decision_fails_closed(rule: object) -> None:
    """A rule answering True or "deny" was an INTERNAL_ERROR, with nothing recorded."""
    ran: list[str] = []
    keeper = Keeper(principal=APP, ledger=MemoryStore())

    @keeper.tool(effect="read_only", rules=[rule])
    async def ping() -> str:
        ran.append("ping")
        return "pong"

    async with keeper:
        result = await keeper.execute(ToolCall(call_id="1", name="ping"))
        record = await keeper.store.get_call("default", "1")
    assert result.error is not None and result.error.code is ErrorCode.PERMISSION_DENIED
    assert "secret" not in result.error.message
    assert record is not None and record.status is CallStatus.REJECTED
    assert ran == []


async def test_a_rule_that_never_answers_fails_closed_within_the_tools_timeout() -> None:
    """An async rule waiting on a service that never answered held the call (and every
    proposal of its id, and an `execute_many` batch) for ever, with nothing recorded."""
    ran: list[str] = []
    never = anyio.Event()

    async def ask_policy_service(inp: object) -> object:
        await never.wait()
        return None

    keeper = Keeper(principal=APP, ledger=MemoryStore())

    @keeper.tool(effect="write", timeout=0.05, rules=[ask_policy_service])
    async def send() -> str:
        ran.append("send")
        return "sent"

    async with keeper:
        with anyio.fail_after(5):
            result = await keeper.execute(ToolCall(call_id="1", name="send"))
        record = await keeper.store.get_call("default", "1")
    assert result.error is not None and result.error.code is ErrorCode.PERMISSION_DENIED
    assert record is not None and record.status is CallStatus.REJECTED
    assert ran == []


async def test_ready_made_rules_check_every_element_and_fail_closed(tmp_path: Path) -> None:
    """A list of paths was checked as its text (and passed); a pointer, a misspelled name or a
    value of another type let any amount through."""
    keeper = Keeper(principal=APP, ledger=MemoryStore())
    done: list[object] = []

    class Payment(BaseModel):
        amount: float
        note: str = ""

    @keeper.tool(effect="write", permissions=[], rules=[path_inside("paths", tmp_path)])
    async def remove(paths: list[str]) -> int:
        done.append(paths)
        return len(paths)

    @keeper.tool(effect="write", permissions=[], rules=[at_most("/payment/amount", 100)])
    async def pay(payment: Payment) -> str:
        done.append(payment.amount)
        return "paid"

    @keeper.tool(effect="write", permissions=[], rules=[at_most("amount", 100)])
    async def misspelled(amount_usd: float) -> str:
        done.append(amount_usd)
        return "paid"

    @keeper.tool(effect="write", permissions=[], rules=[at_most("amount", 100)])
    async def textual(amount: str) -> str:
        done.append(amount)
        return "paid"

    async with keeper:
        a, bc = str(tmp_path / "a"), str(tmp_path / "b" / "c")
        assert await _code(keeper, "remove", paths=[a, bc]) is None
        assert (
            await _code(keeper, "remove", paths=[a, "/etc/passwd"]) is ErrorCode.PERMISSION_DENIED
        )
        assert await _code(keeper, "pay", payment={"amount": 50}) is None
        assert await _code(keeper, "pay", payment={"amount": 1e6}) is ErrorCode.PERMISSION_DENIED
        assert await _code(keeper, "misspelled", amount_usd=1e6) is ErrorCode.PERMISSION_DENIED
        assert await _code(keeper, "textual", amount="1000000") is ErrorCode.PERMISSION_DENIED
    assert done == [[str(tmp_path / "a"), str(tmp_path / "b" / "c")], 50]


async def test_decisions_written_with_text_mean_the_members() -> None:
    """`Decision(verdict="deny")` let the call run: verdicts are compared by identity."""
    keeper = Keeper(principal=APP, ledger=MemoryStore())
    ran: list[str] = []

    @keeper.tool(
        effect="write",
        permissions=[],
        rules=[lambda inp: Decision(verdict="deny", reason="blocked", code="INVALID_ARGUMENTS")],  # type: ignore[arg-type]
    )
    async def wipe() -> str:
        ran.append("wipe")
        return "wiped"

    async with keeper:
        result = await keeper.execute(ToolCall(call_id="1", name="wipe"))
    assert result.error is not None and result.error.code is ErrorCode.INVALID_ARGUMENTS
    assert result.error.message == "blocked" and ran == []
    with pytest.raises(ValueError, match="maybe"):
        Decision(verdict="maybe")  # type: ignore[arg-type]


async def test_pointers_go_through_arrays_and_a_keeper_wide_rule_skips_tools_without_it(
    tmp_path: Path,
) -> None:
    """`/files/path` over an array of objects, or a typo past the first segment, let the call
    through; a keeper-wide `at_most("amount")` refused every tool without an amount."""

    class File(BaseModel):
        path: str

    class Payment(BaseModel):
        amount: float

    keeper = Keeper(principal=APP, ledger=MemoryStore(), rules=[at_most("amount", 100)])
    done: list[object] = []

    @keeper.tool(effect="write", permissions=[], rules=[path_inside("/files/path", tmp_path)])
    async def remove(files: list[File]) -> int:
        done.append("remove")
        return len(files)

    @keeper.tool(effect="write", permissions=[], rules=[at_most("/payments/amout", 100)])
    async def pay(payments: list[Payment]) -> str:
        done.append("pay")
        return "paid"

    @keeper.tool(effect="read_only")
    async def get_order(order_id: str) -> str:
        return order_id

    @keeper.tool(effect="write", permissions=[])
    async def refund(amount: float) -> str:
        done.append(amount)
        return "refunded"

    async with keeper:
        a, b = str(tmp_path / "a"), str(tmp_path / "b")
        assert await _code(keeper, "remove", files=[{"path": a}, {"path": b}]) is None
        denied = await _code(keeper, "remove", files=[{"path": a}, {"path": "/etc/passwd"}])
        assert denied is ErrorCode.PERMISSION_DENIED
        assert await _code(keeper, "pay", payments=[{"amount": 5}]) is ErrorCode.PERMISSION_DENIED
        assert await _code(keeper, "get_order", order_id="o1") is None
        assert await _code(keeper, "refund", amount=50) is None
        assert await _code(keeper, "refund", amount=5000) is ErrorCode.PERMISSION_DENIED
    assert done == ["remove", 50]


async def test_a_rule_checks_what_is_given_even_where_the_schema_is_loose() -> None:
    """A keeper-wide `at_most("amount")` skipped an upstream tool whose schema says only
    "object" (or nests `amount` in allOf), and a pointer through arrays of arrays checked
    nothing: 1e6 went through."""
    from toolkeeper import ToolSpec
    from toolkeeper.catalog.registry import Tool

    keeper = Keeper(principal=APP, ledger=MemoryStore(), rules=[at_most("amount", 100)])
    paid: list[object] = []

    class Upstream:  # what an upstream server's tool looks like to the keeper
        async def invoke(self, spec: object, arguments: object, ctx: object) -> str:
            paid.append(arguments)
            return "paid"

    schemas = {
        "loose": {"type": "object"},
        "nested": {"type": "object", "allOf": [{"properties": {"amount": {"type": "number"}}}]},
    }
    for name, schema in schemas.items():
        spec = ToolSpec(name=name, effect="write", permissions=(), input_schema=schema)  # type: ignore[arg-type]
        keeper.catalog.add(Tool(spec=spec, connector=Upstream()))

    @keeper.tool(effect="write", permissions=[], rules=[at_most("/rows/amount", 100)])
    async def batch(rows: list[list[dict[str, float]]]) -> str:
        paid.append(rows)
        return "paid"

    async with keeper:
        for name in schemas:
            result = await keeper.execute(
                ToolCall(call_id=name, name=name, arguments={"amount": 1e6})
            )
            assert result.error is not None, name
        deep = await keeper.execute(
            ToolCall(call_id="b", name="batch", arguments={"rows": [[{"amount": 1e6}]]})
        )
    assert deep.error is not None and deep.error.code is ErrorCode.PERMISSION_DENIED
    assert paid == []


async def _code(keeper: Keeper, name: str, **args: object) -> ErrorCode | None:
    """The error code of one call of `name` with `args` (None when it succeeded)."""
    result = await keeper.execute(ToolCall(call_id=f"{name}{args}", name=name, arguments=args))
    return result.error.code if result.error is not None else None


async def test_a_rule_quoting_a_sensitive_argument_in_its_reason_shows_it_masked(
    tmp_path: Path,
) -> None:
    keeper = Keeper(
        principal=APP,
        ledger=f"sqlite:///{tmp_path / 'l.db'}",
        audit=JsonlAuditSink(tmp_path / "a.jsonl"),
    )

    def revoked(inp: RuleInput) -> Decision | None:
        token = inp.arguments["token"]
        if token.startswith("old"):
            return deny(f"token {token} is revoked", pointer="/token")
        return require_approval(f"token {token} is new")

    @keeper.tool(effect="write", rules=[revoked])
    async def push(token: SecretStr) -> str:
        return "pushed"

    async with keeper:
        denied = await keeper.execute(
            ToolCall(call_id="c1", name="push", arguments={"token": "old-SECRET"})
        )
        waiting = await keeper.execute(
            ToolCall(call_id="c2", name="push", arguments={"token": "new-SECRET"})
        )
        [request] = await keeper.approvals.pending()
        records = await keeper.store.list_calls()
    assert denied.error is not None and waiting.error is not None
    assert denied.error.message == f"token {REDACTED} is revoked"
    assert request.reason == f"token {REDACTED} is new"
    shown = json.dumps([denied.error.to_dict(), waiting.error.to_dict()])
    stored = json.dumps(msgspec.to_builtins([*records, request]), default=str)
    stored += (tmp_path / "a.jsonl").read_text()
    for secret in ("old-SECRET", "new-SECRET"):
        assert secret not in shown and secret not in stored, secret


async def test_a_domain_given_as_text_is_that_domain_and_no_url_without_a_host_passes() -> None:
    """`domain_in("url", "example.com")` allowed the domains of its characters, "." among them
    as "": every URL without a host (`file:///etc/passwd`, a bare path) passed, and
    example.com itself was refused."""
    keeper = Keeper(principal=APP, ledger=MemoryStore())
    fetched: list[str] = []

    @keeper.tool(effect="read_only", rules=[domain_in("url", "example.com")])
    async def fetch(url: str) -> str:
        fetched.append(url)
        return "ok"

    async with keeper:
        assert await _code(keeper, "fetch", url="https://docs.example.com/a") is None
        for url in ("file:///etc/passwd", "/etc/passwd", "https://evil.com/"):
            assert await _code(keeper, "fetch", url=url) is ErrorCode.PERMISSION_DENIED
    assert fetched == ["https://docs.example.com/a"]


@pytest.mark.parametrize("cap", [float("nan"), "100", None, True])
def test_a_cap_that_is_not_a_number_is_refused_when_the_rule_is_made(cap: object) -> None:
    # A NaN cap, which no amount exceeds, let every amount through.
    with pytest.raises(ValueError, match="cap"):
        at_most("amount", cap)  # type: ignore[arg-type]


@pytest.mark.parametrize("domains", [[""], ["example.com", "."]])
def test_a_domain_that_names_no_host_is_refused_when_the_rule_is_made(domains: list[str]) -> None:
    with pytest.raises(ValueError, match="domain"):
        domain_in("url", domains)


async def test_path_inside_takes_only_absolute_paths_the_tool_opens_as_they_were_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative path was checked against the root and opened against the working directory;
    what the tool receives is what the rule approved only when it is absolute."""
    sandbox, outside = tmp_path / "sandbox", tmp_path / "outside"
    (sandbox / "x").mkdir(parents=True)
    outside.mkdir()
    (sandbox / "in.txt").write_text("in")
    (sandbox / "out").symlink_to(outside)
    (outside / "secret.txt").write_text("secret")
    (tmp_path / "in.txt").write_text("cwd")
    monkeypatch.chdir(tmp_path)
    keeper = Keeper(principal=APP, ledger=MemoryStore())
    opened: list[str] = []

    class Target(BaseModel):
        path: str

    @keeper.tool(effect="read_only", rules=[path_inside("path", sandbox)])
    def read(path: str) -> str:
        opened.append(path)
        return Path(path).read_text()

    @keeper.tool(effect="read_only", rules=[path_inside("paths", sandbox)])
    async def read_all(paths: list[str]) -> int:
        opened.extend(paths)
        return len(paths)

    @keeper.tool(effect="read_only", rules=[path_inside("/targets/path", sandbox)])
    async def read_targets(targets: list[Target]) -> int:
        opened.extend(t.path for t in targets)
        return len(targets)

    inside = str(sandbox / "in.txt")
    invalid, denied = ErrorCode.INVALID_ARGUMENTS, ErrorCode.PERMISSION_DENIED
    async with keeper:
        assert await _code(keeper, "read", path=inside) is None
        assert await _code(keeper, "read", path=str(sandbox / "x" / ".." / "in.txt")) is None
        for relative in ("in.txt", "./in.txt", "sub/../in.txt", "~/in.txt", "~", "", "."):
            assert await _code(keeper, "read", path=relative) is invalid, relative
        assert await _code(keeper, "read", path=f"{sandbox}/../outside/secret.txt") is denied
        assert await _code(keeper, "read", path=str(sandbox / "out" / "secret.txt")) is denied
        assert await _code(keeper, "read", path=str(outside / "secret.txt")) is denied
        assert await _code(keeper, "read", path=f"{inside}\x00.png") is invalid
        assert await _code(keeper, "read", path=str(sandbox) + "x/in.txt") is denied
        assert await _code(keeper, "read_all", paths=[inside, "in.txt"]) is invalid
        assert await _code(keeper, "read_all", paths=[inside, "/etc/passwd"]) is denied
        assert await _code(keeper, "read_targets", targets=[{"path": "in.txt"}]) is invalid
        assert await _code(keeper, "read_targets", targets=[{"path": inside}]) is None
    assert opened == [inside, str(sandbox / "x" / ".." / "in.txt"), inside]


async def test_path_inside_checks_a_paths_compatibility_normalisation_too(tmp_path: Path) -> None:
    """`／..／` (fullwidth dots and solidus) is a file name inside the root as written, and
    `/../` to a tool or a server that normalises text (NFKC) before it opens the path."""
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    keeper = Keeper(principal=APP, ledger=MemoryStore())
    opened: list[str] = []

    @keeper.tool(effect="read_only", rules=[path_inside("path", sandbox)])
    def read(path: str) -> str:
        opened.append(path)
        return path

    async with keeper:
        escape = f"{sandbox}/\uff0e\uff0e\uff0f\uff0e\uff0e\uff0fetc\uff0fpasswd"
        assert await _code(keeper, "read", path=escape) is ErrorCode.PERMISSION_DENIED
        assert await _code(keeper, "read", path=f"{sandbox}/café\u0301 ｎｏｔｅｓ.txt") is None
    assert opened == [f"{sandbox}/café\u0301 ｎｏｔｅｓ.txt"]
