"""One audit event per persisted state change; sensitive arguments never stored in the clear."""

import json
import stat
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import msgspec
import pytest
from pydantic import BaseModel, Field, SecretStr

from toolkeeper import (
    ApprovalRequired,
    Keeper,
    OutcomeUnknown,
    RetryLater,
    ToolCall,
    ToolFailed,
    UpstreamUnavailable,
)
from toolkeeper.observe.audit import AuditEvent, JsonlAuditSink
from toolkeeper.observe.redact import REDACTED, hidden_values, mask, redact, sensitive_pointers
from toolkeeper.testing import FakeClock, MemoryAuditSink, MemoryStore

from ..conftest import APP

pytestmark = pytest.mark.anyio


async def test_secrets_are_redacted_in_ledger_and_audit(tmp_path: Path) -> None:
    sink = JsonlAuditSink(tmp_path / "audit.jsonl")
    keeper = Keeper(principal=APP, ledger=f"sqlite:///{tmp_path / 'l.db'}", audit=sink)
    seen: list[str] = []

    @keeper.tool(effect="write")
    async def login(
        user: str,
        password: Annotated[str, Field(json_schema_extra={"writeOnly": True})],
        token: Annotated[str, Field(json_schema_extra={"x-sensitive": True})] = "t0",
    ) -> str:
        seen.append(password)
        return "ok"

    async with keeper:
        result = await keeper.execute(
            ToolCall(call_id="c1", name="login", arguments={"user": "ann", "password": "hunter2"})
        )
        record = await keeper.store.get_call("default", "c1")
    assert result.ok and seen == ["hunter2"]
    assert record is not None
    assert record.arguments == {"user": "ann", "password": REDACTED, "token": REDACTED}
    text = (tmp_path / "audit.jsonl").read_text()
    assert "hunter2" not in text and "t0" not in text
    events = [json.loads(line) for line in text.splitlines()]
    assert [e["status"] for e in events] == ["RUNNING", "SUCCEEDED"]
    assert events[1]["previous"] == "RUNNING"


async def test_refusals_are_audited_with_their_code() -> None:
    sink = MemoryAuditSink()
    keeper = Keeper(principal=APP, ledger=MemoryStore(), audit=sink)
    async with keeper:
        await keeper.execute(ToolCall(call_id="c1", name="nope"))
    [event] = sink.events
    assert (event.status, event.error_code) == ("REJECTED", "UNKNOWN_TOOL")


def test_sensitive_pointers_follow_refs_and_nesting() -> None:
    schema = {
        "type": "object",
        "properties": {
            "auth": {"$ref": "#/$defs/Auth"},
            "note": {"type": "string"},
        },
        "$defs": {
            "Auth": {"type": "object", "properties": {"key": {"type": "string", "writeOnly": True}}}
        },
    }
    pointers = sensitive_pointers(schema)
    assert pointers == {"/auth/key"}
    assert redact({"auth": {"key": "k"}, "note": "n"}, pointers) == {
        "auth": {"key": REDACTED},
        "note": "n",
    }


def test_sensitive_fields_of_conditional_and_dependent_subschemas_are_found() -> None:
    secret = {"type": "string", "writeOnly": True}
    schema = {
        "type": "object",
        "properties": {"kind": {"enum": ["password", "key"]}, "tags": {"type": "array"}},
        "if": {"properties": {"kind": {"const": "password"}}},
        "then": {"properties": {"password": secret}},
        "else": {"properties": {"key": secret}},
        "dependentSchemas": {"user": {"properties": {"pin": secret}}},
        "allOf": [{"properties": {"tags": {"contains": {"properties": {"token": secret}}}}}],
    }
    pointers = sensitive_pointers(schema)
    assert pointers == {"/password", "/key", "/pin", "/tags/*/token"}
    arguments = {"kind": "password", "password": "p", "user": "u", "pin": "1"}
    arguments["tags"] = [{"token": "t"}]
    assert redact(arguments, pointers) == {
        "kind": "password",
        "password": REDACTED,
        "user": "u",
        "pin": REDACTED,
        "tags": [{"token": REDACTED}],
    }


