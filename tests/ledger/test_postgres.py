from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator

import anyio
import pytest

from toolkeeper.core.errors import ConfigurationError, StoreError
from toolkeeper.core.states import CallStatus
from toolkeeper.ledger import LedgerStore, PostgresStore
from toolkeeper.ledger.migrations import (
    INSERT_VERSION,
    LATEST,
    MIGRATIONS,
    SCHEMA_VERSION_DDL,
)

from ..conftest import postgres_url
from . import records
from .contract import Connect, LedgerContract
from .pages_contract import PagesContract

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


class TestPostgresStore(LedgerContract, PagesContract):
    @pytest.fixture
    async def connect(self, pg_schema: str) -> AsyncIterator[Connect]:
        opened: list[PostgresStore] = []

        async def connect() -> LedgerStore:
            store = PostgresStore(postgres_url(), schema=pg_schema, max_size=2)
            await store.open()
            opened.append(store)
            return store

        yield connect
        for store in opened:
            await store.aclose()


async def test_stores_opening_one_schema_at_once_migrate_it_once(pg_schema: str) -> None:
    stores = [PostgresStore(postgres_url(), schema=pg_schema) for _ in range(4)]
    async with anyio.create_task_group() as tg:
        for store in stores:
            tg.start_soon(store.open)
    async with stores[0]._conn() as conn:
        cur = await conn.execute("SELECT version FROM schema_version ORDER BY version")
        assert await cur.fetchall() == [(v,) for v in range(1, LATEST + 1)]
    for store in stores:
        await store.aclose()


def test_schema_names_must_be_plain_identifiers() -> None:
    with pytest.raises(ConfigurationError):
        PostgresStore(postgres_url(), schema="x; DROP TABLE calls")


def test_without_psycopg_the_error_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "import toolkeeper, toolkeeper.ledger\n"
        "try:\n"
        "    toolkeeper.ledger.PostgresStore\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert 'pip install "toolkeeper[postgres]"' in out.stdout


def test_importing_toolkeeper_does_not_import_psycopg() -> None:
    code = "import sys, toolkeeper, toolkeeper.ledger; print('psycopg' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


async def test_an_unreachable_server_is_a_store_error_at_open() -> None:
    store = PostgresStore("postgresql://postgres@127.0.0.1:1/test", timeout=2)
    with pytest.raises(StoreError) as caught:
        await store.open()
    await store.aclose()
    # One line, as `toolkeeper ledger list` prints it: libpq put its hint ("Is the server
    # running on that host...") on a second one.
    assert "\n" not in str(caught.value)


async def test_synchronous_commit_can_be_relaxed(pg_schema: str) -> None:
    async with (
        PostgresStore(postgres_url(), schema=pg_schema, synchronous_commit=False) as store,
        store._conn() as conn,
    ):
        cur = await conn.execute("SHOW synchronous_commit")
        assert await cur.fetchone() == ("off",)


def test_the_repr_never_shows_a_password() -> None:
    store = PostgresStore("postgresql://u:s3cret@db.example:5433/prod", schema="ledger")
    assert "s3cret" not in repr(store)
    assert "db.example:5433/prod" in repr(store)


async def test_a_store_that_must_not_create_refuses_a_schema_without_a_ledger(
    pg_schema: str,
) -> None:
    # What `toolkeeper ledger list` / `approvals list` open: a mistyped database or schema
    # must be an error, never an empty ledger made on the spot.
    absent = PostgresStore(postgres_url(), schema=pg_schema, create=False)
    with pytest.raises(StoreError, match="no ledger in schema"):
        await absent.open()
    await absent.aclose()
    import psycopg

    with psycopg.connect(postgres_url()) as conn:
        found = conn.execute(
            "SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", (pg_schema,)
        ).fetchone()
    assert found is None  # nothing was made
    async with PostgresStore(postgres_url(), schema=pg_schema):  # created the usual way
        pass
    existing = PostgresStore(postgres_url(), schema=pg_schema, create=False)
    async with existing:
        assert await existing.list_calls() == []


