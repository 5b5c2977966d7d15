"""Loss reports: what a conversion changed, where, and why (re-exported by `toolkeeper.dialects`).

Every conversion in `toolkeeper.dialects` returns a `Converted` value: the converted thing and
the list of `Loss` entries that say which part of the input did not survive unchanged. A
rewrite that keeps the meaning (`const: x` → `enum: [x]`, `definitions` → `$defs`, an inlined
`$ref`) is not a loss; a step that drops, weakens or moves meaning is, and must be reported.
`strict=True` on a conversion turns the first reported loss into a `LossError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Generic, TypeVar

from ..core.errors import ToolkeeperError

__all__ = ["Action", "Converted", "Loss", "LossError", "prefixed"]

T = TypeVar("T")


class Action(StrEnum):
    """What a conversion did to a part of its input that it could not carry over."""

    DROPPED = "dropped"
    """Removed; the target has no way to express it."""
    REWRITTEN = "rewritten"
    """Replaced by something close but not equivalent (a renamed tool, a widened type)."""
    MOVED_TO_DESCRIPTION = "moved_to_description"
    """No longer enforced; stated in the description so the model still reads it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Loss:
    """One part of the input that did not survive a conversion unchanged."""

    pointer: str
    """JSON pointer (RFC 6901) into the input: the schema node, field or definition concerned."""
    keyword: str
    """The JSON Schema keyword or the definition field concerned (`pattern`, `name`, ...)."""
    action: Action
    """What was done with it."""
    reason: str
    """Why: which limit of the target format forced it."""

    def to_dict(self) -> dict[str, str]:
        """The JSON form printed by the CLI."""
        return {
            "pointer": self.pointer,
            "keyword": self.keyword,
            "action": self.action.value,
            "reason": self.reason,
        }


class LossError(ToolkeeperError):
    """A conversion asked to be strict lost something; `losses` says what."""

    def __init__(self, losses: Sequence[Loss]) -> None:
        first = losses[0]
        more = f" (and {len(losses) - 1} more)" if len(losses) > 1 else ""
        super().__init__(
            f"lossy conversion: {first.keyword} at {first.pointer or '/'} "
            f"{first.action.value}: {first.reason}{more}"
        )
        self.losses = tuple(losses)


@dataclass(frozen=True, kw_only=True, slots=True)
class Converted(Generic[T]):
    """A conversion's result with the report of what it lost."""

    value: T
    """The converted value."""
    losses: tuple[Loss, ...] = field(default=())
    """Every lossy step, in the order it happened; empty when the conversion was lossless."""

    @property
    def lossless(self) -> bool:
        """True when nothing was lost."""
        return not self.losses

    def check(self, strict: bool) -> Converted[T]:
        """Return self, or raise `LossError` when `strict` and something was lost.

        Raises:
            LossError: `strict` is true and the report is not empty.
        """
        if strict and self.losses:
            raise LossError(self.losses)
        return self


def prefixed(prefix: str, losses: Iterable[Loss]) -> tuple[Loss, ...]:
    """`losses` with `prefix` (a JSON pointer) put in front of each pointer."""
    return tuple(
        Loss(
            pointer=prefix + loss.pointer,
            keyword=loss.keyword,
            action=loss.action,
            reason=loss.reason,
        )
        for loss in losses
    )
