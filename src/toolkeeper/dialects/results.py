"""A result as a model reads it: its text (`result_text`), cut to a limit with a note
(`shown_result`), whatever the dialect that formats it.

The cut is what the model is shown, never what is recorded: the `ToolResult` the executor
returned and the ledger's record keep the whole result.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import msgspec

from ..core.values import MCP_CONTENT, ToolResult
from .wire import mapping

__all__ = ["RESULT_CHARS", "check_result_limit", "result_text", "shown_result"]

RESULT_CHARS = 100_000
"""The most characters of a result's text a model is shown by default (`format_result`):
about 25,000 tokens, the default cap Claude Code puts on an MCP tool's output."""


def result_text(result: ToolResult) -> str:
    """The text a model reads for a result: the data, or the error with code and retryable."""
    if result.error is not None:
        return json.dumps({"error": result.error.to_dict()}, ensure_ascii=False, default=str)
    if isinstance(result.data, str):
        return result.data
    return json.dumps(result.data, ensure_ascii=False, default=str)


def shown_result(result: ToolResult, max_chars: int | None) -> ToolResult:
    """`result` as a model is shown it: its text cut to `max_chars` characters, with a note
    that says so, when it is longer (None: never cut).

    What is cut: the data as the model reads it (`result_text`: a longer structure becomes
    text), an error's message (its details are left out, but for the approval id), and the
    text of an MCP upstream's content blocks (text blocks and embedded text resources; other
    blocks, images say, go as they are). The `ToolResult` the executor returned and the
    ledger's record keep the whole result; the note names the call.

    Raises:
        ValueError: `max_chars` is below 1.
    """
    max_chars = check_result_limit(max_chars, "max_chars")
    if max_chars is None:
        return result
    if result.error is not None:
        text = result_text(result)
        if len(text) <= max_chars:
            return result
        message = _cut(result.error.message, max_chars, len(text), result.call_id, data=False)
        # The approval to ask a person for stays, wherever the message was cut.
        kept = {"approval_id": result.approval_id} if result.approval_id else {}
        error = replace(result.error, message=message, details=kept)
        return msgspec.structs.replace(result, error=error)
    changes: dict[str, Any] = {}
    text = result_text(result)
    if len(text) > max_chars:
        changes["data"] = _cut(text, max_chars, len(text), result.call_id)
    blocks = result.metadata.get(MCP_CONTENT)
    if blocks:
        shown = _cut_blocks(blocks, max_chars, result.call_id)
        if shown is not None:
            changes["metadata"] = {**result.metadata, MCP_CONTENT: shown}
    return msgspec.structs.replace(result, **changes) if changes else result


def check_result_limit(max_chars: int | None, name: str) -> int | None:
    """`max_chars` as a limit of `shown_result` (None: none).

    Raises:
        ValueError: It is below 1 (`name` says which argument it came as).
    """
    if max_chars is not None and max_chars < 1:
        raise ValueError(f"{name} must be at least 1 (or None), not {max_chars}")
    return max_chars


def _cut(text: str, max_chars: int, total: int, call_id: str, *, data: bool = True) -> str:
    # (An error's message may be shorter than the limit when its details made it long.)
    note = _cut_note(min(max_chars, len(text)), total, call_id, data=data)
    return f"{text[:max_chars]}\n{note}"


def _cut_note(shown: int, total: int, call_id: str, *, data: bool = True) -> str:
    # Only data can be asked for in smaller pieces; an error is the error, however long.
    whole = "Ask for less (a filter, fewer items, a page) to see the rest; the whole"
    return (
        f"[toolkeeper: this result is {total:,} characters long; only the first "
        f"{shown:,} are shown. {whole if data else 'The whole'} result is kept in the ledger "
        f"(call {call_id}).]"
    )


def _cut_blocks(
    blocks: Sequence[Mapping[str, Any]], max_chars: int, call_id: str
) -> list[dict[str, Any]] | None:
    """MCP content blocks whose texts together hold at most `max_chars` characters, then a
    note; None when they already do. An embedded text resource's text counts as text."""
    texts = [_block_text(b) for b in blocks]
    total = sum(len(t) for t in texts if t is not None)
    if total <= max_chars:
        return None
    left = max_chars
    shown: list[dict[str, Any]] = []
    for block, text in zip(blocks, texts, strict=True):
        if text is None:
            shown.append(dict(block))
        elif left > 0:
            shown.append(_with_text(block, text[:left]))
            left -= min(left, len(text))
    shown.append({"type": "text", "text": _cut_note(max_chars, total, call_id)})
    return shown


def _block_text(block: Mapping[str, Any]) -> str | None:
    """The text a model reads in an MCP content block: a text block's, or an embedded text
    resource's; None for others (images, audio, links, binary resources)."""
    if block.get("type") == "text":
        text = block.get("text")
    elif block.get("type") == "resource":
        text = mapping(block.get("resource")).get("text")
    else:
        return None
    return text if isinstance(text, str) else None


def _with_text(block: Mapping[str, Any], text: str) -> dict[str, Any]:
    if block.get("type") == "resource":
        return {**block, "resource": {**block["resource"], "text": text}}
    return {**block, "text": text}