async def test_a_store_that_must_not_create_refuses_an_older_ledger_and_leaves_it(
    pg_schema: str,
) -> None:
    """`toolkeeper ledger list` upgraded a ledger an older toolkeeper wrote, which that
    toolkeeper's gateways then refused to open ("newer than this toolkeeper")."""
    import psycopg

    def versions() -> list[int]:
        with psycopg.connect(postgres_url()) as conn:
            rows = conn.execute(f"SELECT version FROM {pg_schema}.schema_version")
            return sorted(row[0] for row in rows)

    with psycopg.connect(postgres_url(), autocommit=True) as conn:  # schema version 1
        conn.execute(f"CREATE SCHEMA {pg_schema}")
        conn.execute(f"SET search_path = {pg_schema}")
        conn.execute(SCHEMA_VERSION_DDL)
        for statement in MIGRATIONS[0].statements:
            conn.execute(statement)
        conn.execute(INSERT_VERSION.replace("?", "%s"), (1, MIGRATIONS[0].name, 0.0))
    reader = PostgresStore(postgres_url(), schema=pg_schema, create=False)
    with pytest.raises(StoreError, match="older than this toolkeeper"):
        await reader.open()
    await reader.aclose()
    assert versions() == [1]
    async with PostgresStore(postgres_url(), schema=pg_schema):  # the application's open
        pass
    assert versions() == list(range(1, LATEST + 1))


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://postgres:s3cr%zzet@127.0.0.1:5432/test",  # a bad percent-escape
        "postgresql://postgres:s3cret@[::1/test",  # an unclosed bracket
        "postgresql://postgres@127.0.0.1/test?password=s3cr%zzet",
    ],
)
async def test_a_url_that_does_not_parse_is_refused_without_its_password(url: str) -> None:
    """libpq quotes the part of a URL it cannot parse, and the error said "invalid
    percent-encoded token: "s3cr%zzet"" (or the whole URL) on the command line and in logs."""
    store = PostgresStore(url)
    with pytest.raises(StoreError, match="cannot connect") as refused:
        await store.open()
    await store.aclose()
    assert "s3cr" not in str(refused.value)


def test_the_url_of_a_reading_command_opens_a_store_that_does_not_create() -> None:
    from toolkeeper.ledger import open_store

    store = open_store(postgres_url(), create=False)
    assert isinstance(store, PostgresStore) and store.create is False


async def test_a_connection_the_server_dropped_is_replaced_instead_of_failing_a_write(
    pg_schema: str,
) -> None:
    # A restart, a failover or an idle timeout closes the pooled connection; the next write
    # (the end of a call whose effect happened) must not be the one that finds out.
    import psycopg

    async with PostgresStore(
        postgres_url(), schema=pg_schema, min_size=1, max_size=1, check_after=0.0
    ) as store:
        await store.claim_call(records.call(task_id="t", call_id="c"))
        async with store._conn() as conn:
            pid = conn.info.backend_pid
        with psycopg.connect(postgres_url(), autocommit=True) as admin:
            # Waits (up to 5 s) until that backend, ours alone, has gone.
            admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
        ended = await store.transition(
            "t", "c", expected=CallStatus.RUNNING, target=CallStatus.SUCCEEDED
        )
    assert ended.status is CallStatus.SUCCEEDED


