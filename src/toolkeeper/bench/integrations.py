"""What toolkeeper costs inside each agent framework: one run of one tool call and an answer,
driven by the framework's own offline test model, with the framework's native tool next to
the keeper's (memory and SQLite ledgers), in the same process and the same run.

`python -m toolkeeper.bench.integrations [--runs N] [--repeats N] [--json]`

A run's time is mostly the framework's own (its loop, its test model, its message types): the
figure to read is the keeper's CPU time per run over the native tool's (`cpu_ratio`). CPU time
barely moves when other processes compete for the machine; wall time (`median_us`) does.
A framework that is not installed is left out.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from ..core.values import Principal
from ..integrations import RunScope
from ..keeper import Keeper
from .stats import Summary, Timing, interleave_async, time_async_calls

__all__ = ["FRAMEWORKS", "main", "report", "run_integrations_bench"]

FRAMEWORKS = {
    "pydantic-ai": "pydantic_ai",
    "openai-agents": "agents",
    "langchain": "langchain_core",
}
"""The frameworks measured, by the module each needs."""

_PRINCIPAL = Principal(id="bench", grants=frozenset({"*"}))

Run = Callable[[], Awaitable[str]]
"""One framework run; returns what the model was handed as the tool's output."""


async def get_order(order_id: str) -> dict[str, Any]:
    """Look an order up by id.

    Args:
        order_id: The order's id.
    """
    return {"order_id": order_id, "total": 42}


def _keeper(ledger: str) -> Keeper:
    keeper = Keeper(ledger=ledger)
    keeper.tool(name="get_order", effect="read_only")(get_order)
    return keeper


def _pydantic_ai(keepers: dict[str, Keeper], ids: itertools.count[int]) -> dict[str, Run]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from ..integrations.pydantic_ai import KeeperToolset

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        returned = [p for p in last.parts if isinstance(p, ToolReturnPart)]
        if isinstance(last, ModelRequest) and returned:
            return ModelResponse(parts=[TextPart(str(returned[0].content))])
        call = ToolCallPart("get_order", {"order_id": "A1"}, tool_call_id=f"c{next(ids)}")
        return ModelResponse(parts=[call])

    native = Agent(FunctionModel(answer))
    native.tool_plain(get_order)
    runs: dict[str, Run] = {"native": lambda: _output(native.run("total?"))}
    for name, keeper in keepers.items():
        agent = Agent(FunctionModel(answer), toolsets=[KeeperToolset(keeper)])

        def run(agent: Any = agent) -> Awaitable[str]:
            scope = RunScope(principal=_PRINCIPAL, task_id=f"t{next(ids)}")
            return _output(agent.run("total?", deps=scope))

        runs[name] = run
    return runs


async def _output(result: Awaitable[Any]) -> str:
    return str((await result).output)


def _openai_agents(keepers: dict[str, Keeper], ids: itertools.count[int]) -> dict[str, Run]:
    from agents import Agent, RunConfig, Runner, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    from ..integrations.openai_agents import KeeperTools

    quiet = RunConfig(tracing_disabled=True)

    def runner(tools: list[Any], keeper: bool) -> Run:
        async def run() -> str:
            n = next(ids)
            call = function_call("get_order", {"order_id": "A1"}, call_id=f"c{n}")
            model = ScriptedModel([[call], [assistant_message("done")]])
            agent = Agent(name="bench", model=model, tools=tools)
            scope = RunScope(principal=_PRINCIPAL, task_id=f"t{n}") if keeper else None
            await Runner.run(agent, "total?", context=scope, run_config=quiet)
            last = model.calls[-1]
            outputs = [i for i in last.input if isinstance(i, dict) and "output" in i]
            return str(outputs[-1]["output"]) if outputs else ""

        return run

    runs = {"native": runner([function_tool(get_order)], keeper=False)}
    for name, keeper in keepers.items():
        runs[name] = runner(list(KeeperTools(keeper).tools), keeper=True)
    return runs


