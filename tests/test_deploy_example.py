"""examples/deploy (docs/deployment.md): the gateway file is a valid configuration of several
processes on one PostgreSQL ledger, and the compose file runs what the guide says."""

from pathlib import Path

import pytest
import yaml

from toolkeeper.config import load_config
from toolkeeper.server import build

DEPLOY = Path(__file__).resolve().parents[1] / "examples" / "deploy"


def test_the_example_gateway_is_a_postgresql_ledger_with_shared_rate_limits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("psycopg")
    monkeypatch.setenv("TOOLKEEPER_APP_TOKEN", "app-token-0123456789")
    config = load_config(DEPLOY / "gateway.toml")
    assert config.server.ledger.startswith("postgresql://")
    assert config.budgets.rate_limiter == "redis://redis:6379/0"
    deployment = build(config)  # (made, not opened: nothing connects)
    assert deployment.keeper.store.pool_size == config.server.ledger_pool_size == 8


def test_the_compose_file_runs_two_gateways_on_one_ledger_behind_a_balancer() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"postgres", "redis", "gateway", "balancer"}
    gateway = services["gateway"]
    assert gateway["deploy"]["replicas"] == 2
    assert "toolkeeper serve --config gateway.toml" in gateway["command"]
    assert "TOOLKEEPER_DIGEST_KEY" in gateway["environment"]
    assert gateway["working_dir"] == "/srv/examples/deploy"
    haproxy = (DEPLOY / "haproxy.cfg").read_text()
    assert "balance hdr(Mcp-Session-Id)" in haproxy
