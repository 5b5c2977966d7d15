"""The digest key: the ledger's digests cannot be checked against guessed secrets, and every
process on one ledger uses one key."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import sqlite3
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Annotated

import pytest
from pydantic import Field

from toolkeeper import CallStatus, Keeper, ToolCall
from toolkeeper.core.errors import ConfigurationError
from toolkeeper.ledger.keys import DIGEST_KEY_ENV, DIGEST_KEY_FILE_ENV, key_file
from toolkeeper.ledger.memory import MemoryStore
from toolkeeper.ledger.sqlite import SQLiteStore
from toolkeeper.schema.canonical import canonical_json

from ..conftest import APP, postgres_url

pytestmark = pytest.mark.anyio

Pin = Annotated[str, Field(json_schema_extra={"x-sensitive": True})]


def _keeper(path: Path) -> tuple[Keeper, list[str]]:
    keeper = Keeper(principal=APP, ledger=f"sqlite:///{path}")
    opened: list[str] = []

    @keeper.tool(effect="write")
    async def unlock(door: str, pin: Pin) -> str:
        opened.append(door)
        return "open"

    @keeper.tool(effect="destructive")
    async def wipe(door: str, pin: Pin) -> str:
        return "wiped"

    return keeper, opened


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _sha256_guesses(door: str) -> dict[str, str]:
    """Every 4-digit PIN by the plain SHA-256 of the canonical arguments, as the digest was."""
    return {
        hashlib.sha256(canonical_json({"door": door, "pin": f"{n:04}"}).encode()).hexdigest(): (
            f"{n:04}"
        )
        for n in range(10_000)
    }


async def test_a_pin_is_not_found_again_from_the_ledgers_digests(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    keeper, opened = _keeper(db)
    async with keeper:
        ran = await keeper.execute(
            ToolCall(call_id="c1", name="unlock", arguments='{"door": "front", "pin": "4821"}')
        )
        asked = await keeper.execute(
            ToolCall(call_id="c2", name="wipe", arguments={"door": "front", "pin": "4821"})
        )
    assert ran.ok and opened == ["front"] and asked.status is CallStatus.AWAITING_APPROVAL
    with sqlite3.connect(db) as conn:
        stored = [d for (d,) in conn.execute("SELECT digest FROM calls")]
        stored += [d for (d,) in conn.execute("SELECT digest FROM approvals")]
        rows = " ".join(json.dumps(r) for r in conn.execute("SELECT * FROM calls"))
    assert len(stored) == 3 and "4821" not in rows
    guesses = _sha256_guesses("front")
    assert [guesses[d] for d in stored if d in guesses] == []
    # With the key (not in the ledger) the same search finds it: the digests cover the PIN.
    key = (tmp_path / "ledger.db.key").read_bytes().strip()
    keyed = {
        hmac.new(
            key, canonical_json({"door": "front", "pin": f"{n:04}"}).encode(), "sha256"
        ).hexdigest(): f"{n:04}"
        for n in range(10_000)
    }
    assert {keyed[d] for d in stored if d in keyed} == {"4821"}


async def test_the_key_is_kept_beside_the_ledger_and_a_restart_keeps_its_records_working(
    tmp_path: Path,
) -> None:
    db = tmp_path / "ledger.db"
    first, opened = _keeper(db)
    call = ToolCall(call_id="c1", name="unlock", arguments={"door": "front", "pin": "4821"})
    wipe = ToolCall(call_id="w1", name="wipe", arguments={"door": "back", "pin": "0007"})
    async with first:
        assert (await first.execute(call)).ok
        asked = await first.execute(wipe)
    key = (tmp_path / "ledger.db.key").read_bytes()
    assert _mode(tmp_path / "ledger.db.key") == 0o600 and len(key.strip()) == 64

    again, opened_again = _keeper(db)
    async with again:
        assert asked.approval_id is not None
        await again.approvals.approve(asked.approval_id, by="ops")
        replayed = await again.execute(call)
        wiped = await again.execute(wipe)
    assert replayed.replayed and opened + opened_again == ["front"]
    assert wiped.ok and wiped.approval_id == asked.approval_id
    assert (tmp_path / "ledger.db.key").read_bytes() == key


def test_processes_opening_a_new_ledger_at_once_all_read_one_key(tmp_path: Path) -> None:
    path = tmp_path / "new.db.key"
    start = threading.Barrier(16)
    keys: list[bytes] = []

    def read() -> None:
        start.wait()
        keys.append(key_file(path))

    threads = [threading.Thread(target=read) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(keys) == 16 and len(set(keys)) == 1
    assert keys[0] == path.read_bytes().strip() and _mode(path) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["new.db.key"]  # no temporary file left


def test_processes_opening_one_new_ledger_share_its_key_and_run_a_call_once(
    tmp_path: Path,
) -> None:
    db, effects = tmp_path / "new.db", tmp_path / "effects"
    children = [
        subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).with_name("unlock_on_go.py")),
                str(db),
                str(effects),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    try:
        for child in children:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        ends = []
        for child in children:
            out, _ = child.communicate(timeout=60)
            assert child.returncode == 0
            ends.append(out.strip())
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    assert sorted(ends) == ["SUCCEEDED", "replayed", "replayed", "replayed"]
    assert effects.read_text() == "front\n"
    assert sorted(p.name for p in tmp_path.iterdir() if "key" in p.name) == ["new.db.key"]


async def test_a_ledger_named_through_a_link_has_the_key_of_the_file(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    real = tmp_path / "data" / "ledger.db"
    (tmp_path / "ledger.db").symlink_to(real)
    keys = []
    for path in (real, tmp_path / "ledger.db"):
        async with SQLiteStore(path) as store:
            keys.append(store.digest_key())
    assert keys[0] == keys[1] and not (tmp_path / "ledger.db.key").exists()


def test_a_short_or_missing_key_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from toolkeeper.ledger.keys import from_environment

    monkeypatch.setenv(DIGEST_KEY_ENV, "secret")
    with pytest.raises(ConfigurationError):
        from_environment("test")
    monkeypatch.delenv(DIGEST_KEY_ENV)
    monkeypatch.setenv(DIGEST_KEY_FILE_ENV, str(tmp_path / "missing.key"))
    with pytest.raises(ConfigurationError):
        from_environment("test")
    (tmp_path / "given.key").write_text("k" * 40 + "\n")
    monkeypatch.setenv(DIGEST_KEY_FILE_ENV, str(tmp_path / "given.key"))
    assert from_environment("test") == b"k" * 40
    monkeypatch.delenv(DIGEST_KEY_FILE_ENV)
    with pytest.raises(ConfigurationError):
        from_environment("test")


def test_a_memory_store_has_a_key_of_its_own() -> None:
    assert MemoryStore().digest_key() != MemoryStore().digest_key()
    assert MemoryStore(digest_key=b"x" * 32).digest_key() == b"x" * 32


async def test_a_postgresql_ledger_needs_a_key_and_its_processes_share_it(
    pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("psycopg")
    from toolkeeper.ledger.postgres import PostgresStore

    monkeypatch.delenv(DIGEST_KEY_ENV, raising=False)
    monkeypatch.delenv(DIGEST_KEY_FILE_ENV, raising=False)
    keyless = Keeper(principal=APP, ledger=PostgresStore(postgres_url(), schema=pg_schema))
    with pytest.raises(ConfigurationError):
        await keeper_open(keyless)
    await keyless.store.aclose()

    monkeypatch.setenv(DIGEST_KEY_ENV, "p" * 32)
    digests = []
    for _ in range(2):  # two processes, or one restarted
        store = PostgresStore(postgres_url(), schema=pg_schema)
        keeper = Keeper(principal=APP, ledger=store)

        @keeper.tool(effect="write")
        async def unlock(pin: Pin) -> str:
            return "open"

        async with keeper:
            result = await keeper.execute(
                ToolCall(call_id="c1", name="unlock", arguments={"pin": "4821"})
            )
            record = await store.get_call("default", "c1")
        assert record is not None and (result.ok or result.replayed)
        digests.append(record.digest)
    assert digests[0] == digests[1]
    assert digests[0] not in _sha256_guesses_of_pin_only()
    given = PostgresStore(postgres_url(), schema=pg_schema, digest_key="q" * 32)
    assert given.digest_key() == b"q" * 32


async def keeper_open(keeper: Keeper) -> None:
    await keeper.open()


def _sha256_guesses_of_pin_only() -> set[str]:
    return {
        hashlib.sha256(canonical_json({"pin": f"{n:04}"}).encode()).hexdigest()
        for n in range(10_000)
    }


async def test_the_key_is_in_no_repr_of_the_keeper_its_runtime_or_its_store(
    tmp_path: Path,
) -> None:
    keeper, _ = _keeper(tmp_path / "ledger.db")
    async with keeper:
        key = (tmp_path / "ledger.db.key").read_bytes().strip()
        assert keeper.runtime.digest_key == key
        shown = " ".join(repr(x) for x in (keeper, keeper.runtime, keeper.store))
    assert key.decode() not in shown and repr(key) not in shown


@pytest.mark.parametrize(
    ("mode", "warned"),
    [(0o600, False), (0o640, False), (0o644, True), (0o660, True), (0o606, True)],
)
async def test_a_key_file_open_to_other_users_is_used_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: int, warned: bool
) -> None:
    key = tmp_path / "ledger.db.key"
    key.write_text("k" * 64 + "\n")
    key.chmod(mode)
    with caplog.at_level(logging.WARNING, logger="toolkeeper"):
        async with SQLiteStore(tmp_path / "ledger.db") as store:
            assert store.digest_key() == b"k" * 64
    about_key = [r for r in caplog.records if str(key) in r.getMessage()]
    assert bool(about_key) is warned
    assert all("k" * 32 not in r.getMessage() for r in caplog.records)
    assert _mode(key) == mode  # (the operator's to set: not changed)
