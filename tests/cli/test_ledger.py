from __future__ import annotations

import json
import socket
import sqlite3
from pathlib import Path

import anyio
import pytest

from toolkeeper.cli import main
from toolkeeper.core.states import CallStatus
from toolkeeper.ledger import SQLiteStore

from ..conftest import postgres_url
from ..ledger.records import call, dead_pid

JAN_1 = 1767225600.0
"""2026-01-01T00:00:00Z."""
HOUR = 3600.0


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
    with sqlite3.connect(path) as db:  # made on 2026-01-01 at 00:00, 01:00 and 02:00 UTC
        for n, call_id in enumerate(["ok", "crashed", "other"]):
            db.execute(
                "UPDATE calls SET created_at = ? WHERE call_id = ?", (JAN_1 + n * HOUR, call_id)
            )
    db.close()
    return f"sqlite:///{path}"


def test_list_prints_every_call_as_a_table(ledger: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ledger", "list", "--ledger", ledger]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["TASK", "CALL", "TOOL", "STATUS", "ATTEMPT", "ERROR", "CREATED"]
    assert [line.split()[:4] for line in lines[2:]] == [  # newest first
        ["t2", "other", "payments.transfer", "REJECTED"],
        ["t1", "crashed", "payments.transfer", "RUNNING"],
        ["t1", "ok", "payments.transfer", "SUCCEEDED"],
    ]
    assert lines[2].split()[-2:] == ["2026-01-01", "02:00:00"]


def test_list_filters_by_status_and_task_as_json(
    ledger: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["ledger", "list", "--ledger", ledger, "--status", "RUNNING", "--status", "SUCCEEDED"]
    assert main([*argv, "--task", "t1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["call_id"], r["status"]) for r in rows] == [
        ("crashed", "RUNNING"),
        ("ok", "SUCCEEDED"),
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
    assert ("--cursor" in err) is cut


def _listed(ledger: str, capsys: pytest.CaptureFixture[str], *options: str) -> list[str]:
    assert main(["ledger", "list", "--ledger", ledger, "--json", *options]) == 0
    return [r["call_id"] for r in json.loads(capsys.readouterr().out)]


@pytest.mark.parametrize(
    ("options", "listed"),
    [
        (["--since", "2026-01-01T01:00:00Z"], ["other", "crashed"]),
        (["--since", "2026-01-01 01:00"], ["other", "crashed"]),  # no zone: UTC
        (["--before", "2026-01-01T03:00:00+01:00"], ["crashed", "ok"]),
        (["--since", str(JAN_1), "--before", str(JAN_1 + HOUR)], ["ok"]),
        (["--since", "1h"], []),  # 2026-01-01 is longer ago than that
        (["--before", "1h"], ["other", "crashed", "ok"]),
    ],
)
def test_list_shows_the_calls_made_between_since_and_before(
    ledger: str, capsys: pytest.CaptureFixture[str], options: list[str], listed: list[str]
) -> None:
    assert _listed(ledger, capsys, *options) == listed


def test_list_pages_on_with_the_cursor_it_prints(
    ledger: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """It showed the oldest 1,000 calls, and no way to see the others."""
    pages: list[list[str]] = []
    options = ["--limit", "2"]
    while True:
        assert main(["ledger", "list", "--ledger", ledger, "--json", *options]) == 0
        out, err = capsys.readouterr()
        pages.append([r["call_id"] for r in json.loads(out)])
        if "--cursor" not in err:
            break
        options = ["--limit", "2", "--cursor", err.split("--cursor ")[1].split()[0]]
    assert pages == [["other", "crashed"], ["ok"]]


@pytest.mark.parametrize(
    "options", [["--since", "yesterday"], ["--before", "5x"], ["--cursor", "nonsense"]]
)
def test_a_time_or_cursor_it_cannot_read_is_a_usage_error(
    ledger: str, capsys: pytest.CaptureFixture[str], options: list[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["ledger", "list", "--ledger", ledger, *options])
    assert exit_.value.code == 2
    assert options[0] in capsys.readouterr().err


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


@pytest.mark.postgres
def test_list_is_newest_first_and_pages_on_a_postgresql_ledger(
    pg_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from toolkeeper.ledger import PostgresStore

    async def fill() -> float:
        async with PostgresStore(postgres_url(), schema=pg_schema) as store:
            for n in range(3):
                await store.claim_call(call(f"c{n}", task_id="t"))
            middle = await store.get_call("t", "c1")
            assert middle is not None
            return middle.created_at

    middle = anyio.run(fill)
    url = f"{postgres_url()}?options=-csearch_path%3D{pg_schema}"
    assert _listed(url, capsys) == ["c2", "c1", "c0"]
    assert _listed(url, capsys, "--since", str(middle)) == ["c2", "c1"]
    assert _listed(url, capsys, "--before", str(middle)) == ["c0"]
    assert main(["ledger", "list", "--ledger", url, "--json", "--limit", "2"]) == 0
    token = capsys.readouterr().err.split("--cursor ")[1].split()[0]
    assert _listed(url, capsys, "--cursor", token) == ["c0"]
