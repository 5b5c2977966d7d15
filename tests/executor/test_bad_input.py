"""Bad input never crashes a turn and never leaves a call RUNNING."""

import datetime
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import anyio
import msgspec
import pytest
from pydantic import BaseModel, Field, field_validator, model_validator

from toolkeeper import (
    Budgets,
    CallStatus,
    ErrorCode,
    Keeper,
    Principal,
    ToolCall,
    ToolResult,
    ToolSpec,
)
from toolkeeper.catalog.registry import Tool
from toolkeeper.ledger.base import CallRecord, LedgerStore
from toolkeeper.policy.rules import deny
from toolkeeper.testing import MemoryAuditSink

from ..conftest import APP

pytestmark = pytest.mark.anyio


@pytest.fixture
async def orders(keeper: Keeper) -> Keeper:
    @keeper.tool(effect="write", permissions=["orders:write"])
    async def create_order(sku: str, quantity: int, note: str | None = None) -> dict[str, object]:
        """Create an order.

        Args:
            sku: Stock keeping unit.
            quantity: How many.
            note: Free text for the warehouse.
        """
        return {"sku": sku, "quantity": quantity}

    return keeper


async def _nothing_running(keeper: Keeper) -> None:
    assert await keeper.store.list_calls(statuses=[CallStatus.RUNNING]) == []


@pytest.mark.parametrize(
    ("arguments", "pointers"),
    [
        ('{"sku": "a", "quantity": 1', [""]),  # unparsable JSON
        ("[1, 2]", [""]),  # not an object
        ("null", [""]),  # not an object either
        ("[" * 100_000 + "]" * 100_000, [""]),  # nested deeper than any decoder goes
        ('{"sku": "a", "quantity": 1, "color": "red"}', ["/color"]),  # unknown field
        ('{"sku": "a", "quantity": "one"}', ["/quantity"]),  # wrong type
        ('{"sku": "a"}', ["/quantity"]),  # missing required
        ({"quantity": "x", "extra": 1}, ["/quantity", "/extra", "/sku"]),  # several at once
        ({"sku": "a", "quantity": 1, 7: "x"}, [""]),  # a key JSON cannot hold (a Python caller)
    ],
)
async def test_invalid_arguments_are_refused_with_a_pointer_to_each_fault(
    orders: Keeper, arguments: object, pointers: list[str]
) -> None:
    result = await orders.execute(
        ToolCall(call_id="c1", name="create_order", arguments=arguments)  # type: ignore[arg-type]
    )
    assert result.status is CallStatus.REJECTED
    assert result.error is not None and result.error.code is ErrorCode.INVALID_ARGUMENTS
    found = sorted(v["pointer"] for v in result.error.details["violations"])
    assert found == sorted(pointers)
    await _nothing_running(orders)


async def test_oversized_payload_is_refused_before_parsing(orders: Keeper) -> None:
    huge = '{"sku": "' + "x" * (1 << 20) + '", "quantity": 1}'
    result = await orders.execute(ToolCall(call_id="c1", name="create_order", arguments=huge))
    assert result.error is not None and result.error.code is ErrorCode.PAYLOAD_TOO_LARGE
    await _nothing_running(orders)


async def test_oversized_parsed_payload_is_refused(orders: Keeper) -> None:
    result = await orders.execute(
        ToolCall(call_id="c1", name="create_order", arguments={"sku": "x" * (1 << 20)})
    )
    assert result.error is not None and result.error.code is ErrorCode.PAYLOAD_TOO_LARGE


async def test_unknown_tool_is_refused_with_suggestions_the_principal_may_use(
    orders: Keeper,
) -> None:
    result = await orders.execute(ToolCall(call_id="c1", name="create_ordr", arguments={}))
    assert result.error is not None and result.error.code is ErrorCode.UNKNOWN_TOOL
    assert result.error.details["did_you_mean"] == ["create_order"]
    stranger = Principal(id="eve", grants=frozenset())
    result = await orders.execute(
        ToolCall(call_id="c2", name="create_ordr", arguments={}, principal=stranger)
    )
    assert result.error is not None and "did_you_mean" not in result.error.details


@pytest.mark.parametrize("name", [None, 7, ["create_order"]])
async def test_a_tool_name_that_is_not_text_is_an_unknown_tool(orders: Keeper, name: Any) -> None:
    # A Python caller's slip: it was an INTERNAL_ERROR, difflib failing to compare it.
    result = await orders.execute(ToolCall(call_id="c1", name=name, arguments={}))
    assert result.status is CallStatus.REJECTED
    assert result.error is not None and result.error.code is ErrorCode.UNKNOWN_TOOL
    assert "not text" in result.error.message


