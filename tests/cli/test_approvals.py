"""`toolkeeper approvals list|approve|deny` against a real SQLite ledger."""

import json
import sqlite3
from pathlib import Path

import anyio
import pytest

from toolkeeper import Keeper, ToolCall
from toolkeeper.cli import main

from ..conftest import APP


def _request(db: Path, call_id: str, name: str = "users") -> str:
    async def run() -> str:
        keeper = Keeper(principal=APP, ledger=f"sqlite:///{db}")

        @keeper.tool(effect="destructive")
        async def drop_table(name: str) -> str:
            return name

        async with keeper:
            result = await keeper.execute(
                ToolCall(call_id=call_id, name="drop_table", arguments={"name": name})
            )
        assert result.approval_id is not None
        return result.approval_id

    return anyio.run(run)


def test_a_person_lists_and_approves_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "l.db"
    first = _request(db, "c1")
    second = _request(db, "c2")
    assert main(["approvals", "list", "--ledger", f"sqlite:///{db}", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in listed] == [first, second]
    assert listed[0]["arguments"] == {"name": "users"}

    assert main(["approvals", "approve", first, "--ledger", str(db), "--by", "ann"]) == 0
    assert main(["approvals", "deny", second, "--ledger", str(db), "--reason", "no"]) == 0
    capsys.readouterr()
    assert main(["approvals", "list", "--ledger", str(db)]) == 0
    assert "no approval requests are pending" in capsys.readouterr().out
    assert main(["approvals", "list", "--all", "--ledger", str(db), "--json"]) == 0
    listed_all = json.loads(capsys.readouterr().out)
    decided = {r["id"]: (r["status"], r["decided_by"]) for r in listed_all}
    assert decided[first] == ("approved", "ann")
    assert all(isinstance(r["decided_at"], float) for r in listed_all)
    assert decided[second][0] == "denied"


def test_deciding_twice_or_an_unknown_id_fails_clearly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "l.db"
    approval = _request(db, "c1")
    assert main(["approvals", "approve", approval, "--ledger", str(db), "--by", "ann"]) == 0
    assert main(["approvals", "deny", approval, "--ledger", str(db), "--reason", "x"]) == 1
    assert "not pending" in capsys.readouterr().err
    assert main(["approvals", "approve", "apr_missing", "--ledger", str(db)]) == 1
    assert "no approval request" in capsys.readouterr().err


def test_a_ledger_that_does_not_exist_is_an_error_and_stays_absent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "typo.db"
    assert main(["approvals", "list", "--ledger", str(missing)]) == 1
    err = capsys.readouterr().err
    assert f"no ledger at {missing}" in err and "--ledger" in err
    assert main(["approvals", "approve", "apr_1", "--ledger", str(missing)]) == 1
    assert not missing.exists()


def test_a_bad_or_unreachable_ledger_is_one_line_not_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["approvals", "list", "--ledger", "mysql://nope"]) == 1
    assert capsys.readouterr().err.startswith("toolkeeper approvals: unsupported ledger URL")
    assert main(["approvals", "list", "--ledger", "postgresql://postgres@127.0.0.1:1/x"]) == 1
    err = capsys.readouterr().err
    assert "cannot connect to the PostgreSQL ledger" in err and "Traceback" not in err


