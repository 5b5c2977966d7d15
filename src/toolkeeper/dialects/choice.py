"""Which tools a model may or must call: `ToolChoice`, as every dialect maps it.

A request's tool_choice and parallel-call switch in one value; each dialect exports it to its
vendor's fields and reads it back (`Dialect.export_tool_choice` / `import_tool_choice`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ChoiceMode", "ToolChoice"]


ChoiceMode = Literal["auto", "required", "none", "tool"]
"""How the model may use tools; see `ToolChoice.mode`."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolChoice:
    """Which tools the model may or must call, and whether it may call several at once."""

    mode: ChoiceMode = "auto"
    """`auto`: the model decides; `required`: at least one call; `none`: no call;
    `tool`: exactly the tool `name`."""
    name: str | None = None
    """The tool to call when `mode` is `tool`."""
    parallel: bool | None = None
    """Whether several calls may come in one response; None leaves the vendor's default."""

    def __post_init__(self) -> None:
        if self.mode == "tool" and not self.name:
            raise ValueError("ToolChoice(mode='tool') needs the name of the tool")
