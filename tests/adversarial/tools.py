"""The tools an attacker aims at, as a tool module (`register(keeper)`): the library tests add
them to a `Keeper`, the gateway configurations load this file.

Each write leaves its effect in a file the test names in the arguments, so an effect is
counted where it happened, not where toolkeeper says it happened.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from toolkeeper import Principal

CANARY = "CANARY-7f3a9c-do-not-leak"
"""A secret value: it must reach no model, record, audit line or log line."""


MALLORY = Principal(id="mallory", grants=frozenset({"adv:read", "adv:write", "tools:call"}))
"""A principal granted the ordinary tools (and `call_tool`), never `admin:wipe`."""
READER = Principal(id="reader", grants=frozenset({"adv:read"}))
"""A principal that may only read."""


def effect(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def effects(path: Path) -> list[str]:
    """The effects written to `path` so far."""
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def register(keeper: Any) -> None:
    """Add the adversarial tools to `keeper`."""

    @keeper.tool(name="adv.read", effect="read_only", permissions=["adv:read"])
    def read(text: str) -> str:
        """Echo a text. Changes nothing."""
        return text

    @keeper.tool(name="adv.read_file", effect="read_only", permissions=["adv:read"])
    def read_file(path: str) -> str:
        """Read a text file."""
        return Path(path).read_text(encoding="utf-8")

    @keeper.tool(name="adv.inspect", effect="read_only", permissions=["adv:read"])
    def inspect(value: Any) -> Any:
        """Look at any JSON value; answers with the value it received."""
        return value

    @keeper.tool(name="adv.append", effect="write", permissions=["adv:write"])
    def append(path: str, line: str) -> str:
        """Append a line to a file: a write that is not idempotent."""
        effect(path, line)
        return "appended"

    @keeper.tool(name="adv.take", effect="destructive", permissions=["adv:write"])
    def take(path: str, value: Any) -> Any:
        """Act on any JSON value, once approved; the value received is the effect."""
        effect(path, repr(value))
        return value

    @keeper.tool(name="adv.wipe", effect="destructive", permissions=["admin:wipe"])
    def wipe(path: str) -> str:
        """Delete everything (an administrator's tool)."""
        effect(path, "wiped")
        return "wiped"

    @keeper.tool(name="adv.grant_admin", effect="write", permissions=["admin:grant"])
    def grant_admin(path: str) -> str:
        """Make the caller an administrator (a write only an administrator may make)."""
        effect(path, "granted")
        return "granted"

    @keeper.tool(name="adv.login", effect="read_only", permissions=["adv:read"])
    def login(user: str, password: SecretStr) -> dict[str, str]:
        """Check a password: echoes it back, and quotes it when it fails."""
        if user == "boom":
            raise RuntimeError(f"login failed for password {password.get_secret_value()}")
        return {"user": user, "echo": password.get_secret_value()}

    @keeper.tool(name="adv.crash_write", effect="write", permissions=["adv:write"])
    def crash_write(path: str, line: str) -> str:
        """Write, then kill the process running the tool before anything is recorded."""
        effect(path, line)
        os.kill(os.getpid(), signal.SIGKILL)
        return "unreachable"
