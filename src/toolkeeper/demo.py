"""The research-assistant scenario from the design notes, end to end on a fresh SQLite ledger.

A scripted "model" proposes calls the way a real one would (JSON argument strings, call ids);
toolkeeper checks, runs and records each: `search_papers` → `read_paper` → `write_report`
(only inside a sandbox directory) → `publish_report` (destructive: needs a person's approval,
bound to its exact arguments). Replays return the recorded result; nothing is published twice.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

from pydantic import Field

from ._console import render_table
from .core.values import CallContext, Principal, ToolCall, ToolResult
from .keeper import Keeper
from .ledger.base import CallRecord
from .policy.rules import path_inside

__all__ = ["PAPERS", "build_demo_keeper", "run_demo"]

PAPERS: dict[str, dict[str, str]] = {
    "toolformer": {
        "title": "Toolformer: Language Models Can Teach Themselves to Use Tools",
        "year": "2023",
        "abstract": "A model learns when to call APIs, which to call, and with what arguments, "
        "from a handful of demonstrations per API.",
    },
    "gorilla": {
        "title": "Gorilla: Large Language Model Connected with Massive APIs",
        "year": "2023",
        "abstract": "Retrieval-aware fine-tuning lets a model pick among thousands of APIs and "
        "reduces hallucinated calls.",
    },
    "react": {
        "title": "ReAct: Synergizing Reasoning and Acting in Language Models",
        "year": "2022",
        "abstract": "Interleaving reasoning traces with tool actions improves task success "
        "and interpretability.",
    },
}


def build_demo_keeper(workdir: Path, *, ledger: str | None = None) -> Keeper:
    """A keeper with the four demo tools; reports live in `workdir/sandbox`."""
    sandbox = workdir / "sandbox"
    published = workdir / "published"
    sandbox.mkdir(parents=True, exist_ok=True)
    published.mkdir(parents=True, exist_ok=True)
    keeper = Keeper(ledger=ledger or f"sqlite:///{workdir / 'toolkeeper.db'}")

    @keeper.tool(effect="read_only", permissions=["papers:read"], tags=["research"])
    async def search_papers(
        query: Annotated[str, Field(description="Words to look for in titles and abstracts.")],
        limit: int = 5,
    ) -> list[dict[str, str]]:
        """Search the paper index. Use it to find candidate papers; it changes nothing."""
        words = {w.lower() for w in query.split()}
        hits = [
            {"id": pid, "title": p["title"], "year": p["year"]}
            for pid, p in PAPERS.items()
            if words & set((p["title"] + " " + p["abstract"]).lower().replace(":", " ").split())
        ]
        return hits[:limit]

    @keeper.tool(effect="read_only", permissions=["papers:read"], tags=["research"])
    async def read_paper(paper_id: str) -> dict[str, str]:
        """Read one paper's title and abstract.

        Args:
            paper_id: The id returned by search_papers.
        """
        from .core.signals import ToolFailed

        if paper_id not in PAPERS:
            raise ToolFailed(f"no paper {paper_id!r}; use search_papers to find ids")
        return PAPERS[paper_id]

    @keeper.tool(
        effect="write",
        idempotent=True,
        permissions=["reports:write"],
        rules=[path_inside("path", sandbox)],
        writes=lambda args: str(args.get("path")),
    )
    def write_report(path: str, content: str) -> dict[str, object]:
        """Write a report file inside the sandbox (overwrites; the same call twice is harmless).

        Args:
            path: Absolute file path inside the sandbox directory.
            content: Markdown text.
        """
        target = Path(path).resolve()
        target.write_text(content, encoding="utf-8")
        return {"path": str(target.relative_to(sandbox.resolve())), "bytes": len(content)}

    @keeper.tool(effect="destructive", permissions=["reports:publish"])
    def publish_report(path: str, channel: str = "blog", *, ctx: CallContext) -> dict[str, str]:
        """Publish a report to readers. Cannot be taken back.

        Args:
            path: Absolute report path inside the sandbox.
            channel: Where to publish.
        """
        source = Path(path).resolve()
        out = published / f"{channel}-{source.name}"
        out.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
        with (published / "log.txt").open("a", encoding="utf-8") as log:
            log.write(f"{ctx.idempotency_key} {out.name}\n")
        return {"url": f"https://{channel}.example/{source.stem}", "key": ctx.idempotency_key}

    return keeper


def _line(result: ToolResult) -> str:
    if result.ok:
        data = json.dumps(result.data, ensure_ascii=False)
        if len(data) > 90:
            data = data[:89] + "…"
        tag = " (replayed from the ledger)" if result.replayed else ""
        return f"   → {result.status}{tag}: {data}"
    assert result.error is not None
    return f"   → {result.status} {result.error.code}: {result.error.message}"


def _ledger_table(records: list[CallRecord]) -> str:
    rows = [
        [
            r.call_id,
            r.tool,
            r.status.value,
            r.attempt,
            (r.error or {}).get("code", ""),
            r.approval_id or "",
            " → ".join(s.value for s, _ in r.history),
        ]
        for r in records
    ]
    headers = ["CALL", "TOOL", "STATUS", "ATTEMPTS", "CODE", "APPROVAL", "HISTORY"]
    return render_table(headers, rows)


async def run_demo(
    workdir: Path | None = None, *, out: Callable[[str], None] = print
) -> list[ToolResult]:
    """Play the scenario, printing each step; returns every result in order."""
    tmp = None
    if workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="toolkeeper-demo-")
        workdir = Path(tmp.name)
    agent = Principal(
        id="research-agent",
        grants=frozenset({"papers:read", "reports:write", "reports:publish"}),
    )
    results: list[ToolResult] = []
    keeper = build_demo_keeper(workdir)
    out(f"toolkeeper demo — ledger: {workdir / 'toolkeeper.db'}")

    async def propose(step: str, call_id: str, name: str, arguments: str) -> ToolResult:
        out(f"\n{step}\n   model proposes {name}({arguments})  [call {call_id}]")
        call = ToolCall(
            call_id=call_id, name=name, arguments=arguments, task_id="demo", principal=agent
        )
        result = await keeper.execute(call)
        results.append(result)
        out(_line(result))
        return result

    try:
        async with keeper:
            await propose("1. find papers", "call_1", "search_papers", '{"query": "tool APIs"}')
            await propose("2. read one", "call_2", "read_paper", '{"paper_id": "gorilla"}')
            sandbox = (workdir / "sandbox").resolve()
            path = str(sandbox / "report.md")
            report = json.dumps(
                {"path": path, "content": "# Tool use\nGorilla picks among APIs.\n"}
            )
            await propose("3. write the report in the sandbox", "call_3", "write_report", report)
            await propose(
                "4. try to write outside the sandbox (a business rule refuses)",
                "call_4",
                "write_report",
                json.dumps(
                    {"path": f"{sandbox}/../../etc/cron.d/job", "content": "* * * * * evil"}
                ),
            )
            publish = json.dumps({"path": path})
            waiting = await propose(
                "5. publish (destructive: needs approval)", "call_5", "publish_report", publish
            )
            assert waiting.approval_id is not None
            [pending] = await keeper.approvals.pending()
            out(
                f"\n6. a person reviews {pending.id}: {pending.tool} "
                f"{json.dumps(dict(pending.arguments))} (digest {pending.digest[:12]}…)"
            )
            await keeper.approvals.approve(pending.id, by="alice", note="looks good")
            out("   → approved by alice")
            await propose("7. the model retries the same call", "call_5", "publish_report", publish)
            await propose(
                "8. the same call replayed (a retry, a restart)",
                "call_5",
                "publish_report",
                publish,
            )
            await propose(
                "9. the approved call id with changed arguments",
                "call_5",
                "publish_report",
                json.dumps({"path": path, "channel": "newsletter"}),
            )
            await propose(
                "10. changed arguments under a new call id need their own approval",
                "call_6",
                "publish_report",
                json.dumps({"path": path, "channel": "newsletter"}),
            )
            log = (workdir / "published" / "log.txt").read_text(encoding="utf-8").splitlines()
            out(f"\npublished {len(log)} time(s): {', '.join(x.split()[1] for x in log)}")
            out("\nthe ledger:")
            out(_ledger_table(await keeper.store.list_calls(task_id="demo")))
            if tmp is not None:
                out(
                    "\nThis ledger was in a temporary folder, removed now. To approve call_6 "
                    "from the command line, run `toolkeeper demo --dir DIR`, then "
                    "`toolkeeper approvals list --ledger DIR/toolkeeper.db`."
                )
    finally:
        if tmp is not None:
            tmp.cleanup()
    return results