def test_decided_requests_show_who_decided_and_a_denial_needs_a_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "l.db"
    approval = _request(db, "c1")
    with pytest.raises(SystemExit):
        main(["approvals", "deny", approval, "--ledger", str(db), "--reason", "  "])
    assert "needs a reason" in capsys.readouterr().err
    assert main(["approvals", "deny", approval, "--ledger", str(db), "--reason", "not now"]) == 0
    capsys.readouterr()
    assert main(["approvals", "list", "--all", "--ledger", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].rstrip().endswith("DECIDED BY  NOTE")
    assert lines[2].rstrip().endswith("not now")


def test_listing_requests_past_their_expiry_leaves_them_out_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`approvals list` marked each expired request expired in the ledger: a listing wrote, and
    failed ("permission denied", "readonly database") for whoever may only read the ledger."""
    db = tmp_path / "l.db"
    waiting = _request(db, "c1")
    expired = _request(db, "c2")
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE approvals SET expires_at = 1.0 WHERE id = ?", (expired,))
    conn.close()
    assert main(["approvals", "list", "--ledger", str(db), "--json"]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == [waiting]
    with sqlite3.connect(db) as conn:
        stored = conn.execute("SELECT status FROM approvals WHERE id = ?", (expired,)).fetchone()
    conn.close()
    assert stored == ("pending",)
    assert main(["approvals", "list", "--all", "--ledger", str(db), "--json"]) == 0
    listed = {r["id"]: r["status"] for r in json.loads(capsys.readouterr().out)}
    assert listed == {waiting: "pending", expired: "expired"}
    assert main(["approvals", "approve", expired, "--ledger", str(db), "--by", "ann"]) == 1
    assert "expired" in capsys.readouterr().err


def test_the_person_deciding_reads_the_arguments_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The table showed `{"name": "\\u0437\\u0430..."}` for a Cyrillic argument, where
    `ledger list` shows the text itself."""
    db = tmp_path / "l.db"
    _request(db, "c1", name="заказы")
    assert main(["approvals", "list", "--ledger", str(db)]) == 0
    assert '{"name": "заказы"}' in capsys.readouterr().out


def test_a_request_is_shown_whole_where_the_list_cuts_its_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The list cuts a cell at 60 characters: a person could approve arguments they never
    saw whole. `show` prints them all, with what would run and for whom."""
    db = tmp_path / "l.db"
    name = "users_" + "x" * 80 + "_END \u202e"  # (a right-to-left override, escaped)
    approval = _request(db, "c1", name=name)
    assert main(["approvals", "list", "--ledger", str(db)]) == 0
    listed = capsys.readouterr().out
    assert "_END" not in listed and "approvals show ID" in listed
    assert main(["approvals", "show", approval, "--ledger", str(db)]) == 0
    shown = capsys.readouterr().out
    assert "x" * 80 + "_END \\u202e" in shown and "\u202e" not in shown
    assert "drop_table" in shown and "c1" in shown and "pending" in shown
    assert "HMAC-SHA256 under the ledger's digest key" in shown  # (what the digest is)
    assert main(["approvals", "show", approval, "--ledger", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["arguments"] == {"name": name}
    assert main(["approvals", "show", "nope", "--ledger", str(db)]) == 1
    assert "no approval request 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("every", [False, True])
def test_a_list_cut_at_its_limit_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], every: bool
) -> None:
    db = tmp_path / "l.db"
    ids = [_request(db, f"c{n}") for n in range(3)]
    listing = ["approvals", "list", "--ledger", str(db), "--json"] + (["--all"] if every else [])
    assert main([*listing, "--limit", "2"]) == 0
    out, err = capsys.readouterr()
    assert [r["id"] for r in json.loads(out)] == ids[:2]
    assert "the first 2 requests" in err and "--limit" in err
    assert main([*listing, "--limit", "3"]) == 0
    out, err = capsys.readouterr()
    assert [r["id"] for r in json.loads(out)] == ids
    assert err == ""


IGNORABLE = "\ufe0f\u034f\u3164"
"""A variation selector, a combining grapheme joiner, a Hangul filler: printable, invisible."""

SPOOF = (
    "users\u202e\u202a\u2066\u2069\u200b\u200f\ufeff\u2060\x1b[2K\x85\u2028\U000e0041"
    + IGNORABLE
    + "_END"
)
"""Bidi overrides and isolates, zero-width and invisible characters, an escape sequence, C1 and
line separators, a tag character: what could make the person read other arguments."""

NOTE = "ok\ndecided    by root\u202e"
"""A note that would forge a line of `approvals show`."""

HIDDEN = [c for c in SPOOF + NOTE if not c.isprintable() and c != "\n"] + list(IGNORABLE)


def test_every_rendering_of_a_request_escapes_what_would_hide_or_reorder_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`approvals list --json` and `show --json` printed bidi overrides and zero-width
    characters from the model's arguments as they were: the person read other arguments."""
    db = tmp_path / "l.db"
    approval = _request(db, "c\u202e1", name=SPOOF)
    outputs: list[str] = []
    for argv in (
        ["approvals", "list"],
        ["approvals", "list", "--json"],
        ["approvals", "list", "--all", "--json"],
        ["approvals", "show", approval],
        ["approvals", "show", approval, "--json"],
        ["approvals", "approve", approval, "--by", "ann", "--note", NOTE],
        ["approvals", "show", approval, "--json"],
        ["approvals", "show", approval],
    ):
        assert main([*argv, "--ledger", str(db)]) == 0
        outputs.append(capsys.readouterr().out)
    for out in outputs:
        assert not any(c in out for c in HIDDEN), out
    assert "users\\u202e\\u202a\\u2066" in outputs[3]
    assert json.loads(outputs[1])[0]["arguments"] == {"name": SPOOF}
    assert json.loads(outputs[4])["call_id"] == "c\u202e1"
    assert json.loads(outputs[6])["note"] == NOTE
    assert "\ndecided    by root" not in outputs[7] and "ok\\ndecided" in outputs[7]
