"""Retrieval over a pool of real MCP servers' tools: mcp-server-time and mcp-server-git from
PyPI, and a server whose descriptions are empty, very long, Chinese, markup or emoji — each
listed over stdio by the MCP SDK, indexed with the bundled embedder, and searched."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import pytest

from toolkeeper.catalog import Catalog
from toolkeeper.connectors.mcp import McpUpstream, UpstreamParams
from toolkeeper.core import Principal, ToolSpec
from toolkeeper.retrieval.embed import EmbeddingCache, MiniLMEmbedder
from toolkeeper.retrieval.fusion import FusionConfig
from toolkeeper.retrieval.selector import Selector

pytest.importorskip("tantivy")
pytest.importorskip("onnxruntime")
pytest.importorskip("mcp_server_time")
pytest.importorskip("mcp_server_git")

pytestmark = pytest.mark.slow

ODD = str(Path(__file__).with_name("odd_descriptions_server.py"))
EVERYONE = Principal(id="pool", grants=frozenset({"*"}))


async def _list_tools(repo: Path) -> list[ToolSpec]:
    servers = [
        ("time", ("-m", "mcp_server_time")),
        ("git", ("-m", "mcp_server_git", "--repository", str(repo))),
        ("odd", (ODD,)),
    ]
    catalog = Catalog()
    async with AsyncExitStack() as stack:
        for name, args in servers:
            params = UpstreamParams(trust_hints=True, name=name, command=sys.executable, args=args)
            upstream = await stack.enter_async_context(McpUpstream(params, catalog))
            assert upstream.connected, name
        return [tool.spec for tool in catalog]


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> list[ToolSpec]:
    """The tools the three servers list (each started once for the whole module)."""
    repo = tmp_path_factory.mktemp("pool") / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return anyio.run(_list_tools, repo)


@pytest.fixture(scope="module")
def selector(pool: list[ToolSpec], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Selector]:
    selector = Selector(
        embedder=MiniLMEmbedder(),
        cache=EmbeddingCache(tmp_path_factory.mktemp("vectors") / "vectors.sqlite"),
        config=FusionConfig(abstain_below=None),
    )
    selector.upsert_many(pool)
    yield selector
    selector.close()


def top(selector: Selector, query: str, k: int = 3) -> tuple[str, ...]:
    return selector.select(query, principal=EVERYONE, k=k).names


def test_every_listed_tool_is_indexed_whatever_its_description(
    pool: list[ToolSpec], selector: Selector
) -> None:
    names = {spec.name for spec in pool}
    assert {"time.get_current_time", "git.git_log", "odd.build_report"} <= names
    assert "" in {spec.description for spec in pool}
    assert max(len(spec.description) for spec in pool) > 50_000
    assert len(selector) == len(names) >= 15


@pytest.mark.parametrize(
    ("query", "tool"),
    [
        ("what time is it in Tokyo right now", "time.get_current_time"),
        ("convert 3pm in New York to London time", "time.convert_time"),
        ("show me the recent commit history", "git.git_log"),
        ("stage my changes and commit them", "git.git_commit"),
        ("查询北京天气", "odd.weather_cn"),
        ("明天去上海的火车票还有吗", "odd.train_tickets"),
        ("purge stale cache entries", "odd.purge_stale_cache_entries"),
        ("turn this markdown into html", "odd.markdown_to_html"),
        ("quarterly turnover histogram", "odd.build_report"),
        ("launch a rocket to orbit", "odd.launch_rocket"),
    ],
)
def test_a_request_finds_its_tool_among_the_servers_tools(
    selector: Selector, query: str, tool: str
) -> None:
    assert tool in top(selector, query)


def test_a_request_that_needs_two_servers_gets_a_tool_of_each(selector: Selector) -> None:
    request = (
        "What time is it in Berlin right now? Then show me the last commits of the "
        "repository. Finally, tell me the weather in Beijing today 天气."
    )
    found = top(selector, request, k=8)
    assert "time.get_current_time" in found
    assert "git.git_log" in found