async def test_replay_with_changed_arguments_is_a_call_id_conflict(orders: Keeper) -> None:
    first = await orders.execute(
        ToolCall(call_id="c1", name="create_order", arguments={"sku": "a", "quantity": 1})
    )
    assert first.ok
    second = await orders.execute(
        ToolCall(call_id="c1", name="create_order", arguments={"sku": "a", "quantity": 99})
    )
    assert second.error is not None and second.error.code is ErrorCode.CALL_ID_CONFLICT
    record = await orders.store.get_call("default", "c1")
    assert record is not None and record.status is CallStatus.SUCCEEDED


async def test_a_refused_call_can_be_proposed_again_with_fixed_arguments(orders: Keeper) -> None:
    bad = await orders.execute(
        ToolCall(call_id="c1", name="create_order", arguments={"sku": "a", "quantity": "1"})
    )
    assert bad.status is CallStatus.REJECTED
    good = await orders.execute(
        ToolCall(call_id="c1", name="create_order", arguments={"sku": "a", "quantity": 1})
    )
    assert good.ok
    record = await orders.store.get_call("default", "c1")
    assert record is not None
    assert [s for s, _ in record.history] == [
        CallStatus.REJECTED,
        CallStatus.RUNNING,
        CallStatus.SUCCEEDED,
    ]


async def test_permission_is_checked_before_arguments(orders: Keeper) -> None:
    reader = Principal(id="bob", grants=frozenset({"orders:read"}))
    result = await orders.execute(
        ToolCall(call_id="c1", name="create_order", arguments="{not json", principal=reader)
    )
    assert result.error is not None and result.error.code is ErrorCode.UNKNOWN_TOOL
    assert result.error.details == {}


async def test_a_tool_outside_the_principals_tenant_does_not_exist_for_it(
    keeper: Keeper,
) -> None:
    """Another tenant's tool is refused exactly as a name no tool has: PERMISSION_DENIED
    "not available here" told another tenant that the tool exists."""

    @keeper.tool(effect="read_only", tenants=["acme"])
    async def acme_report() -> str:
        return "secret numbers"

    other = Principal(id="eve", tenant="globex", grants=frozenset({"*"}))
    result = await keeper.execute(ToolCall(call_id="c1", name="acme_report", principal=other))
    missing = await keeper.execute(ToolCall(call_id="c2", name="acme_budget", principal=other))
    assert result.error is not None and missing.error is not None
    assert result.error.code is missing.error.code is ErrorCode.UNKNOWN_TOOL
    assert result.error.message == "there is no tool named 'acme_report'"
    assert result.error.details == {} and "secret" not in result.error.message


async def test_tool_exceptions_do_not_leak_their_message(keeper: Keeper) -> None:
    @keeper.tool(effect="read_only")
    async def leaky() -> str:
        raise RuntimeError("password=hunter2 at /srv/app/secret.py line 3")

    result = await keeper.execute(ToolCall(call_id="c1", name="leaky"))
    assert result.error is not None and result.error.code is ErrorCode.TOOL_ERROR
    assert "hunter2" not in result.error.message
    assert "hunter2" not in str(result.error.details)
    await _nothing_running(keeper)


async def test_a_write_that_raises_systemexit_is_recorded_as_it_ended_before_it_goes_on_up(
    tmp_path: Path,
) -> None:
    """A tool whose argparse (or sys.exit) raised SystemExit, an Exception of no kind: it left
    the call RUNNING for as long as the process lived, and proposed again, the call waited for
    an end no one would write."""
    keeper = Keeper(principal=APP, ledger=f"sqlite:///{tmp_path / 'l.db'}")

    @keeper.tool(effect="write")
    def deploy(target: str) -> str:
        raise SystemExit(2)  # (what argparse does with arguments it cannot take)

    @keeper.tool(effect="write", idempotent=True)
    async def tag(target: str) -> str:
        raise SystemExit(2)

    async with keeper:
        for name in ("deploy", "tag"):
            with pytest.raises(SystemExit):
                await keeper.execute(ToolCall(call_id=name, name=name, arguments={"target": "x"}))
        await _nothing_running(keeper)
        deploy_, tag_ = [
            await keeper.execute(ToolCall(call_id=name, name=name, arguments={"target": "x"}))
            for name in ("deploy", "tag")
        ]
    assert deploy_.replayed and deploy_.status is CallStatus.UNKNOWN_OUTCOME
    assert tag_.replayed and tag_.status is CallStatus.FAILED  # (safe to run again: not unknown)
    assert tag_.error is not None and tag_.error.code is ErrorCode.TOOL_ERROR