@pytest.mark.parametrize("operation", ["get_call", "claim_call", "transition"])
async def test_connections_dropped_under_steady_traffic_are_replaced_and_the_operation_run_again(
    pg_schema: str, operation: str
) -> None:
    # Used within `check_after`, a pooled connection is not checked before use: a restart
    # under steady traffic failed one operation per pooled connection, among them the end
    # of a call whose effect had happened.
    import psycopg

    async with PostgresStore(postgres_url(), schema=pg_schema, min_size=2, max_size=2) as store:
        await store.claim_call(records.call(task_id="t", call_id="c"))
        async with store._conn() as first, store._conn() as second:
            pids = {first.info.backend_pid, second.info.backend_pid}
        with psycopg.connect(postgres_url(), autocommit=True) as admin:
            for pid in pids:  # both of ours, and only ours
                admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
        if operation == "get_call":
            found = await store.get_call("t", "c")
            assert found is not None and found.status is CallStatus.RUNNING
        elif operation == "claim_call":
            _, created = await store.claim_call(records.call(task_id="t", call_id="d"))
            assert created
        else:
            ended = await store.transition(
                "t", "c", expected=CallStatus.RUNNING, target=CallStatus.SUCCEEDED
            )
            assert ended.status is CallStatus.SUCCEEDED


@pytest.fixture
def pg_role(pg_schema: str) -> Iterator[str]:
    """A login role that may create nothing, for one test; dropped afterwards."""
    import psycopg

    role = f"{pg_schema}_user"
    with psycopg.connect(postgres_url(), autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        try:
            yield role
        finally:
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")


def _url_of(role: str) -> str:
    from psycopg.conninfo import make_conninfo

    return make_conninfo(postgres_url(), user=role)


@pytest.mark.parametrize("create", [True, False])
async def test_a_user_who_may_not_create_tables_opens_a_ledger_made_before(
    pg_schema: str, pg_role: str, create: bool
) -> None:
    # What an operator gives a gateway (and `toolkeeper ledger list`): the rights to use the
    # tables the schema's owner made, none to create any.
    import psycopg

    async with PostgresStore(postgres_url(), schema=pg_schema):
        pass
    with psycopg.connect(postgres_url(), autocommit=True) as admin:
        admin.execute(f"GRANT USAGE ON SCHEMA {pg_schema} TO {pg_role}")
        admin.execute(
            f"GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA {pg_schema} TO {pg_role}"
        )
    async with PostgresStore(_url_of(pg_role), schema=pg_schema, create=create) as store:
        assert (await store.claim_call(records.call()))[1]


async def test_a_user_who_may_not_create_tables_is_told_so_in_one_line_when_none_are_there(
    pg_schema: str, pg_role: str
) -> None:
    store = PostgresStore(_url_of(pg_role), schema=pg_schema)
    with pytest.raises(StoreError, match="may") as caught:
        await store.open()
    await store.aclose()
    assert "\n" not in str(caught.value)  # what `toolkeeper serve` prints


async def test_an_upgrade_blocked_by_an_open_transaction_fails_within_the_timeout(
    pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A step altering `calls` waited for ever behind a session left in a transaction (an
    # operator's psql), and every statement on `calls` of the serving processes queued behind it.
    import psycopg

    from toolkeeper.ledger import migrations

    async with PostgresStore(postgres_url(), schema=pg_schema):
        pass
    step = migrations.Migration(
        version=LATEST + 1, name="a column", statements=("ALTER TABLE calls ADD COLUMN x TEXT",)
    )
    monkeypatch.setattr(migrations, "MIGRATIONS", (*migrations.MIGRATIONS, step))
    monkeypatch.setattr(migrations, "LATEST", LATEST + 1)
    with psycopg.connect(postgres_url(), options=f"-c search_path={pg_schema}") as idle:
        idle.execute("SELECT count(*) FROM calls").fetchall()  # and left open
        store = PostgresStore(postgres_url(), schema=pg_schema, timeout=0.2)
        with anyio.fail_after(5), pytest.raises(StoreError, match="lock"):
            await store.open()
        await store.aclose()
        idle.rollback()
    upgraded = PostgresStore(postgres_url(), schema=pg_schema)  # once it ends
    async with upgraded, upgraded._conn() as conn:
        cur = await conn.execute("SELECT max(version) FROM schema_version")
        assert await cur.fetchone() == (LATEST + 1,)
