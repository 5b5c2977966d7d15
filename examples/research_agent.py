"""The research scenario through `toolkeeper.agent.Agent`: search → read → write a report →
publish it, the publication waiting for a person's approval.

The model is scripted (`ScriptedModel`) and served by a local server speaking the OpenAI Chat
Completions API (`VendorServer`); the agent talks to it through the real `openai` client, as
it would to any OpenAI-compatible server. The run pauses for approval, a person approves with
`toolkeeper approvals approve`, and the run resumes in a NEW process from the SQLite ledger:
the report is published exactly once, and resuming it again runs nothing.

    python examples/research_agent.py            # the whole story, in three processes
    python examples/research_agent.py resume RUN_ID --ledger FILE --base-url URL
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from openai import AsyncOpenAI

from toolkeeper import Keeper, Principal
from toolkeeper.agent import Agent, OpenAIChatModel, RunResult
from toolkeeper.testing import Reply, ScriptedModel, VendorServer, scripted_call

RESEARCHER = Principal(id="researcher", grants=frozenset({"web:read", "reports:*"}))

SCRIPT = ScriptedModel(
    [
        scripted_call("search_web", query="tidal energy 2026"),
        scripted_call("read_page", url="https://example.org/tides"),
        scripted_call(
            "write_report",
            title="Tidal energy in 2026",
            body="Tidal capacity grew; costs fell. Source: example.org/tides.",
        ),
        scripted_call("publish_report", report_id="report-1"),
        "Published 'Tidal energy in 2026' (report-1).",
    ]
)
"""What the model says, turn by turn (picked from the conversation, so any process resumes it
where the run stands)."""


def build(folder: Path, base_url: str) -> tuple[Keeper, Agent]:
    """The keeper with the four tools (on a SQLite ledger in `folder`) and the agent."""
    keeper = Keeper(ledger=f"sqlite:///{folder / 'ledger.db'}")
    published = folder / "published.jsonl"

    @keeper.tool(effect="read_only", permissions=["web:read"])
    def search_web(query: str) -> list[dict[str, str]]:
        """Search the web; the pages that match, best first."""
        return [{"url": "https://example.org/tides", "title": f"Results for {query}"}]

    @keeper.tool(effect="read_only", permissions=["web:read"])
    def read_page(url: str) -> str:
        """The text of a web page."""
        return f"{url}: tidal capacity grew 12% while costs fell."

    @keeper.tool(effect="write", idempotent=True, permissions=["reports:write"])
    def write_report(title: str, body: str) -> dict[str, str]:
        """Save a report draft; its id."""
        (folder / "report-1.json").write_text(json.dumps({"title": title, "body": body}))
        return {"report_id": "report-1"}

    @keeper.tool(effect="destructive", permissions=["reports:publish"])
    def publish_report(report_id: str) -> str:
        """Publish a report to the public site (cannot be taken back)."""
        with published.open("a") as file:
            file.write(json.dumps({"report_id": report_id}) + "\n")
        return f"{report_id} is live"

    client = AsyncOpenAI(base_url=base_url, api_key="sk-local", max_retries=0)
    agent = Agent(keeper, OpenAIChatModel("scripted", client=client), instructions="Research.")
    return keeper, agent


def serve() -> VendorServer:
    """The scripted model behind the Chat Completions API, on 127.0.0.1."""

    def answer(path: str, body: Any) -> Reply:
        return Reply(body=SCRIPT.completion(body["messages"]))

    return VendorServer(answer)


def summary(result: RunResult) -> dict[str, Any]:
    return {
        "run_id": result.run_id,
        "status": result.status.value,
        "output": result.output,
        "approvals": list(result.approvals),
        "calls": [[o.call.name, o.result.status.value] for o in result.calls],
    }


async def start(folder: Path, base_url: str) -> RunResult:
    keeper, agent = build(folder, base_url)
    async with keeper, agent.model.client:  # (the keeper and the openai client, closed after)
        return await agent.run("Research tidal energy and publish a report.", principal=RESEARCHER)


async def resume(folder: Path, base_url: str, run_id: str) -> RunResult:
    keeper, agent = build(folder, base_url)
    async with keeper, agent.model.client:
        return await agent.resume(run_id)


def in_new_process(folder: Path, base_url: str, run_id: str) -> dict[str, Any]:
    command = [sys.executable, __file__, "resume", run_id, "--folder", str(folder)]
    done = subprocess.run(
        [*command, "--base-url", base_url], capture_output=True, text=True, check=True
    )
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def story(folder: Path) -> dict[str, Any]:
    """Pause, approve as a person would, resume in a new process, and resume once more."""
    with serve() as server:
        base_url = f"{server.url}/v1"
        paused = anyio.run(start, folder, base_url)
        print("paused:", json.dumps(summary(paused)))
        approval = paused.approvals[0]
        subprocess.run(
            [
                Path(sys.executable).with_name("toolkeeper"),
                "approvals",
                "approve",
                approval,
                "--ledger",
                f"sqlite:///{folder / 'ledger.db'}",
                "--by",
                "editor",
            ],
            check=True,
            capture_output=True,
        )
        resumed = in_new_process(folder, base_url, paused.run_id)
        print("resumed in a new process:", json.dumps(resumed))
        again = in_new_process(folder, base_url, paused.run_id)
        print("resumed again:", json.dumps(again))
    published = (folder / "published.jsonl").read_text().splitlines()
    print(f"published {len(published)} time(s)")
    return {"paused": summary(paused), "resumed": resumed, "again": again, "published": published}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", nargs="?", default="story", choices=["story", "resume"])
    parser.add_argument("run_id", nargs="?")
    parser.add_argument("--folder", type=Path)
    parser.add_argument("--base-url")
    args = parser.parse_args()
    if args.action == "resume":
        result = anyio.run(resume, args.folder, args.base_url, args.run_id)
        print(json.dumps(summary(result)))
        return
    with tempfile.TemporaryDirectory() as folder:
        story(Path(folder))


if __name__ == "__main__":
    main()