async def test_a_write_tool_without_declared_permissions_needs_its_own_grant(
    keeper: Keeper,
) -> None:
    @keeper.tool
    async def delete_cache() -> None:
        return None

    nobody = Principal(id="eve", grants=frozenset({"orders:*"}))
    denied = await keeper.execute(ToolCall(call_id="c1", name="delete_cache", principal=nobody))
    assert denied.error is not None and denied.error.code is ErrorCode.UNKNOWN_TOOL
    holder = Principal(id="ops", grants=frozenset({"tool:delete_cache"}))
    allowed = await keeper.execute(ToolCall(call_id="c2", name="delete_cache", principal=holder))
    assert allowed.ok


async def test_visible_tools_are_filtered_by_permission(orders: Keeper) -> None:
    @orders.tool(effect="read_only")
    async def ping() -> str:
        return "pong"

    reader = Principal(id="bob", grants=frozenset({"orders:read"}))
    writer = Principal(id="ann", grants=frozenset({"orders:write"}))
    assert [s.name for s in orders.visible_tools(reader)] == ["ping"]
    assert [s.name for s in orders.visible_tools(writer)] == ["create_order", "ping"]


@pytest.mark.parametrize(
    ("first", "again"),
    [
        ('{"a": 2.50, "b": 1}', '{"b":1,"a":2.5}'),  # a float, written two ways
        ('{"a": 1.0, "b": 1}', {"b": 1, "a": 1e0}),  # one float, written two ways
        ('{"a": "é", "b": 1}', {"b": 1, "a": "\u00e9"}),  # non-ASCII text
        ('{"a": "\\u00e9", "b": 1}', '{"b": 1, "a": "é"}'),  # escaped and raw
        ('{"a": [1, {"y": 2, "x": 1e2}], "b": 1}', '{"b": 1, "a": [1, {"x": 100.0, "y": 2}]}'),
    ],
)
async def test_the_same_arguments_written_differently_replay_the_same_call(
    keeper: Keeper, first: object, again: object
) -> None:
    runs: list[object] = []

    @keeper.tool(effect="write")
    async def record(a: object, b: int) -> int:
        runs.append(a)
        return len(runs)

    one = await keeper.execute(ToolCall(call_id="c1", name="record", arguments=first))
    two = await keeper.execute(ToolCall(call_id="c1", name="record", arguments=again))
    assert one.ok and two.replayed and two.data == one.data
    assert len(runs) == 1


@pytest.mark.parametrize(
    ("first", "again"),
    [
        ('{"a": 1.0}', '{"a": 1}'),  # the tool would get the float 1.0, then the int 1
        ('{"a": -0.0}', '{"a": 0.0}'),
        ('{"a": 41778229342798590}', '{"a": 4.177822934279859e16}'),
        ('{"a": 41778229342798590}', '{"a": 41778229342798592}'),
        ('{"a": 41778229342798592}', '{"a": 41778229342798592.0}'),
    ],
)
async def test_arguments_the_tool_would_receive_differently_are_another_call(
    keeper: Keeper, first: str, again: str
) -> None:
    runs: list[object] = []

    @keeper.tool(effect="write")
    async def record(a: object) -> int:
        runs.append(a)
        return len(runs)

    one = await keeper.execute(ToolCall(call_id="c1", name="record", arguments=first))
    two = await keeper.execute(ToolCall(call_id="c1", name="record", arguments=again))
    assert one.ok and two.error is not None and two.error.code is ErrorCode.CALL_ID_CONFLICT
    assert len(runs) == 1 and repr(runs[0]) == repr(json.loads(first)["a"])


def _orders_that_must_not_run(tmp_path: Path) -> Keeper:
    """A keeper on a SQLite ledger with a write tool that fails the test if it ever runs."""
    keeper = Keeper(principal=APP, ledger=f"sqlite:///{tmp_path / 'l.db'}")

    @keeper.tool(effect="write", permissions=[])
    async def create_order(sku: str, quantity: int) -> str:
        raise AssertionError("must not run")

    return keeper