def test_an_input_schema_marked_sensitive_as_a_whole_redacts_every_argument() -> None:
    # The mark on the schema itself was ignored: every argument was stored in the clear.
    schema = {
        "type": "object",
        "x-sensitive": True,
        "properties": {"user": {"type": "string"}, "password": {"type": "string"}},
    }
    pointers = sensitive_pointers(schema)
    assert redact({"user": "ann", "password": "hunter22"}, pointers) == {
        "user": REDACTED,
        "password": REDACTED,
    }


class Cred(BaseModel):
    user: str
    password: Annotated[str, Field(json_schema_extra={"writeOnly": True})]


async def test_secrets_inside_lists_and_maps_and_refused_values_are_never_stored(
    tmp_path: Path,
) -> None:
    sink = JsonlAuditSink(tmp_path / "audit.jsonl")
    keeper = Keeper(principal=APP, ledger=f"sqlite:///{tmp_path / 'l.db'}", audit=sink)

    @keeper.tool(effect="destructive")
    async def rotate(
        creds: list[Cred],
        by_host: dict[str, Cred],
        token: Annotated[str, Field(min_length=12, json_schema_extra={"x-sensitive": True})],
    ) -> str:
        return "rotated"

    arguments = {
        "creds": [{"user": "a", "password": "PW-IN-LIST"}],
        "by_host": {"db": {"user": "b", "password": "PW-IN-MAP"}},
        "token": "long-enough-token",
    }
    async with keeper:
        waiting = await keeper.execute(ToolCall(call_id="c1", name="rotate", arguments=arguments))
        short = await keeper.execute(
            ToolCall(call_id="c2", name="rotate", arguments={**arguments, "token": "SHORT-SEC"})
        )
        [request] = await keeper.approvals.pending()
        records = await keeper.store.list_calls()
    assert waiting.approval_id == request.id
    assert request.arguments["creds"] == [{"user": "a", "password": REDACTED}]
    assert request.arguments["by_host"] == {"db": {"user": "b", "password": REDACTED}}
    assert short.error is not None and "SHORT-SEC" not in json.dumps(short.error.to_dict())
    assert [v["pointer"] for v in short.error.details["violations"]] == ["/token"]
    stored = json.dumps(msgspec.to_builtins(records), default=str)
    stored += (tmp_path / "audit.jsonl").read_text()
    for secret in ("PW-IN-LIST", "PW-IN-MAP", "SHORT-SEC", "long-enough-token"):
        assert secret not in stored, secret


def _fail(kind: str, secret: str) -> None:
    """Raise what a tool raises on purpose, quoting `secret`."""
    if kind == "failed":
        raise ToolFailed(f"login failed for {secret}", details={"tried": [f"pw={secret}"]})
    if kind == "retry":
        raise RetryLater(f"{secret} is locked")
    if kind == "unavailable":
        raise UpstreamUnavailable(f"no route for {secret}")
    if kind == "unknown":
        raise OutcomeUnknown(f"the connection dropped sending {secret}")
    raise ApprovalRequired(f"a person must allow {secret}")


