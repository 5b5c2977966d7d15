"""`toolkeeper chat`: talk to a model that uses the tools of a gateway configuration, every
call through the keeper; a call that needs approval is shown with its exact arguments and
waits for the person at the terminal.

```
toolkeeper chat --config toolkeeper.toml --model openai:gpt-4.1-mini [--base-url URL]
                [--principal ID] [--ledger URL]
```
The principal is `--principal`, else `[server] stdio_principal`, else the configuration's only
one. An empty line or end of input ends the chat.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

import anyio

from . import _HELP

if TYPE_CHECKING:
    from ..agent import Agent, RunResult

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add `chat`."""
    chat = subparsers.add_parser(
        "chat",
        help=_HELP["chat"],
        description="An interactive agent loop on the tools of a gateway configuration: the "
        "model's calls go through the keeper, and a call that needs approval is shown with "
        "its exact arguments for you to approve or deny.",
    )
    chat.add_argument("--config", required=True, help="the TOML configuration file")
    chat.add_argument(
        "--model", required=True, help="openai:NAME, openai-responses:NAME, anthropic:NAME..."
    )
    chat.add_argument("--base-url", help="the model API's base URL (an OpenAI-compatible server)")
    chat.add_argument("--principal", help="who the calls act for (a [principals] id)")
    chat.add_argument("--ledger", help="ledger URL (default: [server] ledger)")
    chat.add_argument("--instructions", help="the system prompt")
    chat.set_defaults(func=_chat)


def _chat(args: argparse.Namespace) -> int:
    from ..config import ConfigError, load_config
    from ..core.errors import ConfigurationError

    try:
        config = load_config(args.config)
        return anyio.run(_run, config, args, sys.stdin, sys.stdout)
    except (ConfigError, ConfigurationError, ImportError) as exc:
        print(f"toolkeeper chat: {exc}", file=sys.stderr)
        return 2


async def _run(config: Any, args: argparse.Namespace, given: TextIO, out: TextIO) -> int:
    from ..agent import Agent, resolve_model
    from ..server import build

    model = resolve_model(args.model, base_url=args.base_url)
    async with build(config, ledger=args.ledger) as deployment:
        principals = deployment.gateway.principals
        wanted = args.principal or config.server.stdio_principal
        if wanted is None and len(principals) == 1:
            wanted = next(iter(principals))
        if wanted not in principals:
            print("toolkeeper chat: name a principal (--principal ID)", file=sys.stderr)
            return 2
        principal = principals[wanted].principal
        agent = Agent(deployment.keeper, model, instructions=args.instructions)

        async def show(text: str) -> None:
            out.write(text)
            out.flush()

        history: list[Any] = []
        while True:
            out.write("you> ")
            out.flush()
            line = given.readline()
            if not line.strip():
                out.write("\n")
                return 0
            out.write("model> ")
            result = await agent.run(
                line.strip(), principal=principal, history=history, on_text=show
            )
            while result.status == "awaiting_approval":
                await _decide(agent, result, given, out)
                result = await agent.resume(result.run_id, on_text=show)
            if result.status != "completed" or not result.output:
                out.write(f"[run {result.status}: {result.error or 'no answer'}]")
            out.write("\n")
            history = list(result.messages)


async def _decide(agent: Agent, result: RunResult, given: TextIO, out: TextIO) -> None:
    """Ask the person at the terminal about each call the run waits for."""
    approvals = agent.keeper.approvals
    waiting = {o.result.approval_id: o.call for o in result.calls if o.result.approval_id}
    for approval_id in result.approvals:
        call = waiting.get(approval_id)
        request = await approvals.get(approval_id)
        if call is None or request is None:
            continue
        arguments = json.dumps(call.arguments, indent=2, ensure_ascii=False)
        out.write(
            f"\n[approval {approval_id}] {call.name} ({request.reason}) with arguments:\n"
            f"{arguments}\napprove? [y/N] "
        )
        out.flush()
        answer = given.readline().strip().lower()
        who = f"terminal:{getpass.getuser()}"
        if answer in ("y", "yes"):
            await approvals.approve(approval_id, by=who)
        else:
            await approvals.deny(approval_id, by=who, reason="denied at the terminal")
    out.write("model> ")