@pytest.mark.parametrize(
    "arguments",
    [
        '{"sku": "\\ud800", "quantity": 1}',  # an unpaired escape, as a cut-off emoji leaves it
        '{"sku": "\ud800", "quantity": 1}',  # the raw code point in the text
        {"sku": "\udc00", "quantity": 1},  # already parsed
    ],
)
async def test_a_lone_surrogate_is_invalid_arguments_and_is_recorded(
    tmp_path: Path, arguments: object
) -> None:
    keeper = _orders_that_must_not_run(tmp_path)
    async with keeper:
        result = await keeper.execute(
            ToolCall(call_id="c1", name="create_order", arguments=arguments)  # type: ignore[arg-type]
        )
        assert result.status is CallStatus.REJECTED
        assert result.error is not None and result.error.code is ErrorCode.INVALID_ARGUMENTS
        assert "surrogate" in result.error.message
        [record] = await keeper.store.list_calls()
        assert record.status is CallStatus.REJECTED


class _Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


@pytest.mark.parametrize(
    "value",
    [10**5000, _Unprintable()],
    ids=["an int too long to print", "an object whose repr raises"],
)
async def test_python_arguments_that_cannot_even_be_printed_are_invalid_and_recorded(
    tmp_path: Path, value: object
) -> None:
    """They were an INTERNAL_ERROR, recorded nowhere: the digest of what is not JSON was
    taken from its repr, which raised too."""
    keeper = _orders_that_must_not_run(tmp_path)
    async with keeper:
        result = await keeper.execute(
            ToolCall(call_id="c1", name="create_order", arguments={"sku": "a", "quantity": value})
        )
        assert result.status is CallStatus.REJECTED
        assert result.error is not None and result.error.code is ErrorCode.INVALID_ARGUMENTS
        [record] = await keeper.store.list_calls()
        assert record.status is CallStatus.REJECTED


async def test_arguments_nested_deeper_than_the_validator_goes_are_invalid_and_recorded(
    tmp_path: Path,
) -> None:
    """JSON a few hundred levels deep parses, but the validator could not say what is wrong
    with it: the call failed as an INTERNAL_ERROR, recorded nowhere."""
    keeper = Keeper(principal=APP, ledger=f"sqlite:///{tmp_path / 'l.db'}")

    @keeper.tool(effect="write")
    async def plot(grid: list[list[int]]) -> str:
        raise AssertionError("must not run")

    deep = '{"grid": ' + "[" * 500 + "]" * 500 + "}"
    async with keeper:
        for call_id, arguments in (("text", deep), ("parsed", json.loads(deep))):
            result = await keeper.execute(
                ToolCall(call_id=call_id, name="plot", arguments=arguments)
            )
            assert result.status is CallStatus.REJECTED, call_id
            assert result.error is not None
            assert result.error.code is ErrorCode.INVALID_ARGUMENTS, call_id
        assert {r.status for r in await keeper.store.list_calls()} == {CallStatus.REJECTED}


async def test_the_size_limit_counts_utf8_bytes_whether_arguments_are_text_or_parsed() -> None:
    keeper = Keeper(principal=APP, ledger="memory://", max_argument_bytes=1000)

    @keeper.tool(effect="read_only")
    async def echo(s: str) -> str:
        return s

    wide = {"s": "\U0001f600" * 300}  # 300 characters, 1,200 bytes of UTF-8
    async with keeper:
        for call_id, arguments in (("text", json.dumps(wide, ensure_ascii=False)), ("dict", wide)):
            result = await keeper.execute(
                ToolCall(call_id=call_id, name="echo", arguments=arguments)
            )
            assert result.error is not None, call_id
            assert result.error.code is ErrorCode.PAYLOAD_TOO_LARGE, call_id


async def test_a_tool_with_a_broken_input_schema_is_refused_and_recorded() -> None:
    # What an upstream may declare: listed, but no call to it can be checked.
    from dataclasses import replace

    keeper = Keeper(principal=APP, ledger="memory://")

    @keeper.tool(effect="read_only")
    async def lookup(q: str) -> str:
        raise AssertionError("must not run")

    tool = keeper.catalog.get("lookup")
    assert tool is not None
    broken = {"type": "object", "properties": {"q": {"type": "string", "pattern": "(unclosed"}}}
    keeper.catalog.add(replace(tool, spec=replace(tool.spec, input_schema=broken, version="2")))
    async with keeper:
        result = await keeper.execute(ToolCall(call_id="c1", name="lookup", arguments={"q": "x"}))
        [record] = await keeper.store.list_calls()
    assert result.error is not None and result.error.code is ErrorCode.TOOL_ERROR
    assert "not valid JSON Schema" in result.error.message
    assert record.status is CallStatus.REJECTED


