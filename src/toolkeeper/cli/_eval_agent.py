"""`toolkeeper eval agent`: the design notes' agent metrics on a task file.

```
toolkeeper eval agent --tasks FILE --model openai:NAME|scripted:PATH [--tools FILE.py]
                      [--base-url URL] [--max-steps N] [--select-k K] [--ledger URL] [--json]
```
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._console import count, render_table

if TYPE_CHECKING:
    from ..agent import Model
    from ..eval.agent_metrics import AgentTask

__all__ = ["register_agent"]


def register_agent(sub: Any) -> None:
    """Add `eval agent` to the `eval` sub-commands."""
    agent = sub.add_parser(
        "agent",
        help="tool selection, argument validity, irrelevant calls, task success, unsafe "
        "exposure, schema tokens and latency of an agent on a task file",
        description="Run each task of a task file (docs/agent.md) through toolkeeper.agent."
        "Agent, every call through the keeper, and report the design notes' agent metrics.",
    )
    agent.add_argument("--tasks", required=True, help="the task file (.json or .jsonl)")
    agent.add_argument(
        "--model",
        required=True,
        help="openai:NAME, openai-responses:NAME, anthropic:NAME, gemini:NAME (the vendor "
        "client's environment: OPENAI_BASE_URL...), or scripted:PATH (turns per task, offline)",
    )
    agent.add_argument("--tools", help="the tools module (register(keeper)); overrides the file's")
    agent.add_argument("--base-url", help="the model API's base URL (an OpenAI-compatible server)")
    agent.add_argument("--max-steps", type=count(1), default=20, help="model turns per task")
    agent.add_argument("--select-k", type=count(1), help="offer the k best-ranked tools per turn")
    agent.add_argument("--instructions", help="the system prompt")
    agent.add_argument("--ledger", help="ledger URL (default: a memory ledger)")
    agent.add_argument("--json", action="store_true", help="print the JSON report")
    agent.set_defaults(func=_agent)


def _fail(message: str) -> int:
    print(f"toolkeeper eval agent: {message}", file=sys.stderr)
    return 2


def _agent(args: argparse.Namespace) -> int:
    import anyio

    from ..core.errors import ConfigurationError
    from ..eval.agent_eval import load_agent_tasks, load_script
    from ..eval.datasets import DatasetError

    try:
        tasks, tools = load_agent_tasks(args.tasks)
        if args.tools:
            tools = Path(args.tools)
        if tools is None:
            return _fail(f'{args.tasks} names no tools module ("tools"): pass --tools FILE.py')
        shared: Model | None = None
        script: Callable[[AgentTask], Model] | None = None
        if args.model.startswith("scripted:"):
            script = load_script(args.model.removeprefix("scripted:"))
        else:
            from ..agent import resolve_model

            shared = resolve_model(args.model, base_url=args.base_url)
        report = anyio.run(_run, args, tasks, tools, shared, script)
    except (DatasetError, ConfigurationError, ImportError) as exc:
        return _fail(str(exc))
    if args.json:
        json.dump(report, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    _print(report)
    return 0


async def _run(
    args: argparse.Namespace,
    tasks: Any,
    tools: Path,
    shared: Model | None,
    script: Callable[[AgentTask], Model] | None,
) -> dict[str, Any]:
    """Run the tasks with one model for all (`shared`, closed after) or one per task."""
    from ..eval.agent_eval import register_tools, run_agent_tasks
    from ..eval.agent_metrics import agent_report
    from ..keeper import Keeper
    from ..retrieval.tokens import count_tokens

    keeper = Keeper(ledger=args.ledger or "memory://")
    register_tools(keeper, tools)

    def model(task: AgentTask) -> Model:
        if script is not None:
            return script(task)
        assert shared is not None
        return shared

    try:
        async with keeper:
            runs = await run_agent_tasks(
                keeper,
                tasks,
                model,
                count_tokens=count_tokens,
                max_steps=args.max_steps,
                select_k=args.select_k,
                instructions=args.instructions,
            )
    finally:
        if shared is not None:
            await _close(shared)
    report = agent_report(runs)
    report["model"] = args.model
    return report


async def _close(model: Model) -> None:
    """Close the vendor client an adapter made from a model string (its connections)."""
    client = getattr(model, "client", None)
    aio = getattr(client, "aio", None)  # (google-genai's async side closes on its own)
    for close in (getattr(aio, "aclose", None), getattr(client, "close", None)):
        if close is not None:
            done = close()
            if inspect.isawaitable(done):
                await done


def _print(report: dict[str, Any]) -> None:
    print(f"{report['tasks']} tasks, {report['steps']} steps, {report['calls']} calls")
    rows = []
    for name, figures in report["metrics"].items():
        rate = figures["rate"]
        shown = "-" if rate is None else f"{rate:.3f}"
        of = f"{figures['numerator']}/{figures['denominator']}"
        rows.append([name.replace("_", " "), shown, of])
    tokens, latency = report["schema_tokens"], report["latency_ms"]
    rows.append(
        [
            "schema tokens / step",
            f"{tokens['per_step_mean']:.1f}",
            f"max {tokens['per_step_max']:.0f}",
        ]
    )
    rows.append(["schema tokens / task", f"{tokens['per_task_mean']:.1f}", "mean"])
    for what in ("task", "step"):
        rows.append(
            [
                f"{what} latency ms",
                f"{latency[what + '_p50']:.1f}",
                f"p99 {latency[what + '_p99']:.1f}",
            ]
        )
    print(render_table(["metric", "value", "of"], rows))
    runs = [
        [
            r["id"],
            r["status"],
            "yes" if r["success"] else "no",
            " ".join(r["calls"]) or "-",
            ", ".join(r["exposed"]) or "-",
            r["note"] or "",
        ]
        for r in report["runs"]
    ]
    print(render_table(["task", "status", "done", "calls", "exposed", "note"], runs))