@pytest.mark.parametrize("kind", ["failed", "retry", "unavailable", "unknown", "approval"])
async def test_a_tool_quoting_its_sensitive_arguments_in_a_failure_shows_them_masked(
    tmp_path: Path, kind: str
) -> None:
    sink = JsonlAuditSink(tmp_path / "audit.jsonl")
    clock = FakeClock()  # (a read is retried: its waits pass at once)
    keeper = Keeper(
        principal=APP,
        ledger=f"sqlite:///{tmp_path / 'l.db'}",
        audit=sink,
        clock=clock,
        sleep=clock.sleep,
    )

    @keeper.tool(effect="read_only")
    async def login(user: str, password: SecretStr, creds: list[Cred], kind: str) -> str:
        _fail(kind, f"{password.get_secret_value()} and {creds[0].password}")
        return "ok"

    arguments = {
        "user": "ann",
        "password": "hunter22",
        "creds": [{"user": "bob", "password": "PW-IN-LIST"}],
        "kind": kind,
    }
    async with keeper:
        result = await keeper.execute(ToolCall(call_id="c1", name="login", arguments=arguments))
        records = await keeper.store.list_calls()
        requests = await keeper.approvals.pending()
    assert result.error is not None
    assert f"{REDACTED} and {REDACTED}" in result.error.message
    shown = json.dumps(result.error.to_dict())
    stored = json.dumps(msgspec.to_builtins(records + requests), default=str)
    stored += (tmp_path / "audit.jsonl").read_text()
    for secret in ("hunter22", "PW-IN-LIST"):
        assert secret not in shown and secret not in stored, secret


def test_hidden_values_are_masked_whole_in_text_and_data_but_short_ones_are_not() -> None:
    pointers = sensitive_pointers(
        {
            "type": "object",
            "properties": {
                "key": {"type": "string", "writeOnly": True},
                "pin": {"type": "string", "writeOnly": True},
                "auth": {"type": "object", "x-sensitive": True},
                "creds": {"type": "array", "items": Cred.model_json_schema()},
            },
        }
    )
    arguments = {
        "key": "abcd",
        "pin": "123",
        "auth": {"t": ["abcdef-long"]},
        "creds": [{"user": "anne", "password": "PW-IN-LIST"}],
        "note": "note",
    }
    values = hidden_values(arguments, redact(arguments, pointers))
    assert values == ("abcdef-long", "PW-IN-LIST", "abcd")
    assert mask({"abcd": ["x abcdef-long y", 123]}, values) == {REDACTED: [f"x {REDACTED} y", 123]}
    assert mask("pin 123, note, anne", values) == "pin 123, note, anne"


def _event(**fields: Any) -> AuditEvent:
    """An event with only the required fields set, and `fields`."""
    required: dict[str, Any] = {
        "at": 1.0,
        "task_id": "t",
        "call_id": "c",
        "tool": "x",
        "version": None,
        "principal_id": "p",
        "tenant": "d",
        "status": "SUCCEEDED",
    }
    return AuditEvent(**(required | fields))


def test_an_event_written_as_json_keeps_every_field_that_is_set() -> None:
    full = AuditEvent(
        at=1.5,
        task_id="t",
        call_id="c",
        tool="x",
        version="2",
        principal_id="p",
        tenant="acme",
        status="FAILED",
        previous="RUNNING",
        attempt=2,
        error_code="TOOL_ERROR",
        message="boom",
        approval_id="a1",
        arguments={"k": 1},
        extra={"duration": 0.5},
    )
    written = full.to_dict()
    assert set(written) == set(AuditEvent.__struct_fields__)
    assert written == {name: getattr(full, name) for name in AuditEvent.__struct_fields__}
    bare = _event(status="REJECTED")
    assert set(bare.to_dict()) == {
        "at",
        "task_id",
        "call_id",
        "tool",
        "principal_id",
        "tenant",
        "status",
        "attempt",
    }