async def test_arguments_the_function_cannot_take_are_refused_before_anything_runs(
    keeper: Keeper,
) -> None:
    """Schema-valid arguments a model's own validator refuses (or a leap second for a datetime)
    are INVALID_ARGUMENTS with a pointer, before approval and the ledger; they were a
    TOOL_ERROR after RUNNING."""

    class Address(BaseModel):
        city: str

        @field_validator("city")
        @classmethod
        def known(cls, value: str) -> str:
            if value == "Atlantis":
                raise ValueError("unknown city")
            return value

    ran: list[str] = []

    @keeper.tool(effect="destructive", permissions=[])
    async def ship(to: Address, when: datetime.datetime) -> str:
        ran.append(to.city)
        return to.city

    for arguments, pointer in (
        ({"to": {"city": "Atlantis"}, "when": "2030-01-01T00:00:00Z"}, "/to/city"),
        ({"to": {"city": "Oslo"}, "when": "2016-12-31T23:59:60Z"}, "/when"),
    ):
        result = await keeper.execute(ToolCall(call_id=pointer, name="ship", arguments=arguments))
        assert result.status is CallStatus.REJECTED and result.error is not None
        assert result.error.code is ErrorCode.INVALID_ARGUMENTS
        assert [v["pointer"] for v in result.error.details["violations"]] == [pointer]
    assert ran == [] and await keeper.approvals.pending() == []
    await _nothing_running(keeper)


@pytest.mark.parametrize(
    ("arguments", "kind"), [("null", "null"), ("[1]", "an array"), ("7", "a number")]
)
async def test_arguments_that_are_not_an_object_are_named_in_jsons_words(
    orders: Keeper, arguments: str, kind: str
) -> None:
    """The model was told "not NoneType" or "not list": Python's names, not JSON's."""
    result = await orders.execute(ToolCall(call_id="c1", name="create_order", arguments=arguments))
    assert result.error is not None
    assert result.error.message == f"arguments must be a JSON object, not {kind}"


async def test_a_refusal_never_quotes_an_object_or_array_that_holds_a_sensitive_argument(
    keeper: Keeper, audit: MemoryAuditSink
) -> None:
    """`maxItems`, `uniqueItems`, a `oneOf` over an object and a model's own validator quote
    the whole value they refused: the sensitive argument inside it reached the model, the
    ledger and the audit log."""
    secret = "sk-SECRET-123"
    sensitive = {"type": "string", "x-sensitive": True}

    class Login(BaseModel):
        user: str
        password: Annotated[str, Field(json_schema_extra={"x-sensitive": True})]

        @model_validator(mode="after")
        def differ(self) -> "Login":
            if self.password.startswith("sk-"):
                raise ValueError(f"{self.password} is an API key, not a password")
            return self

    @keeper.tool(effect="read_only")
    async def sign_in(login: Login) -> str:
        return "signed in"

    keeper.add(
        Tool(
            spec=ToolSpec(
                name="store_keys",
                description="Store API keys.",
                input_schema={
                    "type": "object",
                    "properties": {
                        "keys": {"type": "array", "items": sensitive, "maxItems": 1},
                        "pair": {
                            "type": "object",
                            "properties": {"key": sensitive},
                            "oneOf": [{"required": ["id"]}, {"required": ["name"]}],
                        },
                    },
                },
                effect="read_only",
            ),
            connector=keeper.catalog.get("sign_in").connector,  # (never reached)
        )
    )
    calls = {
        "sign_in": ({"login": {"user": "ann", "password": secret}}, ["/login"]),
        "store_keys": ({"keys": [secret, "k2"], "pair": {"key": secret}}, ["/keys", "/pair"]),
    }
    for name, (arguments, pointers) in calls.items():
        result = await keeper.execute(ToolCall(call_id=name, name=name, arguments=arguments))
        assert result.error is not None and result.error.code is ErrorCode.INVALID_ARGUMENTS
        assert [v["pointer"] for v in result.error.details["violations"]] == pointers
        assert secret not in json.dumps(result.error.to_dict())
    stored = json.dumps(msgspec.to_builtins(await keeper.store.list_calls()))
    stored += json.dumps(msgspec.to_builtins(list(audit.events)), default=str)
    assert secret not in stored


