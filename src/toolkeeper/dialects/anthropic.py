"""Anthropic Messages: `tools[]` with `input_schema`, `tool_use` blocks, `tool_result` blocks.

Anthropic takes JSON Schema as it is, and carries example inputs (`input_examples`). Tool names
must match `^[a-zA-Z0-9_-]{1,64}$`; other names are rewritten and reported. A definition's
`strict` (strict tool use) is kept in `metadata["strict"]` on import; a tool that declares it
is exported with it (an OpenAI definition's `strict` is not carried):
`strict: true` only when the schema is within what strict tool use takes (objects closed,
unsupported keywords moved into descriptions; else `strict: false`, reported).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import msgspec

from ..core.values import ToolCall, ToolResult, ToolSpec
from ..schema.losses import Action, Converted, Loss, prefixed
from ..schema.validate import Violation, violations_text
from .base import Dialect
from .choice import ChoiceMode, ToolChoice
from .fence import fencing
from .keys import exported_pointer
from .results import result_text
from .roots import merged_root, object_root
from .schemas import FullSchema
from .strict import AnthropicStrictSchema, NotStrict
from .wire import declared_strict, function_fields, items_of, plain, strict_metadata

__all__ = ["Anthropic"]

_OPENAI_SOURCES = frozenset({"openai_chat", "openai_responses"})
"""Dialects whose `strict` (OpenAI strict mode) is not a request for strict tool use."""


_STREAM_EVENTS = frozenset(
    {
        "message_start",
        "message_delta",
        "message_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
    }
)
"""The events of a streamed message that `parse` refuses (a ping carries nothing at all)."""


class Anthropic(Dialect):
    """Anthropic Messages API."""

    name = "anthropic"
    # "input_schema.properties: Property keys should match pattern '^[a-zA-Z0-9_.-]{1,64}$'"
    property_pattern = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")

    def export_tool(self, spec: ToolSpec, *, strict: bool = False) -> Converted[dict[str, Any]]:
        losses: list[Loss] = []
        wire = self.export_name(spec, losses)
        self.report_fields(spec, losses, examples=True)
        merged, root_losses = merged_root(spec.input_schema, "Anthropic")
        losses.extend(prefixed("/input_schema", root_losses))
        # An OpenAI definition's `strict` is not carried: several SDKs set it on every tool,
        # and Anthropic compiles every strict schema of a request into one grammar, refusing
        # the whole request when it grows too large.
        declared = declared_strict(spec) if spec.source not in _OPENAI_SOURCES else None
        schema: Converted[dict[str, Any]] | None = None
        not_strict: tuple[Loss, ...] = ()
        if declared:
            try:
                schema = object_root(AnthropicStrictSchema(merged).walk(), "Anthropic")
            except NotStrict as exc:
                not_strict = (exc.loss(),)
        is_strict = schema is not None
        if schema is None:
            schema = object_root(FullSchema(merged).walk(), "Anthropic")
        tool: dict[str, Any] = {"name": wire}
        if spec.description:
            tool["description"] = spec.description
        tool["input_schema"] = self.exported_schema(schema.value, losses)
        if spec.examples:
            tool["input_examples"] = [self.exported_example(e, merged) for e in spec.examples]
        if declared is not None:
            tool["strict"] = is_strict
        return Converted(
            value=tool, losses=(*losses, *prefixed("/input_schema", schema.losses), *not_strict)
        ).check(strict)

    def import_tool(
        self, definition: Mapping[str, Any] | Any, *, strict: bool = False
    ) -> Converted[ToolSpec]:
        data = function_fields(plain(definition), "Anthropic", types=(None, "custom"))
        rooted = object_root(FullSchema(data.get("input_schema") or {}).walk(), "Anthropic")
        spec = ToolSpec(
            name=str(data["name"]),
            description=str(data.get("description") or ""),
            input_schema=rooted.value,
            examples=tuple(data.get("input_examples") or ()),
            source=self.name,
            metadata=strict_metadata(data),
        )
        return Converted(value=spec, losses=prefixed("/input_schema", rooted.losses)).check(strict)

    def parse(
        self, response: Any, *, tools: Sequence[ToolSpec] = (), turn: str | None = None
    ) -> list[ToolCall]:
        data = self.response_data(response)
        if isinstance(data, Mapping) and "content" in data:
            turn = turn or self.response_turn(data.get("id"))  # the message's id names the turn
        if isinstance(data, Mapping) and data.get("type") == "tool_use":
            data = [data]  # one block of a message's content
        blocks = items_of(data.get("content") if isinstance(data, Mapping) else data)
        calls = []
        for position, block in enumerate(blocks):
            if not isinstance(block, Mapping) or block.get("type") != "tool_use":
                continue
            name = str(block.get("name") or "")
            arguments = block.get("input")
            call_id = block.get("id") or self.synthetic_id("tk-anthropic-", position, name, turn)
            calls.append(
                self.call(
                    call_id=str(call_id), wire_name=name, raw_arguments=arguments, tools=tools
                )
            )
        return calls

    def stream_piece(self, data: Mapping[str, Any]) -> str | None:
        kind = data.get("type")
        return kind if isinstance(kind, str) and kind in _STREAM_EVENTS else None

    def result_message(self, result: ToolResult, tools: Sequence[ToolSpec]) -> dict[str, Any]:
        spec = next((t for t in tools if t.name == result.tool), None)
        if spec is not None and result.error is not None:
            result = self._exported_violations(result, spec)
        text = result_text(result)
        fence = fencing(result, text)
        content: Any = text
        if fence is not None:
            content = [
                {"type": "text", "text": fence.notice},
                {"type": "text", "text": fence.wrap(text)},
            ]
        return {
            "type": "tool_result",
            "tool_use_id": result.call_id,
            "content": content,
            "is_error": result.error is not None,
        }

    def _exported_violations(self, result: ToolResult, spec: ToolSpec) -> ToolResult:
        """A refusal of arguments naming properties as the model was shown them: each
        violation's pointer (and a missing property's name) in the exported names."""
        error = result.error
        pattern = self.property_pattern
        violations = (error.details or {}).get("violations") if error is not None else None
        if error is None or pattern is None or not isinstance(violations, list):
            return result
        schema, _ = merged_root(spec.input_schema, self.name)
        given = [Violation(**v) for v in violations if _is_violation(v)]
        if len(given) != len(violations):
            return result  # (not the executor's refusal of arguments)
        out: list[Violation] = []
        for v in given:
            pointer = exported_pointer(v.pointer, schema, pattern, self.max_property)
            message = v.message
            if v.keyword == "required" and pointer != v.pointer:
                own, wire = v.pointer.rsplit("/", 1)[-1], pointer.rsplit("/", 1)[-1]
                message = message.replace(_quoted(own), _quoted(wire))
            out.append(Violation(pointer=pointer, keyword=v.keyword, message=message))
        text = error.message
        if text == violations_text(given):  # the executor's wording: said anew
            text = violations_text(out)
        details = {**error.details, "violations": [v.to_dict() for v in out]}
        return msgspec.structs.replace(result, error=replace(error, message=text, details=details))

    def export_tool_choice(
        self, choice: ToolChoice, *, strict: bool = False, tools: Sequence[ToolSpec] = ()
    ) -> Converted[dict[str, Any]]:
        kinds = {"auto": "auto", "required": "any", "none": "none", "tool": "tool"}
        value: dict[str, Any] = {"type": kinds[choice.mode]}
        if choice.mode == "tool":
            value["name"] = self.choice_name(choice, tools)
        losses: tuple[Loss, ...] = ()
        if choice.parallel is not None:
            if choice.mode == "none":
                losses = (
                    (
                        Loss(
                            pointer="/parallel",
                            keyword="disable_parallel_tool_use",
                            action=Action.DROPPED,
                            reason="Anthropic takes no parallel switch with tool_choice none",
                        ),
                    )
                    if choice.parallel is False
                    else ()
                )
            else:
                value["disable_parallel_tool_use"] = not choice.parallel
        return Converted(value={"tool_choice": value}, losses=losses).check(strict)

    def import_tool_choice(self, fields: Mapping[str, Any]) -> ToolChoice:
        value = fields.get("tool_choice") or {"type": "auto"}
        modes: dict[str, ChoiceMode] = {
            "auto": "auto",
            "any": "required",
            "none": "none",
            "tool": "tool",
        }
        disable = value.get("disable_parallel_tool_use")
        return ToolChoice(
            mode=modes[value["type"]],
            name=value.get("name"),
            parallel=None if disable is None else not disable,
        )


def _quoted(name: str) -> str:
    return json.dumps(name.replace("~1", "/").replace("~0", "~"), ensure_ascii=False)


def _is_violation(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and set(value) == {"pointer", "keyword", "message"}
        and all(isinstance(v, str) for v in value.values())
    )
