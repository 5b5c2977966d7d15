"""`toolkeeper bench agent`: the agent loop's own time per step, next to pydantic-ai's `Agent`
and the OpenAI Agents SDK's `Runner`, and the bytes a paused run stores.

Every loop drives the same scripted model through the real `openai` client (Chat Completions)
against one local `VendorServer` in the same process: ten turns that each call the same Python
function `step(n)`, then an answer. A run's own time is its wall time minus the time the server
spent answering it (`VendorServer.busy_seconds`); per step is that over the ten steps. Runs of
the loops are interleaved (`bench.stats`), and the headline is the median of the per-repeat
medians. Targets (issue 26): toolkeeper on the memory ledger at most 1.0x pydantic-ai per step,
on SQLite at most 2x. What it is not: a model benchmark (the model is scripted) nor a network
one (loopback).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from .._console import render_table
from ..core.values import Principal
from ..testing.vendor_server import Reply, VendorServer
from .peers import version_of
from .stats import Summary, Timing, interleave_async

__all__ = ["bench_agent", "command"]

STEPS = 10
DEFAULT_RUNS = 5
DEFAULT_REPEATS = 5
_WHO = Principal(id="bench", grants=frozenset({"*"}))
_ANSWER = f"done after {STEPS} steps"


def step(n: int) -> int:
    """Add one to n."""
    return n + 1


def _reply(path: str, body: Any, *, last: str = "step") -> Reply:
    """The scripted model: `step` until ten results came back, then the answer (or, with
    `last`, a call of that tool as the eleventh turn)."""
    done = sum(1 for m in body["messages"] if m.get("role") == "tool")
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if done < STEPS or (done == STEPS and last != "step"):
        name, arguments = ("step", {"n": done}) if done < STEPS else (last, {"n": done})
        message["tool_calls"] = [
            {
                "id": f"call_{done}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ]
    else:
        message["content"] = _ANSWER
    return Reply(
        body={
            "id": f"chatcmpl-{done}",
            "object": "chat.completion",
            "created": 0,
            "model": "bench",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if "tool_calls" in message else "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    )


Run = Callable[[], Awaitable[bool]]


async def _toolkeeper(client: Any, ledger: str, stack: Any) -> Run:
    from ..agent import Agent, OpenAIChatModel
    from ..keeper import Keeper

    keeper = Keeper(ledger=ledger)
    keeper.add_function(step, effect="read_only")
    await stack.enter_async_context(keeper)
    agent = Agent(keeper, OpenAIChatModel("bench", client=client), max_steps=STEPS + 2)

    async def run() -> bool:
        result = await agent.run("go", principal=_WHO)
        return result.output == _ANSWER and sum(o.result.ok for o in result.calls) == STEPS

    return run


async def _pydantic_ai(client: Any) -> Run:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("bench", provider=OpenAIProvider(openai_client=client))
    agent = Agent(model, tools=[step])

    async def run() -> bool:
        result = await agent.run("go")
        return bool(result.output == _ANSWER)

    return run


async def _openai_agents(client: Any) -> Run:
    import agents
    from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel

    agents.set_tracing_disabled(True)  # no trace ever leaves this machine
    model = OpenAIChatCompletionsModel(model="bench", openai_client=client)
    agent = agents.Agent(name="bench", model=model, tools=[agents.function_tool(step)])

    async def run() -> bool:
        result = await agents.Runner.run(agent, "go", max_turns=STEPS + 2)
        return bool(result.final_output == _ANSWER)

    return run


async def _paused_bytes(client: Any) -> int:
    """The size of the state a run paused after ten steps stores (its eleventh call waits
    for approval)."""
    from ..agent import Agent, OpenAIChatModel
    from ..keeper import Keeper
    from ..ledger.memory import MemoryStore

    keeper = Keeper(ledger=MemoryStore())
    keeper.add_function(step, effect="read_only")

    def publish(n: int) -> int:
        """Publish n (needs approval)."""
        return n

    keeper.add_function(publish, effect="destructive")
    async with keeper:
        agent = Agent(keeper, OpenAIChatModel("bench", client=client), max_steps=STEPS + 2)
        result = await agent.run("go", principal=_WHO)
        record = await keeper.store.get_run(result.run_id)
    assert record is not None and record.status == "awaiting_approval"
    return len(record.state.encode())


async def _measure(runs: int, repeats: int, folder: str) -> dict[str, Any]:
    from contextlib import AsyncExitStack

    from openai import AsyncOpenAI

    with (
        VendorServer(_reply) as server,
        VendorServer(lambda path, body: _reply(path, body, last="publish")) as pausing,
    ):
        async with AsyncExitStack() as stack:
            client = AsyncOpenAI(base_url=f"{server.url}/v1", api_key="sk-bench", max_retries=0)
            await stack.enter_async_context(client)
            loops: dict[str, Run] = {
                "toolkeeper.memory": await _toolkeeper(client, "memory://", stack),
                "toolkeeper.sqlite": await _toolkeeper(
                    client, f"sqlite:///{folder}/agent.db", stack
                ),
                "pydantic_ai": await _pydantic_ai(client),
                "openai_agents": await _openai_agents(client),
            }
            for run in loops.values():  # warm up: imports, first connections, caches
                if not await run():
                    raise RuntimeError("a loop did not finish the scripted run")

            def block(run: Run) -> Callable[[int], Awaitable[Timing]]:
                async def timed(repeat: int) -> Timing:
                    seconds: list[float] = []
                    failures = 0
                    cpu = time.process_time()
                    for _ in range(runs):
                        served = server.busy_seconds
                        start = time.perf_counter()
                        ok = await run()
                        wall = time.perf_counter() - start
                        seconds.append((wall - (server.busy_seconds - served)) / STEPS)
                        failures += not ok
                    cpu = time.process_time() - cpu
                    return Timing(seconds=tuple(seconds), failures=failures, cpu_seconds=cpu)

                return timed

            timings = await interleave_async(
                [(name, block(run)) for name, run in loops.items()], repeats
            )
            pausing_client = AsyncOpenAI(
                base_url=f"{pausing.url}/v1", api_key="sk-bench", max_retries=0
            )
            await stack.enter_async_context(pausing_client)
            paused = await _paused_bytes(pausing_client)
    summaries = {name: Summary.of(t) for name, t in timings.items()}
    base = summaries["pydantic_ai"].median_us
    return {
        "steps": STEPS,
        "runs_per_repeat": runs,
        "repeats": repeats,
        "versions": {
            "pydantic-ai-slim": version_of("pydantic-ai-slim"),
            "openai-agents": version_of("openai-agents"),
            "openai": version_of("openai"),
        },
        "per_step": {name: s.to_dict() for name, s in summaries.items()},
        "ratio_to_pydantic_ai": {
            name: round(s.median_us / base, 2) for name, s in summaries.items()
        },
        "targets": {"toolkeeper.memory": 1.0, "toolkeeper.sqlite": 2.0},
        "paused_run_bytes": paused,
    }


def bench_agent(*, runs: int, repeats: int, folder: str | None = None) -> dict[str, Any]:
    """Measure (see the module docstring); the report as JSON data."""
    if folder is not None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        return anyio.run(_measure, runs, repeats, folder)
    with tempfile.TemporaryDirectory() as temporary:
        return anyio.run(_measure, runs, repeats, temporary)


def render_agent(report: dict[str, Any]) -> str:
    """The report as a table."""
    rows = []
    for name, summary in report["per_step"].items():
        target = report["targets"].get(name)
        ratio = report["ratio_to_pydantic_ai"][name]
        met = "" if target is None else ("met" if ratio <= target else "MISSED")
        rows.append(
            [
                name,
                f"{summary['median_us']:.0f}",
                f"{summary['p99_us']:.0f}",
                f"{ratio:.2f}x",
                f"<= {target}x {met}" if target is not None else "",
                summary["failures"],
            ]
        )
    table = render_table(
        ["loop", "median us/step", "p99 us/step", "vs pydantic-ai", "target", "failures"], rows
    )
    return (
        f"{report['steps']}-step scripted run through the openai client, server time taken "
        f"out ({report['repeats']} repeats x {report['runs_per_repeat']} runs)\n{table}\n"
        f"a run paused after {report['steps']} steps stores {report['paused_run_bytes']:,} bytes"
    )


def command(args: argparse.Namespace) -> int:
    """Run the benchmark `args` (parsed by `toolkeeper bench`) asks for; the exit status."""
    report = bench_agent(runs=args.runs, repeats=args.repeats)
    print(json.dumps(report, indent=2) if args.json else render_agent(report))  # noqa: T201
    return 0
