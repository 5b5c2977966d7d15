"""A result is cut to what a model may read (`format_result(max_chars=...)`), in every format,
with a note that says so; the `ToolResult` and its record stay whole."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolkeeper.core.errors import ErrorCode, ToolError
from toolkeeper.core.states import CallStatus
from toolkeeper.core.values import MCP_CONTENT, ToolResult
from toolkeeper.dialects import DIALECTS, MCP, get_dialect
from toolkeeper.dialects.base import RESULT_CHARS, result_text, shown_result

from .sdk import RESULT

ROWS = [{"id": i, "name": f"row {i}", "note": "x" * 40} for i in range(5000)]
BIG = ToolResult(call_id="call_big", tool="rows", status=CallStatus.SUCCEEDED, data=ROWS)
NOTE = "only the first"


def _shown_text(name: str, message: dict[str, Any]) -> str:
    """The text a model reads in one formatted result, in the place each format puts it."""
    if name == "gemini":
        output = message["functionResponse"]["response"]["output"]
        return output if isinstance(output, str) else json.dumps(output)
    if name == "mcp":
        return "".join(b["text"] for b in message["content"])
    return str(message["output" if name == "openai_responses" else "content"])


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_a_result_longer_than_the_limit_is_cut_with_a_note_in_every_format(name: str) -> None:
    whole = len(result_text(BIG))
    assert whole > RESULT_CHARS  # (the fixture must be over the default)
    message = get_dialect(name).format_result(BIG)
    RESULT[name](message)  # still what the vendor's SDK accepts
    text = _shown_text(name, message)
    assert text[:RESULT_CHARS] == result_text(BIG)[:RESULT_CHARS]
    assert NOTE in text[RESULT_CHARS:] and "call_big" in text and f"{whole:,}" in text
    assert len(text) < RESULT_CHARS + 300
    assert "structuredContent" not in message  # (MCP: no whole copy beside the cut text)
    assert BIG.data is ROWS and len(BIG.data) == 5000  # the result itself is whole


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_a_limit_of_none_sends_the_whole_result(name: str) -> None:
    message = get_dialect(name).format_result(BIG, max_chars=None)
    assert NOTE not in _shown_text(name, message)
    assert "row 4999" in _shown_text(name, message)


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_a_result_within_the_limit_is_formatted_as_it_is(name: str) -> None:
    small = ToolResult(call_id="c", tool="t", status=CallStatus.SUCCEEDED, data={"n": 1})
    dialect = get_dialect(name)
    assert dialect.format_result(small, max_chars=8) == dialect.format_result(small, max_chars=None)


def test_the_cut_keeps_the_first_characters_exactly() -> None:
    shown = shown_result(BIG, 1000)
    assert isinstance(shown.data, str)
    assert shown.data[:1000] == result_text(BIG)[:1000]
    assert shown.data[1000:].startswith("\n[toolkeeper: ")


def test_a_long_error_message_is_cut_and_its_details_left_out() -> None:
    error = ToolError.of(ErrorCode.TOOL_ERROR, "boom " * 50_000, details={"dump": "y" * 50_000})
    failed = ToolResult(call_id="c9", tool="t", status=CallStatus.FAILED, error=error)
    shown = shown_result(failed, 2000)
    assert shown.error is not None
    assert shown.error.code is ErrorCode.TOOL_ERROR
    assert shown.error.details == {}
    assert shown.error.message.startswith("boom boom") and NOTE in shown.error.message
    assert len(result_text(shown)) < 2500
    assert failed.error is not None and len(failed.error.message) == 250_000


def test_mcp_text_blocks_are_cut_and_other_blocks_kept() -> None:
    image = {"type": "image", "data": "aGVsbG8=" * 40_000, "mimeType": "image/png"}
    blocks = [
        {"type": "text", "text": "a" * 600},
        image,
        {"type": "text", "text": "b" * 600},
        {"type": "text", "text": "c" * 600},
    ]
    result = ToolResult(
        call_id="c2",
        tool="t",
        status=CallStatus.SUCCEEDED,
        data={"k": "v" * 2000},
        metadata={MCP_CONTENT: blocks},
    )
    out = MCP().format_result(result, max_chars=1000)
    RESULT["mcp"](out)
    content = out["content"]
    assert [b["type"] for b in content] == ["text", "image", "text", "text"]
    assert content[0]["text"] == "a" * 600
    assert content[1] == image  # not text: goes as it is
    assert content[2]["text"] == "b" * 400  # and the c block, past the limit, is left out
    assert NOTE in content[3]["text"] and "1,800" in content[3]["text"]
    assert "structuredContent" not in out  # the data was cut: no whole copy beside it
    assert result.metadata[MCP_CONTENT] is blocks


@pytest.mark.parametrize("bad", [0, -5])
def test_a_limit_below_one_is_refused(bad: int) -> None:
    with pytest.raises(ValueError, match="max_chars"):
        get_dialect("openai_chat").format_result(BIG, max_chars=bad)


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_a_cut_approval_request_still_names_its_approval(name: str) -> None:
    reason = "writes to production: " + "x" * 300  # (a rule's reason, quoted in the message)
    error = ToolError.of(
        ErrorCode.APPROVAL_REQUIRED,
        f"this call needs a person's approval ({reason}) and has not run. Ask the user to "
        "approve request apr-7 (toolkeeper approvals approve apr-7)",
        details={"approval_id": "apr-7", "reason": reason},
    )
    waiting = ToolResult(
        call_id="c7",
        tool="t",
        status=CallStatus.AWAITING_APPROVAL,
        error=error,
        approval_id="apr-7",
    )
    message = get_dialect(name).format_result(waiting, max_chars=200)
    RESULT[name](message)
    assert NOTE in json.dumps(message) and "apr-7" in json.dumps(message)


def test_the_note_of_an_error_long_by_its_details_counts_what_is_shown() -> None:
    error = ToolError.of(ErrorCode.TOOL_ERROR, "disk full", details={"log": "y" * 5000})
    failed = ToolResult(call_id="c3", tool="t", status=CallStatus.FAILED, error=error)
    shown = shown_result(failed, 1000)
    assert shown.error is not None and shown.error.message.startswith("disk full\n[")
    assert f"is {len(result_text(failed)):,} characters long" in shown.error.message
    assert "only the first 9 are shown" in shown.error.message
    assert "Ask for less" not in shown.error.message  # (no smaller piece of an error to ask for)


def test_mcp_embedded_text_resources_are_cut_as_text_blocks_are() -> None:
    resource = {"uri": "file:///log.txt", "mimeType": "text/plain", "text": "y" * 5000}
    blob = {"uri": "file:///a.bin", "blob": "aGVsbG8=" * 1000}
    blocks = [
        {"type": "resource", "resource": resource},
        {"type": "resource", "resource": blob},
        {"type": "text", "text": "t" * 50},
    ]
    result = ToolResult(
        call_id="c4",
        tool="t",
        status=CallStatus.SUCCEEDED,
        data="summary",
        metadata={MCP_CONTENT: blocks},
    )
    out = MCP().format_result(result, max_chars=1000)
    RESULT["mcp"](out)
    content = out["content"]
    assert content[0]["resource"] == {**resource, "text": "y" * 1000}
    assert content[1] == blocks[1]  # a binary resource goes as it is
    assert [b["type"] for b in content] == ["resource", "resource", "text"]  # t: past the limit
    assert NOTE in content[2]["text"] and "5,050" in content[2]["text"]
    assert resource["text"] == "y" * 5000
