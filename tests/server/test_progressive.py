"""The progressive view's meta-tools keep their tool vectors where every selector does."""

import sqlite3
from pathlib import Path

import mcp_types
import pytest

from toolkeeper import Keeper, Principal
from toolkeeper.config import parse_config
from toolkeeper.core.errors import ConfigurationError
from toolkeeper.server import build
from toolkeeper.server.progressive import MetaTools

from ..conftest import APP, open_files
from .conftest import config_text

pytestmark = pytest.mark.anyio


@pytest.fixture
def keeper(model_cache: Path) -> Keeper:
    """A keeper with one weather tool, its tool vectors cached under `tmp_path`."""
    keeper = Keeper(principal=APP, ledger="memory://")

    @keeper.tool(effect="read_only")
    async def get_forecast(city: str) -> str:
        """Weather forecast for a city."""
        return city

    return keeper


async def _not_run(call: object) -> object:
    raise AssertionError("no inner call is made here")


async def test_meta_tools_keep_tool_vectors_in_the_cache(keeper: Keeper, tmp_path: Path) -> None:
    # Without the cache a gateway embedded its whole catalog again at every start.
    meta = MetaTools(keeper, _not_run)  # type: ignore[arg-type]
    result = await meta.call(Principal(id="p"), "search_tools", {"query": "weather"})
    assert result.ok and result.data["tools"][0]["name"] == "get_forecast"
    with sqlite3.connect(tmp_path / "embeddings.sqlite") as db:
        assert db.execute("SELECT count(*) FROM vectors").fetchone()[0] >= 1


async def test_discovery_never_offers_a_tool_of_a_source_that_is_down(keeper: Keeper) -> None:
    from dataclasses import replace

    @keeper.tool(effect="read_only")
    async def get_weather_alerts(city: str) -> str:
        """Weather alerts for a city."""
        return city

    alerts = keeper.catalog.get("get_weather_alerts")
    assert alerts is not None
    keeper.catalog.add(replace(alerts, spec=replace(alerts.spec, source="weather-upstream")))
    up = {"weather-upstream": False}

    meta = MetaTools(keeper, _not_run, connected=lambda source: up.get(source, True))  # type: ignore[arg-type]
    who = Principal(id="p")
    found = await meta.call(who, "search_tools", {"query": "weather alerts", "k": 5})
    assert [t["name"] for t in found.data["tools"]] == ["get_forecast"]
    up["weather-upstream"] = True
    found = await meta.call(who, "search_tools", {"query": "weather alerts", "k": 5})
    assert "get_weather_alerts" in [t["name"] for t in found.data["tools"]]


async def test_search_tools_ranks_and_abstains_as_the_keepers_own_select(
    model_cache: Path,
) -> None:
    # The gateway's search ignored `Keeper(selection=...)`: a keeper told never to abstain
    # still answered no_tool_fits=true, and a `query_adapter` of its own went unused.
    from toolkeeper.retrieval.fusion import FusionConfig

    keeper = Keeper(principal=APP, ledger="memory://", selection=FusionConfig(abstain_below=None))

    @keeper.tool(effect="read_only")
    async def get_forecast(city: str) -> str:
        """Weather forecast for a city."""
        return city

    who = Principal(id="p")
    assert keeper.select("bake a cake", principal=who).names == ("get_forecast",)
    meta = MetaTools(keeper, _not_run)  # type: ignore[arg-type]
    found = await meta.call(who, "search_tools", {"query": "bake a cake"})
    assert found.data == {
        "tools": [{"name": "get_forecast", "summary": "Weather forecast for a city."}],
        "no_tool_fits": False,
    }


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="lists open files in /proc")
async def test_a_closed_deployment_closes_the_search_index_of_its_progressive_view(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The gateway's index stayed subscribed to the catalog, its vector cache open, for as
    # long as the process lived.
    monkeypatch.setenv("TOOLKEEPER_CACHE", str(tmp_path / "cache"))
    config = parse_config(config_text(tmp_path), file="test.toml", base_dir=str(tmp_path))
    async with build(config) as running:
        carol = running.gateway.principals["carol"]  # (progressive)
        search = mcp_types.CallToolRequestParams(name="search_tools", arguments={"query": "notes"})
        found = await running.gateway.call_tool(carol, search)
        assert not found.is_error  # type: ignore[union-attr]
        cache = str(tmp_path / "cache" / "embeddings.sqlite")
        assert cache in open_files()
        listeners = len(running.keeper.catalog._listeners)
    assert cache not in open_files()
    assert len(running.keeper.catalog._listeners) < listeners
    with pytest.raises(ConfigurationError):
        await running.gateway.call_tool(carol, search)
