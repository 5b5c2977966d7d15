"""`Keeper.aselect`: the search of async code runs off the event loop."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from toolkeeper import Keeper, Principal
from toolkeeper.core.errors import ConfigurationError
from toolkeeper.retrieval.embed import HashingEmbedder
from toolkeeper.retrieval.fusion import FusionConfig
from toolkeeper.retrieval.selector import Selector

pytest.importorskip("tantivy")

pytestmark = pytest.mark.anyio

READER = Principal(id="reader", grants=frozenset({"*"}))


class _Gated(HashingEmbedder):
    """An embedder that, like a model building an index, takes until it is let go."""

    def __init__(self) -> None:
        super().__init__(384)
        self.entered = threading.Event()
        self.release = threading.Event()

    def embed(self, texts: Sequence[str]) -> Any:
        self.entered.set()
        assert self.release.wait(10), "never released: the event loop was blocked"
        return super().embed(texts)


async def test_aselect_builds_the_index_and_searches_while_the_loop_runs_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keeper = Keeper(principal=READER)

    @keeper.tool(effect="read_only")
    def get_forecast(city: str) -> str:
        """Weather forecast for a city."""
        return "sunny"

    gated = _Gated()

    def new_selector(**_: Any) -> Selector:
        config = FusionConfig(abstain_below=None)
        return Selector.for_catalog(keeper.catalog, embedder=gated, config=config)

    monkeypatch.setattr(keeper, "new_selector", new_selector)
    found = []
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:

            async def search() -> None:
                found.append(await keeper.aselect("weather forecast for Paris", k=1))

            tg.start_soon(search)
            # Only a loop that is not blocked gets here while the index is being built.
            assert await anyio.to_thread.run_sync(gated.entered.wait, 10)
            gated.release.set()
    assert found[0].names == ("get_forecast",)
    await keeper.aclose()


async def test_aselect_without_any_principal_is_refused_before_any_thread() -> None:
    keeper = Keeper()
    with pytest.raises(ConfigurationError):
        await keeper.aselect("anything")
    await keeper.aclose()
