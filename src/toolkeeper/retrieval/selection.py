"""What one retrieval turn returns: the ranked tools a principal may use, or an abstention.

What it is: frozen values (`Candidate`, `Selection`) and their exports — full definitions in a
model's dialect (direct mode) and the tokens they cost. What it is not: the ranking itself
(see `toolkeeper.retrieval.selector`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from ..core.values import ANONYMOUS, Principal, ToolCall, ToolSpec
from .tokens import count_tokens, tool_definition_json

if TYPE_CHECKING:
    from ..schema.losses import Converted

__all__ = ["Candidate", "Selection"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Candidate:
    """One ranked tool."""

    spec: ToolSpec
    """The tool."""
    score: float
    """The fused score (higher is better); comparable within one selection only."""
    keyword_rank: int | None = None
    """1-based rank from keyword search, None when it did not rank the tool."""
    dense_rank: int | None = None
    """1-based rank from dense search, None when it did not rank the tool."""
    similarity: float | None = None
    """Cosine similarity of the query and the tool's passage, when dense search ran."""

    @property
    def name(self) -> str:
        """The tool's name."""
        return self.spec.name


@dataclass(frozen=True, kw_only=True, slots=True)
class Selection:
    """The tools chosen for one turn, best first; empty when the selector abstained."""

    query: str
    """The composed retrieval query (its first 8,192 characters, the context included)."""
    candidates: tuple[Candidate, ...]
    """The ranked tools (never a tool the principal may not use)."""
    principal: Principal = ANONYMOUS
    """Who the selection was made for."""
    abstained: bool = False
    """True when no tool fits well enough: `candidates` is then empty."""
    confidence: float = 0.0
    """The probability that some candidate fits (abstention below the configured threshold)."""
    considered: int = 0
    """How many tools passed the hard filter and were ranked."""

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        """The chosen tools' specs, best first."""
        return tuple(c.spec for c in self.candidates)

    @property
    def names(self) -> tuple[str, ...]:
        """The chosen tools' names, best first."""
        return tuple(c.spec.name for c in self.candidates)

    def __len__(self) -> int:
        return len(self.candidates)

    def to(self, dialect: str) -> list[Mapping[str, Any]]:
        """The chosen tools' full definitions in a vendor format (direct mode).

        What the format could not say (a name rewritten, a keyword dropped) is in the report
        of `export(dialect)`; pass `specs` to the dialect's `parse` to map calls back.

        Args:
            dialect: A name known to `toolkeeper.dialects.get_dialect` (`anthropic`,
                `openai_chat`, `openai_responses`, `gemini`, `mcp`).
        """
        return list(self.export(dialect).value)

    def export(self, dialect: str) -> Converted[list[dict[str, Any]]]:
        """`to(dialect)` with its loss report (`losses`: JSON pointer, keyword, action, why)."""
        from ..dialects import get_dialect

        return get_dialect(dialect).export_tools(list(self.specs))

    def parse(
        self, dialect: str, response: Any, *, task_id: str | None = None, turn: str | None = None
    ) -> list[ToolCall]:
        """The calls a model's `response` proposes, on behalf of this selection's principal,
        their names mapped back against exactly the tools this selection exported.

        Names are mapped back by the list they were exported in (a rewritten name may stand
        for another tool in another list), and each call names the selection's principal (a
        parsed call names none, and a keeper refuses it unless it was given a default one):
        here, neither can go wrong.

        Args:
            dialect: The format `to` exported the tools in.
            response: What the model answered (see the dialect's `parse`).
            task_id: The task the calls belong to (their ids are unique within it).
            turn: Names the turn when the response carries no id of its own.
        """
        from ..dialects import get_dialect

        calls = get_dialect(dialect).parse(response, tools=list(self.specs), turn=turn)
        return [
            msgspec.structs.replace(call, principal=self.principal, task_id=task_id or call.task_id)
            for call in calls
        ]

    def tokens(self, encoding: str = "o200k_base") -> int:
        """Tokens the chosen definitions put into a model's context (JSON, `encoding`)."""
        return sum(count_tokens(tool_definition_json(spec), encoding) for spec in self.specs)
