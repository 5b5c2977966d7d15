import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolkeeper import Principal

APP = Principal(id="local", grants=frozenset({"*"}))
"""An application acting for itself, with every grant: the default principal of the tests'
keepers, for calls that name none (a keeper has none unless given one)."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


MCP_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
"""An MCP client's first request, as tests send it over raw HTTP."""


def open_files() -> set[str]:
    """What this process has open (Linux: the targets of `/proc/self/fd`)."""
    out = set()
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):
            out.add(os.readlink(fd))
    return out


# The digest key of the PostgreSQL ledgers tests open (`toolkeeper.ledger.keys`), in this
# process and the ones it starts.
os.environ.setdefault("TOOLKEEPER_DIGEST_KEY", "tests-digest-key-" + "0" * 32)


def postgres_url() -> str:
    return os.environ.get("TOOLKEEPER_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture
def pg_schema() -> Iterator[str]:
    """A fresh PostgreSQL schema for one test, dropped afterwards.

    Skips when the server is unreachable, except in CI (`CI=true`), where it fails.
    """
    psycopg = pytest.importorskip("psycopg")
    url = postgres_url()
    try:
        admin = psycopg.connect(url, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL at {url} is unreachable in CI: {exc}")
        pytest.skip(f"PostgreSQL at {url} is unreachable: {exc}")
    schema = f"tk_test_{uuid.uuid4().hex[:12]}"
    with admin:
        try:
            yield schema
        finally:
            admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture
def model_cache(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """`$TOOLKEEPER_CACHE` in `tmp_path`: vectors of this test's own, but the bundled model's
    int8 graph shared by the whole run (`models/`, a link), as building it takes seconds of
    CPU each time. Returns the cache folder."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "models"
    shared.mkdir(exist_ok=True)
    (tmp_path / "models").symlink_to(shared, target_is_directory=True)
    monkeypatch.setenv("TOOLKEEPER_CACHE", str(tmp_path))
    return tmp_path


def redis_url() -> str:
    return os.environ.get("TOOLKEEPER_TEST_REDIS", "redis://127.0.0.1:6379/0")


@pytest.fixture
def redis_server() -> Iterator[object]:
    """A client of the real Redis server.

    Skips when the server is unreachable, except in CI (`CI=true`), where it fails.
    """
    redis = pytest.importorskip("redis")
    url = redis_url()
    client = redis.Redis.from_url(url, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.exceptions.ConnectionError:
        if os.environ.get("CI") == "true":
            pytest.fail(f"Redis is not reachable at {url}")
        pytest.skip(f"Redis is not reachable at {url}")
    yield client
    client.close()


SLOW_MODULES = (
    "tests/adversarial/",
    "tests/bench/",
    "tests/cli/test_bench.py",
    "tests/cli/test_eval.py",
    "tests/cli/test_main.py",
    "tests/cli/test_serve.py",
    "tests/cli/test_startup.py",
    "tests/connectors/test_mcp.py",
    "tests/connectors/test_sandbox.py",
    "tests/eval/",
    "tests/executor/test_race_postgres.py",
    "tests/ledger/test_race.py",
    "tests/observe/test_otel.py",
    "tests/policy/test_budgets_across_processes.py",
    "tests/retrieval/test_adapter.py",
    "tests/retrieval/test_embed.py",
    "tests/retrieval/test_mcp_pool.py",
    "tests/retrieval/test_meta.py",
    "tests/server/",
    "tests/test_deploy_example.py",
    "tests/test_docs_code.py",
    "tests/test_docs_reference.py",
    "tests/test_examples.py",
    "tests/test_readme.py",
    "tests/test_toolbox.py",
)
"""Modules whose tests are all `slow`, left out of `make check`: they start gateways, upstream
servers, sandboxes, browsers, the CLI or racing processes of their own, load the bundled model,
or run the benchmarks (2.5 to 30 s of CPU a test, where the others take milliseconds)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(SLOW_MODULES):
            item.add_marker(pytest.mark.slow)