async def test_a_proposed_call_id_is_logged_by_its_repr_and_escaped_on_the_console(
    keeper: Keeper, caplog: pytest.LogCaptureFixture
) -> None:
    """A call id is the model's or the client's text: with a line break and an ANSI escape
    in it, the 'raised' line forged a second log line and cleared the terminal."""
    from toolkeeper.core._visible import VisibleFormatter

    caplog.set_level(logging.ERROR)

    @keeper.tool(effect="read_only")
    def crash() -> str:
        raise RuntimeError("boom")

    forged = "c1\nCRITICAL toolkeeper: all calls approved\x1b[2J\u202e"
    result = await keeper.execute(ToolCall(call_id=forged, name="crash"))
    assert result.error is not None and result.error.code is ErrorCode.TOOL_ERROR
    [record] = [r for r in caplog.records if "raised" in r.getMessage()]
    first, *_ = VisibleFormatter("%(message)s").format(record).splitlines()
    said = "'c1\\nCRITICAL toolkeeper: all calls approved\\x1b[2J\\u202e'"
    assert first == f"crash raised (call {said}, attempt 1)"


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> str | LedgerStore:
    """Each ledger backend (on PostgreSQL, a schema of this test's own)."""
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'x.db'}"
    from toolkeeper.ledger.postgres import PostgresStore

    from ..conftest import postgres_url

    return PostgresStore(postgres_url(), schema=request.getfixturevalue("pg_schema"))


OVERSIZED = "x" * ((1 << 20) + 10)
"""A string argument over the default limit of 1 MiB."""
ME = Principal(id="me", grants=frozenset({"orders:read", "tools:call"}))


@pytest.mark.timeout(30)  # (a refusal that spins never yields to `fail_after`)
@pytest.mark.parametrize("path", ["execute", "execute_many", "call_tool"])
async def test_an_oversized_call_proposed_twice_is_refused_twice_at_once(
    ledger: str | LedgerStore, path: str
) -> None:
    """The second proposal spun at 100% CPU for ever: its refusal was recorded as a new
    call's, the ledger held the first, and the pipeline started over without end."""
    keeper = Keeper(ledger=ledger, principal=ME)

    @keeper.tool(effect="read_only")
    async def echo(text: str) -> str:
        return text

    text = json.dumps({"text": OVERSIZED})
    call = ToolCall(call_id="c1", name="echo", arguments=text, principal=ME)
    if path == "call_tool":
        keeper.enable_discovery()
        call = ToolCall(
            call_id="c1",
            name="call_tool",
            arguments=json.dumps({"name": "echo", "arguments": {"text": OVERSIZED}}),
            principal=ME,
        )
    async with keeper:
        for _ in range(2):
            with anyio.fail_after(10):  # (for ever, not a busy machine)
                if path == "execute_many":
                    [result] = await keeper.execute_many([call])
                else:
                    result = await keeper.execute(call)
            assert result.status is CallStatus.REJECTED
            assert result.error is not None and result.error.code is ErrorCode.PAYLOAD_TOO_LARGE
        [record] = await keeper.store.list_calls()
    assert record.status is CallStatus.REJECTED


def _refuser(ledger: str | LedgerStore) -> Keeper:
    """A keeper with a tool for each refusal a call can meet (see `REFUSALS`)."""
    keeper = Keeper(
        principal=APP,
        ledger=ledger,
        budgets=Budgets(per_tool={"capped": 0}, calls_per_minute=1e-6, burst=1),
    )

    @keeper.tool(effect="read_only", permissions=["orders:read"])
    async def echo(text: str) -> str:
        return text

    @keeper.tool(effect="read_only", permissions=["orders:read"])
    async def capped() -> str:
        raise AssertionError("must not run")

    @keeper.tool(effect="destructive", permissions=["admin:wipe"])
    async def wipe() -> str:
        raise AssertionError("must not run")

    @keeper.tool(effect="destructive", permissions=["orders:read"])
    async def purge() -> str:
        raise AssertionError("must not run")

    @keeper.tool(effect="write", permissions=["orders:read"], rules=[lambda _: deny("no")])
    async def ship() -> str:
        raise AssertionError("must not run")

    @keeper.tool(effect="read_only", permissions=["orders:read"])
    async def lookup(q: str) -> str:
        raise AssertionError("must not run")

    tool = keeper.catalog.get("lookup")
    assert tool is not None
    broken = {"type": "object", "properties": {"q": {"type": "string", "pattern": "(unclosed"}}}
    keeper.catalog.add(replace(tool, spec=replace(tool.spec, input_schema=broken)))
    return keeper


