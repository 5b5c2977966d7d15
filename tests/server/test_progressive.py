"""The progressive view's meta-tools keep their tool vectors where every selector does."""

import sqlite3
from pathlib import Path

import pytest

from toolkeeper import Keeper, Principal
from toolkeeper.server.progressive import MetaTools

pytestmark = pytest.mark.anyio


async def test_meta_tools_keep_tool_vectors_in_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without the cache a gateway embedded its whole catalog again at every start.
    monkeypatch.setenv("TOOLKEEPER_CACHE", str(tmp_path))
    keeper = Keeper(ledger="memory://")

    @keeper.tool(effect="read_only")
    async def get_forecast(city: str) -> str:
        """Weather forecast for a city."""
        return city

    async def run(call: object) -> object:
        raise AssertionError("not called")

    meta = MetaTools(keeper, run)  # type: ignore[arg-type]
    result = await meta.call(Principal(id="p"), "search_tools", {"query": "weather"})
    assert result.ok and result.data["tools"][0]["name"] == "get_forecast"
    with sqlite3.connect(tmp_path / "embeddings.sqlite") as db:
        assert db.execute("SELECT count(*) FROM vectors").fetchone()[0] >= 1


async def test_discovery_never_offers_a_tool_of_a_source_that_is_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    monkeypatch.setenv("TOOLKEEPER_CACHE", str(tmp_path))
    keeper = Keeper(ledger="memory://")

    @keeper.tool(effect="read_only")
    async def get_forecast(city: str) -> str:
        """Weather forecast for a city."""
        return city

    @keeper.tool(effect="read_only")
    async def get_weather_alerts(city: str) -> str:
        """Weather alerts for a city."""
        return city

    alerts = keeper.catalog.get("get_weather_alerts")
    assert alerts is not None
    keeper.catalog.add(replace(alerts, spec=replace(alerts.spec, source="weather-upstream")))
    up = {"weather-upstream": False}

    async def run(call: object) -> object:
        raise AssertionError("not called")

    meta = MetaTools(keeper, run, connected=lambda source: up.get(source, True))  # type: ignore[arg-type]
    who = Principal(id="p")
    found = await meta.call(who, "search_tools", {"query": "weather alerts", "k": 5})
    assert [t["name"] for t in found.data["tools"]] == ["get_forecast"]
    up["weather-upstream"] = True
    found = await meta.call(who, "search_tools", {"query": "weather alerts", "k": 5})
    assert "get_weather_alerts" in [t["name"] for t in found.data["tools"]]
