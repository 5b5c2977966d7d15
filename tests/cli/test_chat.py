"""`toolkeeper chat`: a model behind the real openai client uses a configuration's tools; a
destructive call is shown with its exact arguments and runs only if the person says yes."""

from __future__ import annotations

import argparse
import io
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolkeeper.cli import main
from toolkeeper.cli.chat import _run
from toolkeeper.config import load_config
from toolkeeper.testing import Reply, ScriptedModel, VendorServer, scripted_call

TOOLS = '''
from pathlib import Path

def register(keeper):
    @keeper.tool(name="notes.publish", effect="destructive", permissions=["notes:write"])
    def publish(text: str) -> str:
        """Publish a note."""
        with open(Path(__file__).with_name("published.txt"), "a") as file:
            file.write(text + "\\n")
        return "published"
'''


def configure(folder: Path) -> Path:
    (folder / "tools.py").write_text(TOOLS)
    config = folder / "toolkeeper.toml"
    config.write_text(
        f"""
[server]
ledger = "sqlite:///{folder / "ledger.db"}"

[[tools]]
file = "tools.py"

[principals.alice]
token = "alice-token-0123456789"
grants = ["notes:*"]
"""
    )
    return config


def chat(folder: Path, typed: str, base_url: str) -> str:
    args = argparse.Namespace(
        model="openai:scripted",
        base_url=base_url,
        principal=None,
        ledger=None,
        instructions=None,
    )
    out = io.StringIO()
    code = anyio.run(_run, load_config(configure(folder)), args, io.StringIO(typed), out)
    assert code == 0
    return out.getvalue()


@pytest.mark.parametrize(("answer", "published"), [("y", ["hello world"]), ("n", [])])
def test_a_destructive_call_waits_for_the_person_at_the_terminal(
    tmp_path: Path, answer: str, published: list[str]
) -> None:
    model = ScriptedModel([scripted_call("notes_publish", text="hello world"), "All done."])

    def reply(path: str, body: Any) -> Reply:
        assert body["stream"] is True  # (the chat streams the model's text to the terminal)
        events = [(None, chunk) for chunk in model.chunks(body["messages"])]
        return Reply(events=[*events, (None, "[DONE]")])

    with VendorServer(reply) as server:
        shown = chat(tmp_path, f"publish it\n{answer}\n\n", f"{server.url}/v1")
    assert "notes.publish" in shown and '"text": "hello world"' in shown
    assert "All done." in shown
    file = tmp_path / "published.txt"
    assert (file.read_text().splitlines() if file.exists() else []) == published
    last = server.requests[-1].body["messages"][-1]
    assert last["role"] == "tool"
    assert ("APPROVAL_DENIED" in last["content"]) is (answer == "n")


def test_chat_without_a_known_model_provider_exits_2(tmp_path: Path) -> None:
    config = configure(tmp_path)
    assert main(["chat", "--config", str(config), "--model", "nope:x"]) == 2