def _langchain(keepers: dict[str, Keeper], ids: itertools.count[int]) -> dict[str, Run]:
    from langchain_core.tools import BaseTool, StructuredTool

    from ..integrations.langchain import SCOPE_KEY, keeper_tools

    def runner(tool: BaseTool) -> Run:
        async def run() -> str:
            n = next(ids)
            call = {"name": "get_order", "args": {"order_id": "A1"}, "id": f"c{n}"}
            scope = RunScope(principal=_PRINCIPAL)
            config: Any = {"configurable": {"thread_id": f"t{n}", SCOPE_KEY: scope}}
            message = await tool.ainvoke({**call, "type": "tool_call"}, config)
            return str(message.content)

        return run

    runs = {"native": runner(StructuredTool.from_function(coroutine=get_order))}
    for name, keeper in keepers.items():
        [tool] = keeper_tools(keeper, _PRINCIPAL)
        runs[name] = runner(tool)
    return runs


_BUILDERS = {"pydantic-ai": _pydantic_ai, "openai-agents": _openai_agents, "langchain": _langchain}


@asynccontextmanager
async def _keepers(root: Path) -> AsyncIterator[dict[str, Keeper]]:
    async with AsyncExitStack() as stack:
        keepers = {
            "keeper memory": _keeper("memory://"),
            "keeper sqlite": _keeper(f"sqlite:///{root / 'bench.db'}"),
        }
        for keeper in keepers.values():
            await stack.enter_async_context(keeper)
        yield keepers


async def run_integrations_bench(
    *, runs: int = 30, repeats: int = 6, root: Path | None = None
) -> dict[str, dict[str, Summary]]:
    """Time `runs` framework runs per block, `repeats` interleaved blocks per case.

    Returns:
        For each installed framework, a `Summary` per case (`native`, `keeper memory`,
        `keeper sqlite`); a run whose tool output lacks the order's total counts as failed.
    """
    ids = itertools.count()
    with tempfile.TemporaryDirectory() as scratch:
        async with _keepers(root or Path(scratch)) as keepers:
            cases: dict[str, Run] = {}
            for framework, module in FRAMEWORKS.items():
                if importlib.util.find_spec(module) is not None:
                    for case, run in _BUILDERS[framework](keepers, ids).items():
                        cases[f"{framework}: {case}"] = run

            def block(run: Run) -> Callable[[int], Awaitable[Timing]]:
                async def timed(repeat: int) -> Timing:
                    for _ in range(3):  # (warm: first runs build caches)
                        await run()
                    return await time_async_calls(
                        lambda i: run(), runs, check=lambda i, out: "42" in out
                    )

                return timed

            timings = await interleave_async([(n, block(r)) for n, r in cases.items()], repeats)
    out: dict[str, dict[str, Summary]] = {}
    for name, timed in timings.items():
        framework, case = name.split(": ", 1)
        out.setdefault(framework, {})[case] = Summary.of(timed)
    return out


def report(results: dict[str, dict[str, Summary]]) -> dict[str, Any]:
    """A JSON-ready report: each case's summary and its CPU time over the native tool's."""
    out: dict[str, Any] = {}
    for framework, cases in results.items():
        native = cases["native"].cpu_us
        out[framework] = {
            case: {
                **summary.to_dict(),
                "cpu_ratio": round(summary.cpu_us / native, 3)
                if native and summary.cpu_us
                else None,
            }
            for case, summary in cases.items()
        }
    return out


def main(argv: list[str] | None = None) -> None:
    """`python -m toolkeeper.bench.integrations`: print the table, or JSON with `--json`."""
    parser = argparse.ArgumentParser(prog="python -m toolkeeper.bench.integrations")
    parser.add_argument("--runs", type=int, default=30, help="runs per block")
    parser.add_argument("--repeats", type=int, default=6, help="interleaved blocks per case")
    parser.add_argument("--json", action="store_true", help="print JSON")
    options = parser.parse_args(argv)
    found = report(anyio.run(_bench, options.runs, options.repeats))
    if options.json:
        print(json.dumps(found, indent=2))  # noqa: T201
        return
    print(f"{'framework':14} {'case':14} {'median us':>10} {'cpu us':>9} {'cpu ratio':>9}")  # noqa: T201
    for framework, cases in found.items():
        for case, row in cases.items():
            print(  # noqa: T201
                f"{framework:14} {case:14} {row['median_us']:10.0f} {row['cpu_us'] or 0:9.0f} "
                f"{row['cpu_ratio'] or 0:9.2f}"
            )


async def _bench(runs: int, repeats: int) -> dict[str, dict[str, Summary]]:
    return await run_integrations_bench(runs=runs, repeats=repeats)


if __name__ == "__main__":
    main()