def test_the_jsonl_sink_writes_one_parsable_line_per_event(tmp_path: Path) -> None:
    sink = JsonlAuditSink(tmp_path / "audit.jsonl")
    event = _event(
        status="SUCCEEDED",
        arguments={"when": "é", "n": [1, 2.5]},
        extra={"odd": object.__name__},
    )
    sink.emit(event)
    sink.emit(event)
    sink.close()
    lines = (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [event.to_dict()] * 2


def test_a_lone_surrogate_is_written_as_its_escape_keeping_the_file_utf8(tmp_path: Path) -> None:
    sink = JsonlAuditSink(tmp_path / "audit.jsonl")
    event = _event(tool="ech\ud800", message="busy \udcff")
    sink.emit(event)
    sink.emit(_event())
    sink.close()
    lines = (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [event.to_dict(), _event().to_dict()]


@pytest.mark.parametrize("spelling", ["path", "url", "memory"])
def test_the_default_audit_file_sits_beside_a_sqlite_ledger_however_it_is_named(
    tmp_path: Path, spelling: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    ledger = {
        "path": str(tmp_path / "l.db"),
        "url": f"sqlite:///{tmp_path / 'l.db'}",
        "memory": "sqlite:///:memory:",
    }[spelling]
    sink = Keeper(principal=APP, ledger=ledger).audit
    if spelling == "memory":
        assert isinstance(sink, MemoryAuditSink)
        assert not list(tmp_path.iterdir())  # no ":memory:.audit.jsonl" beside nothing
    else:
        assert isinstance(sink, JsonlAuditSink) and sink.path == tmp_path / "l.audit.jsonl"


def _call_ids(path: Path) -> list[str]:
    return [json.loads(line)["call_id"] for line in path.read_text().splitlines()]


def test_the_audit_file_follows_rotation_and_deletion(tmp_path: Path) -> None:
    """logrotate moves the file away (or a person deletes it): later events go to a new file
    at the path, not into the moved file or nowhere."""
    now = [0.0]
    path = tmp_path / "audit.jsonl"
    sink = JsonlAuditSink(path, flush_every=1, clock=lambda: now[0])
    sink.emit(_event(call_id="a"))
    path.rename(tmp_path / "audit.jsonl.1")
    now[0] += 1.0
    sink.emit(_event(call_id="b"))
    path.unlink()
    now[0] += 1.0
    sink.emit(_event(call_id="c"))
    sink.emit(_event(call_id="d"))
    sink.close()
    assert _call_ids(tmp_path / "audit.jsonl.1") == ["a"]
    assert _call_ids(path) == ["c", "d"]
    assert sink.dropped == 0


def test_an_unwritable_audit_file_is_one_warning_and_a_count(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "logs"
    blocker.write_text("a file where the folder should be")
    now = [0.0]
    sink = JsonlAuditSink(blocker / "audit.jsonl", flush_every=1, clock=lambda: now[0])
    with caplog.at_level("WARNING", logger="toolkeeper"):
        for i in range(5):
            sink.emit(_event(call_id=f"lost{i}"))
            now[0] += 1.0
        blocker.unlink()
        sink.emit(_event(call_id="kept"))
        sink.close()
    assert _call_ids(blocker / "audit.jsonl") == ["kept"]
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2 and all(r.exc_info is None for r in caplog.records)
    assert "cannot write the audit file" in warnings[0]
    assert "can be written again; 5 events were lost" in warnings[1]


async def test_a_sensitive_number_quoted_by_a_failing_tool_is_masked(tmp_path: Path) -> None:
    sink = JsonlAuditSink(tmp_path / "audit.jsonl")
    keeper = Keeper(principal=APP, ledger=f"sqlite:///{tmp_path / 'l.db'}", audit=sink)

    @keeper.tool(effect="write")
    async def unlock(pin: Annotated[int, Field(json_schema_extra={"x-sensitive": True})]) -> str:
        raise ToolFailed(f"pin {pin} is wrong", details={"tried": pin})

    async with keeper:
        result = await keeper.execute(
            ToolCall(call_id="c1", name="unlock", arguments={"pin": 735911})
        )
        records = await keeper.store.list_calls()
    assert result.error is not None
    assert result.error.message == f"pin {REDACTED} is wrong"
    assert result.error.details == {"tried": REDACTED}
    stored = json.dumps(msgspec.to_builtins(records), default=str)
    stored += (tmp_path / "audit.jsonl").read_text()
    assert "735911" not in stored


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_every_event_a_failed_flush_loses_is_counted(caplog: pytest.LogCaptureFixture) -> None:
    """A full disk refuses the buffered lines when they are flushed: each of them is lost,
    not only the event whose flush failed."""
    sink = JsonlAuditSink("/dev/full", flush_every=3, clock=lambda: 0.0)
    with caplog.at_level("WARNING", logger="toolkeeper"):
        for i in range(4):
            sink.emit(_event(call_id=f"lost{i}"))
        sink.close()
        sink.close()
    assert sink.dropped == 4
    assert [r.getMessage().startswith("cannot write") for r in caplog.records] == [True]


_THREE_EVENTS = (
    "from toolkeeper.core.states import CallStatus\n"
    "from toolkeeper.observe.audit import AuditEvent, JsonlAuditSink\n"
    "class Owner:\n"
    "    def __init__(self):\n"
    "        self.sink = JsonlAuditSink(sys.argv[1], flush_every=64)\n"
    "        self.me = self\n"
    "def main():\n"
    "    owner = Owner()\n"
    "    for i in range(3):\n"
    "        owner.sink.emit(AuditEvent(at=1.0, task_id='t', call_id=f'c{i}', tool='add',\n"
    "            version='1', principal_id='p', tenant='x', status=CallStatus.SUCCEEDED))\n"
)
"""A child's script, after its imports: `main` writes three events (c0, c1, c2) to a sink that
an object in a reference cycle owns, as a keeper's parts refer to each other."""


def _run(script: str, path: Path) -> subprocess.CompletedProcess[bytes]:
    """Run `script` in a child Python on `path`; it must succeed."""
    child = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, timeout=60, check=False
    )
    assert child.returncode == 0, child.stderr.decode()
    return child


def test_a_process_that_exits_without_closing_the_sink_writes_its_buffered_lines(
    tmp_path: Path,
) -> None:
    # The sink belongs to an object in a reference cycle, as a keeper's parts refer to each
    # other: exit does not finalize it, so its file's buffer is never flushed by itself.
    path = tmp_path / "audit.jsonl"
    _run("import sys\n" + _THREE_EVENTS + "main()\n", path)
    lines = path.read_text().splitlines()
    assert [json.loads(line)["call_id"] for line in lines] == ["c0", "c1", "c2"]


def test_a_forked_child_that_exits_writes_none_of_its_parents_buffered_lines(
    tmp_path: Path,
) -> None:
    # The child's copy of the buffer holds the parent's lines: flushed at its exit, they were
    # written twice. Another thread writing an event at the fork holds the sink's lock, which
    # is never released in the child: its exit waited for it for ever (the watchdog ends it).
    path = tmp_path / "audit.jsonl"
    script = (
        "import faulthandler, os, sys\n"
        + _THREE_EVENTS
        + "    owner.sink._lock.acquire()  # as another thread, writing an event\n"
        "    if os.fork() == 0:\n"
        "        faulthandler.dump_traceback_later(10, exit=True)\n"
        "        sys.exit(0)  # a worker, or a daemonizing parent: it ends as any process does\n"
        "    owner.sink._lock.release()\n"
        "    print(os.waitstatus_to_exitcode(os.wait()[1]))\n"
        "    owner.sink.close()\n"
        "main()\n"
    )
    child = _run(script, path)
    assert child.stdout.decode().split() == ["0"], child.stderr.decode()
    lines = path.read_text().splitlines()
    assert [json.loads(line)["call_id"] for line in lines] == ["c0", "c1", "c2"]


def test_the_audit_file_is_made_its_owners_only_and_an_existing_one_keeps_its_mode(
    tmp_path: Path,
) -> None:
    made, existing = tmp_path / "new" / "audit.jsonl", tmp_path / "shared.jsonl"
    existing.touch()
    existing.chmod(0o640)
    for path in (made, existing):
        sink = JsonlAuditSink(path)
        sink.emit(_event())
        sink.close()
        assert path.read_text().count("\n") == 1
    assert stat.S_IMODE(made.stat().st_mode) == 0o600
    assert stat.S_IMODE(existing.stat().st_mode) == 0o640
