from __future__ import annotations

import json
import socket
from pathlib import Path

import anyio
import pytest

from toolkeeper.cli import main
from toolkeeper.core.states import CallStatus
from toolkeeper.ledger import SQLiteStore

from ..ledger.records import call, dead_pid


@pytest.fixture
def ledger(tmp_path: Path) -> str:
    path = tmp_path / "ledger.db"
    gone = f"{socket.gethostname()}:{dead_pid()}"

    async def fill() -> None:
        async with SQLiteStore(path) as store:
            await store.claim_call(call("ok", task_id="t1", status=CallStatus.SUCCEEDED))
            await store.claim_call(call("crashed", task_id="t1", owner=gone))
            await store.claim_call(call("other", task_id="t2", status=CallStatus.REJECTED))

    anyio.run(fill)
    return f"sqlite:///{path}"


def test_list_prints_every_call_as_a_table(ledger: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ledger", "list", "--ledger", ledger]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["TASK", "CALL", "TOOL", "STATUS", "ATTEMPT", "ERROR", "UPDATED"]
    assert [line.split()[:4] for line in lines[2:]] == [
        ["t1", "ok", "payments.transfer", "SUCCEEDED"],
        ["t1", "crashed", "payments.transfer", "RUNNING"],
        ["t2", "other", "payments.transfer", "REJECTED"],
    ]


def test_list_filters_by_status_and_task_as_json(
    ledger: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["ledger", "list", "--ledger", ledger, "--status", "RUNNING", "--status", "SUCCEEDED"]
    assert main([*argv, "--task", "t1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["call_id"], r["status"]) for r in rows] == [
        ("ok", "SUCCEEDED"),
        ("crashed", "RUNNING"),
    ]


@pytest.mark.parametrize(("limit", "cut"), [(2, True), (3, False), (4, False), (2**64, False)])
def test_list_says_it_was_cut_only_when_calls_were_left_out(
    ledger: str, capsys: pytest.CaptureFixture[str], limit: int, cut: bool
) -> None:
    # With as many calls as --limit, it said "the first 3 calls; --limit shows more": there
    # were no more.
    assert main(["ledger", "list", "--ledger", ledger, "--limit", str(limit), "--json"]) == 0
    out, err = capsys.readouterr()
    assert len(json.loads(out)) == min(limit, 3)
    assert ("--limit shows more" in err) is cut


def test_ledger_url_comes_from_the_environment(
    ledger: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLKEEPER_LEDGER", ledger)
    assert main(["ledger", "list", "--task", "t2", "--json"]) == 0
    assert [r["call_id"] for r in json.loads(capsys.readouterr().out)] == ["other"]


def test_unknown_lists_the_calls_a_person_must_decide(
    ledger: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ledger", "unknown", "--ledger", ledger]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["TASK", "CALL", "TOOL", "ARGUMENTS"]
    [row] = lines[2:]
    assert row.split()[:3] == ["t1", "crashed", "payments.transfer"]
    assert '"amount": 12.5' in row and "tk-t1-crashed" in row

    assert main(["ledger", "unknown", "--ledger", ledger, "--json"]) == 0
    [record] = json.loads(capsys.readouterr().out)
    assert record["status"] == "UNKNOWN_OUTCOME"
    assert record["error"]["code"] == "UNKNOWN_OUTCOME"


def test_an_empty_ledger_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.db"

    async def create() -> None:
        async with SQLiteStore(path):
            pass

    anyio.run(create)
    assert main(["ledger", "unknown", "--ledger", f"sqlite:///{path}"]) == 0
    assert capsys.readouterr().out.strip() == "no calls need a decision"
    assert main(["ledger", "list", "--ledger", str(path)]) == 0
    assert capsys.readouterr().out.strip() == "no calls"


def test_a_ledger_that_does_not_exist_is_not_created_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "sub" / "typo.db"
    for action in ("list", "unknown"):
        assert main(["ledger", action, "--ledger", f"sqlite:///{missing}"]) == 1
        err = capsys.readouterr().err
        assert f"no ledger at {missing}" in err and "TOOLKEEPER_LEDGER" in err
    assert not missing.exists() and not missing.parent.exists()


def test_a_bad_ledger_url_is_an_error_not_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ledger", "list", "--ledger", "mysql://nope"]) == 1
    assert "unsupported ledger URL" in capsys.readouterr().err


def test_what_a_model_named_cannot_rewrite_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ledger.db"
    forged = "x\rt9  wipe_all  SUCCEEDED\x1b[31m\u202e\u3164\ufe0f"

    async def fill() -> None:
        async with SQLiteStore(path) as store:
            await store.claim_call(call(forged, task_id="t1", status=CallStatus.REJECTED))

    anyio.run(fill)
    assert main(["ledger", "list", "--ledger", str(path)]) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in "\r\x1b\u202e\u3164\ufe0f")
    assert "x\\rt9" in out and "\\u001b[31m" in out
    assert main(["ledger", "list", "--ledger", str(path), "--json"]) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in "\x1b\u202e\u3164\ufe0f")
    assert json.loads(out)[0]["call_id"] == forged


def test_a_person_settles_an_unknown_call_and_it_replays_what_they_found(
    ledger: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`ledger unknown` said a person must decide, and no command recorded the decision."""
    assert main(["ledger", "unknown", "--ledger", ledger]) == 0
    assert "toolkeeper ledger settle TASK CALL" in capsys.readouterr().err
    settle = ["ledger", "settle", "t1", "crashed", "--ledger", ledger, "--by", "ann"]
    assert (
        main([*settle, "--succeeded", "--note", "bank shows tx 42", "--result", '{"tx": 42}']) == 0
    )
    assert capsys.readouterr().out.strip() == "t1 crashed payments.transfer: SUCCEEDED"
    assert main([*settle, "--failed", "--note", "again"]) == 1
    assert "is SUCCEEDED, not UNKNOWN_OUTCOME" in capsys.readouterr().err
    assert (
        main(["ledger", "settle", "t1", "nope", "--ledger", ledger, "--failed", "--note", "x"]) == 1
    )
    assert "no call 'nope'" in capsys.readouterr().err

    async def read() -> object:
        async with SQLiteStore(tmp_path / "ledger.db") as store:
            return await store.get_call("t1", "crashed")

    record = anyio.run(read)
    assert getattr(record, "status", None) is CallStatus.SUCCEEDED
    assert getattr(record, "result", None) == {"tx": 42}
    events = [
        json.loads(line) for line in (tmp_path / "ledger.audit.jsonl").read_text().splitlines()
    ]
    assert events[-1]["extra"] == {"by": "person:ann", "note": "bank shows tx 42"}
    assert (events[-1]["previous"], events[-1]["status"]) == ("UNKNOWN_OUTCOME", "SUCCEEDED")


def test_a_result_for_a_call_that_did_not_take_effect_is_refused_not_dropped(
    ledger: str, capsys: pytest.CaptureFixture[str]
) -> None:
    settle = ["ledger", "settle", "t1", "crashed", "--ledger", ledger, "--note", "no tx"]
    assert main([*settle, "--failed", "--result", '{"n": 2}']) == 2
    assert "--result" in capsys.readouterr().err
    assert main(["ledger", "unknown", "--ledger", ledger]) == 0  # still to be decided
    assert "crashed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "--ledger: is empty"),
        ("memory://", "memory:// lives inside one process"),
        ("{tmp}", "it is a folder, not a ledger file"),
    ],
)
def test_a_ledger_that_cannot_be_looked_at_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, message: str
) -> None:
    """`--ledger ""` fell back to the default, memory:// always showed "no calls", and a folder
    was "a file that does not exist"."""
    try:
        code = main(["ledger", "list", "--ledger", value.replace("{tmp}", str(tmp_path))])
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    assert code in (1, 2) and message in capsys.readouterr().err


@pytest.mark.parametrize("url", ["memory://", "sqlite:///:memory:", ":memory:"])
def test_an_in_memory_ledger_from_the_environment_is_refused_not_shown_empty(
    url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`TOOLKEEPER_LEDGER=memory://` listed "no calls" and "no approval requests are
    pending", exit 0: the application's calls and requests live in its own process."""
    monkeypatch.setenv("TOOLKEEPER_LEDGER", url)
    for argv in (["ledger", "list"], ["ledger", "unknown"], ["approvals", "list"]):
        assert main(argv) == 1
        assert "lives inside one process" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["ledger", "list", "--ledger", url])
    assert "lives inside one process" in capsys.readouterr().err


def test_list_tools_args_must_be_an_object(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["list-tools", "--url", "http://127.0.0.1:9/mcp", "--call", "x", "--args", "[1]"]
    assert main(argv) == 2
    assert "toolkeeper list-tools: --args must be a JSON object" in capsys.readouterr().err


def test_the_version_is_one_flag_away(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.startswith("toolkeeper ")