async def _echo_first(keeper: Keeper, call: ToolCall) -> None:
    """Run `echo` once under the call's id, with other arguments."""
    assert (await keeper.execute(msgspec.structs.replace(call, arguments={"text": "first"}))).ok


async def _echo_other(keeper: Keeper, call: ToolCall) -> None:
    """Run `echo` once under another call id (the rate limit's one call)."""
    assert (await keeper.execute(msgspec.structs.replace(call, call_id="other"))).ok


async def _denied(keeper: Keeper, call: ToolCall) -> None:
    """Ask for the call's approval, and deny it."""
    asked = await keeper.execute(call)
    assert asked.approval_id is not None
    await keeper.approvals.deny(asked.approval_id, by="ops", reason="no")


Prepare = Callable[[Keeper, ToolCall], Awaitable[None]]
REFUSALS: dict[str, tuple[str | object, object, ErrorCode, Prepare | None]] = {
    # case: (tool name, arguments, the refusal, what happens to the call id first)
    "too large as text": (
        "echo",
        json.dumps({"text": OVERSIZED}),
        ErrorCode.PAYLOAD_TOO_LARGE,
        None,
    ),
    "too large as data": ("echo", {"text": OVERSIZED}, ErrorCode.PAYLOAD_TOO_LARGE, None),
    "not JSON": ("echo", '{"text": ', ErrorCode.INVALID_ARGUMENTS, None),
    "off the schema": ("echo", {"text": 1}, ErrorCode.INVALID_ARGUMENTS, None),
    "a lone surrogate": ("echo", {"text": "\ud800"}, ErrorCode.INVALID_ARGUMENTS, None),
    "no such tool": ("nope", {}, ErrorCode.UNKNOWN_TOOL, None),
    "a name with a lone surrogate": ("no\ud800pe", {}, ErrorCode.UNKNOWN_TOOL, None),
    "a name with a NUL": ("no\x00pe", {}, ErrorCode.UNKNOWN_TOOL, None),
    "a name that is not text": (["echo"], {}, ErrorCode.UNKNOWN_TOOL, None),
    "a tool it may not see": ("wipe", {}, ErrorCode.UNKNOWN_TOOL, None),
    "a rule's denial": ("ship", {}, ErrorCode.PERMISSION_DENIED, None),
    "a broken input schema": ("lookup", {"q": "x"}, ErrorCode.TOOL_ERROR, None),
    "a spent budget": ("capped", {}, ErrorCode.BUDGET_EXCEEDED, None),
    "a rate limit": ("echo", {"text": "a"}, ErrorCode.RATE_LIMITED, _echo_other),
    "a denied approval": ("purge", {}, ErrorCode.APPROVAL_DENIED, _denied),
    "another call's id": ("echo", {"text": "a"}, ErrorCode.CALL_ID_CONFLICT, _echo_first),
}


