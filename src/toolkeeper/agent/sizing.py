"""Results sized for the model's context, and `read_result`, the tool that reads on.

A result whose text is longer than the turn's share of the context reaches the model as its
head, its size and a reference (the call's id); `read_result(ref, offset, length)` reads any
piece of it back from the ledger. `read_result` is an ordinary read-only tool: it runs through
the keeper like every call, acts for the run's principal, and reads only the results of calls
of the same run made for the same principal. The ledger always keeps the whole result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import msgspec
import pydantic

from ..core.errors import ConfigurationError, ErrorCode
from ..core.signals import ToolFailed
from ..core.values import MCP_CONTENT, CallContext, ToolResult
from ..dialects.results import result_text

if TYPE_CHECKING:
    from ..keeper import Keeper

__all__ = ["READ_RESULT", "add_read_result", "max_result_chars", "sized"]

READ_RESULT = "read_result"
"""The name of the tool that reads a large result on."""

CHARS_PER_TOKEN = 4
"""A token is about four characters of English text or JSON."""

_MARK = "toolkeeper:read_result"
"""The tag of the tool `add_read_result` registers."""


def max_result_chars(context_window: int, share: float) -> int:
    """The most characters of one result a model is shown: `share` of its context."""
    return max(1_000, int(context_window * share * CHARS_PER_TOKEN))


def sized(result: ToolResult, max_chars: int) -> tuple[ToolResult, bool]:
    """`result` as the model is shown it, and whether it was cut to a head.

    Only a successful result's data is cut (errors are short, and MCP content blocks are cut
    by the dialect's own limit); the note names the call to read on from.
    """
    if result.error is not None or result.metadata.get(MCP_CONTENT):
        return result, False
    text = result_text(result)
    if len(text) <= max_chars:
        return result, False
    note = (
        f"\n[toolkeeper: this result is {len(text):,} characters long; the first "
        f"{max_chars:,} are shown. Read on with {READ_RESULT}(ref={result.call_id!r}, "
        f"offset={max_chars}, length=...).]"
    )
    return msgspec.structs.replace(result, data=text[:max_chars] + note), True


def add_read_result(keeper: Keeper, *, max_length: int) -> None:
    """Register `read_result` on `keeper` (once; a keeper that has it already keeps it).

    Raises:
        ConfigurationError: another tool of that name is registered.
    """
    existing = keeper.catalog.get(READ_RESULT)
    if existing is not None:
        if _MARK in existing.spec.tags:
            return
        raise ConfigurationError(
            f"the keeper has a tool named {READ_RESULT!r} already; the agent needs the name "
            "for reading large results on"
        )
    store = keeper.store

    async def read_result(
        ref: str,
        ctx: CallContext,
        offset: Annotated[int, pydantic.Field(ge=0)] = 0,
        length: Annotated[int, pydantic.Field(ge=1)] = max_length,
    ) -> str:
        """Read a piece of an earlier result of this run that was too long to show whole.

        Args:
            ref: The reference the shortened result named (a call id).
            offset: The first character to read.
            length: How many characters to read (at most the size a result is shown at).
        """
        record = await store.get_call(ctx.task_id, ref)
        who = ctx.principal
        if record is None or (record.principal_id, record.tenant) != (who.id, who.tenant):
            raise ToolFailed(f"no result {ref!r} in this run", code=ErrorCode.UNKNOWN_TOOL)
        if record.error is not None or record.result is None:
            raise ToolFailed(f"call {ref!r} has no data to read")
        whole = ToolResult(call_id=ref, tool=record.tool, status=record.status, data=record.result)
        text = result_text(whole)
        piece = text[offset : offset + min(length, max_length)]
        end = offset + len(piece)
        more = (
            f" [{len(text) - end:,} characters more from offset {end}]" if end < len(text) else ""
        )
        return piece + more

    keeper.add_function(
        read_result, name=READ_RESULT, effect="read_only", idempotent=True, tags=(_MARK,)
    )