@pytest.mark.timeout(30)  # (a refusal that spins never yields to `fail_after`)
@pytest.mark.parametrize("case", list(REFUSALS))
async def test_every_refusal_proposed_twice_under_one_id_is_refused_twice_at_once(
    ledger: str | LedgerStore, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A refusal of a call whose record exists ends, on every ledger, and is recorded
    without a traceback (a NUL in a tool name failed on PostgreSQL, a lone surrogate on
    SQLite, and was logged, unrecorded)."""
    name, arguments, code, prepare = REFUSALS[case]
    keeper = _refuser(ledger)
    call = ToolCall(call_id="c1", name=name, arguments=arguments, principal=ME)  # type: ignore[arg-type]
    async with keeper:
        if prepare is not None:
            await prepare(keeper, call)
        for _ in range(2):
            with anyio.fail_after(10):  # (for ever, not a busy machine)
                result = await keeper.execute(call)
            assert result.error is not None and result.error.code is code
        record = await keeper.store.get_call("default", "c1")
    assert record is not None
    if code is not ErrorCode.CALL_ID_CONFLICT:
        assert record.status is CallStatus.REJECTED
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def _said(result: ToolResult, name: str) -> tuple[object, ...]:
    """What a refusal tells the model, with the name it was given for `name`."""
    assert result.error is not None
    return (
        result.status,
        result.tool.replace(name, "NAME"),
        result.error.code,
        result.error.message.replace(name, "NAME"),
        json.dumps(result.error.details).replace(name, "NAME"),
        result.error.retryable,
        result.version,
        result.attempt,
        result.replayed,
        result.approval_id,
        json.dumps(result.metadata, default=str).replace(name, "NAME"),
    )


def _kept(record: CallRecord, name: str) -> tuple[object, ...]:
    """What the ledger keeps of a refusal, with `name` as in `_said`."""
    return (
        record.tool.replace(name, "NAME"),
        record.version,
        record.status,
        record.effect,
        record.idempotent,
        record.attempt,
        json.dumps(record.error).replace(name, "NAME"),
        [status for status, _ in record.history],
    )


@pytest.mark.parametrize("path", ["execute", "execute_many", "call_tool"])
async def test_a_tool_the_principal_may_not_use_is_refused_as_one_that_does_not_exist(
    ledger: str | LedgerStore, path: str
) -> None:
    """execute answered PERMISSION_DENIED naming the permission missing (`admin:wipe`) for a
    tool the principal cannot see, and so told it the tool exists."""
    audit = MemoryAuditSink()
    keeper = Keeper(principal=APP, ledger=ledger, audit=audit)

    @keeper.tool(effect="destructive", permissions=["admin:wipe"])
    async def wipe(everything: bool) -> str:
        raise AssertionError("must not run")

    @keeper.tool(effect="read_only", permissions=["orders:read"])
    async def echo(text: str) -> str:
        return text

    if path == "call_tool":
        keeper.enable_discovery()

    def call(name: str) -> ToolCall:
        arguments: dict[str, Any] = {"everything": True}
        if path == "call_tool":
            return ToolCall(
                call_id=name,
                name="call_tool",
                arguments={"name": name, "arguments": arguments},
                principal=ME,
            )
        return ToolCall(call_id=name, name=name, arguments=arguments, principal=ME)

    said: list[tuple[object, ...]] = []
    kept: list[tuple[object, ...]] = []
    logged: list[list[tuple[object, ...]]] = []
    async with keeper:
        for name in ("wipe", "zork"):  # one it may not see, one that does not exist
            audit.events.clear()
            if path == "execute_many":
                [result] = await keeper.execute_many([call(name)])
            else:
                result = await keeper.execute(call(name))
            said.append(_said(result, name))
            record = await keeper.store.get_call("default", name)
            assert record is not None
            kept.append(_kept(record, name))
            logged.append(
                [
                    (e.status, e.previous, e.error_code, str(e.message).replace(name, "NAME"))
                    for e in audit.events
                ]
            )
    assert said[0] == said[1]
    assert said[0][2] is ErrorCode.UNKNOWN_TOOL
    assert kept[0] == kept[1]
    assert logged[0] == logged[1]


@pytest.mark.timeout(30)  # (a refusal that spins never yields to `fail_after`)
async def test_oversized_proposals_of_one_id_at_once_from_two_keepers_all_end_refused(
    ledger: str | LedgerStore, tmp_path: Path
) -> None:
    """Two processes (keepers on one ledger) each propose the oversized call several times at
    once: whichever records the refusal first, the others meet its record and end too."""
    if ledger == "memory://":
        pytest.skip("two keepers share no in-memory ledger")
    if isinstance(ledger, str):
        second: str | LedgerStore = ledger
    else:
        from toolkeeper.ledger.postgres import PostgresStore

        assert isinstance(ledger, PostgresStore)
        second = PostgresStore(ledger.url, schema=ledger.schema)
    keepers = [Keeper(ledger=ledger, principal=ME), Keeper(ledger=second, principal=ME)]
    for keeper in keepers:
        keeper.add_function(lambda text: text, name="echo", effect="read_only")
    call = ToolCall(call_id="c1", name="echo", arguments={"text": OVERSIZED}, principal=ME)
    results: list[ToolResult] = []

    async def propose(keeper: Keeper) -> None:
        results.extend(await keeper.execute_many([call] * 3))

    for keeper in keepers:
        await keeper.open()
    try:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                for keeper in keepers:
                    tg.start_soon(propose, keeper)
        [record] = await keepers[0].store.list_calls()
    finally:
        for keeper in keepers:
            await keeper.aclose()
    assert [r.error.code if r.error else None for r in results] == [ErrorCode.PAYLOAD_TOO_LARGE] * 6
    assert record.status is CallStatus.REJECTED
