"""MCP: `Tool` (inputSchema, outputSchema, annotations), `tools/call` params, `CallToolResult`.

Effect and idempotency go out as annotations (`readOnlyHint`, `destructiveHint`,
`idempotentHint`) and come back in as *hints*: an imported spec's effect is what the server
claims (absent hints mean what the MCP spec says: may be destructive; hinted both read-only
and destructive, it is read as destructive, and reported), the annotations as received are
kept in `metadata["annotations"]`, and local configuration overrides them with
`dataclasses.replace(spec, effect=..., idempotent=...)`. MCP has no tool_choice of its own;
`export_tool_choice` maps onto the sampling request's `toolChoice`.

`parse` reads `tools/call` requests (or their params) and, from sampling, a
`CreateMessageResult` or `SamplingMessage` with its `tool_use` blocks, or one such block.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.values import MCP_CONTENT, Effect, ToolCall, ToolResult, ToolSpec
from ..schema.canonical import json_safe
from ..schema.losses import Action, Converted, Loss, prefixed
from .base import Dialect
from .choice import ChoiceMode, ToolChoice
from .fence import FENCE_META_KEY, fencing
from .nodes import types_of
from .results import result_text
from .roots import object_root
from .schemas import FullSchema, full_schema
from .wire import function_fields, mapping, plain

__all__ = ["MCP", "object_schema"]


def object_schema(schema: Mapping[str, Any] | None) -> bool:
    """Whether `schema` describes objects only: what an MCP output schema must (it describes
    `structuredContent`)."""
    if schema is None:
        return False
    kinds = types_of(schema)
    return kinds == ["object"] or (not kinds and "properties" in schema)


class MCP(Dialect):
    """Model Context Protocol tools."""

    name = "mcp"
    name_pattern = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
    max_name = 128
    name_chars = "A-Za-z0-9_.-"

    def export_tool(self, spec: ToolSpec, *, strict: bool = False) -> Converted[dict[str, Any]]:
        losses: list[Loss] = []
        wire = self.export_name(spec, losses)
        self.report_fields(spec, losses)
        schema = object_root(FullSchema(spec.input_schema).walk(), "MCP")
        losses.extend(prefixed("/input_schema", schema.losses))
        tool: dict[str, Any] = {"name": wire}
        if spec.title:
            tool["title"] = spec.title
        if spec.description:
            tool["description"] = spec.description
        tool["inputSchema"] = schema.value
        # MCP's output schemas describe `structuredContent`, an object: any other result is
        # sent as text, which is what the model reads, so leaving its schema out loses it
        # nothing (and a client refuses a result without structuredContent from a tool that
        # declares one).
        if spec.output_schema is not None and object_schema(spec.output_schema):
            output = full_schema(spec.output_schema, "/output_schema", losses)
            # MCP (and clients that check it) want `type: object` at the root.
            tool["outputSchema"] = {"type": "object", **output}
        tool["annotations"] = {
            "readOnlyHint": spec.effect is Effect.READ_ONLY,
            "destructiveHint": spec.effect is Effect.DESTRUCTIVE,
            "idempotentHint": spec.idempotent,
        }
        return Converted(value=tool, losses=tuple(losses)).check(strict)

    def import_tool(
        self, definition: Mapping[str, Any] | Any, *, strict: bool = False
    ) -> Converted[ToolSpec]:
        data = function_fields(plain(definition), "MCP", types=(None,))
        rooted = object_root(FullSchema(data.get("inputSchema") or {}).walk(), "MCP")
        losses = list(prefixed("/inputSchema", rooted.losses))
        output = data.get("outputSchema")
        if isinstance(output, Mapping):
            output = full_schema(output, "/outputSchema", losses)
        annotations = data.get("annotations")
        hints = dict(annotations) if isinstance(annotations, Mapping) else {}
        effect = _effect(annotations, hints, losses)
        title = data.get("title") or hints.get("title")
        spec = ToolSpec(
            name=str(data["name"]),
            title=str(title) if title else None,
            description=str(data.get("description") or ""),
            input_schema=rooted.value,
            output_schema=output,
            effect=effect,
            idempotent=hints.get("idempotentHint") is True,
            source=self.name,
            metadata={"annotations": hints, "effect_from": "mcp-annotations"},
        )
        return Converted(value=spec, losses=tuple(losses)).check(strict)

    def parse(
        self, response: Any, *, tools: Sequence[ToolSpec] = (), turn: str | None = None
    ) -> list[ToolCall]:
        data = self.response_data(response)
        if isinstance(data, Mapping) and _sampled(data):
            content = data["content"]  # a sampling result or message: its tool_use blocks
            data = content if isinstance(content, list) else [content]
        requests = data if isinstance(data, list) else [data]
        calls = []
        for position, request in enumerate(requests):
            if not isinstance(request, Mapping):
                continue
            params: Mapping[str, Any]
            if request.get("type") == "tool_use":
                params = {"name": request.get("name"), "arguments": request.get("input")}
                request_id = request.get("id")
            elif "method" in request:
                if request.get("method") != "tools/call":
                    continue
                params = mapping(request.get("params"))
                request_id = request.get("id")
            elif "name" in request and "type" not in request:  # (a resource link has a name)
                params, request_id = request, None
            else:
                continue
            name = str(params.get("name") or "")
            arguments = params.get("arguments")
            call_id = (
                str(request_id)
                if request_id is not None
                else self.synthetic_id("tk-mcp-", position, name, turn)
            )
            calls.append(
                self.call(call_id=call_id, wire_name=name, raw_arguments=arguments, tools=tools)
            )
        return calls

    def result_message(self, result: ToolResult, tools: Sequence[ToolSpec]) -> dict[str, Any]:
        blocks = result.metadata.get(MCP_CONTENT) if result.error is None else None
        text = result_text(result)
        # An upstream's own content blocks (images, resources) go as they are.
        content = [dict(b) for b in blocks] if blocks else [{"type": "text", "text": text}]
        fence = fencing(result, text)
        if fence is not None:
            if blocks:  # (each block as it is, between the markers)
                content = [
                    {"type": "text", "text": f"{fence.notice}\n{fence.opening}"},
                    *content,
                    {"type": "text", "text": fence.closing},
                ]
            else:
                content = [
                    {"type": "text", "text": fence.notice},
                    {"type": "text", "text": fence.wrap(text)},
                ]
        out: dict[str, Any] = {"content": content}
        if result.error is None and isinstance(result.data, Mapping):
            out["structuredContent"] = json_safe(dict(result.data))
        out["isError"] = result.error is not None
        if fence is not None:
            out["_meta"] = {FENCE_META_KEY: fence.details()}
        return out

    def export_tool_choice(
        self, choice: ToolChoice, *, strict: bool = False, tools: Sequence[ToolSpec] = ()
    ) -> Converted[dict[str, Any]]:
        losses: list[Loss] = []
        mode: str = choice.mode
        if choice.mode == "tool":
            self.choice_name(choice, tools)  # (a tool not offered is refused, as elsewhere)
            mode = "required"
            losses.append(
                Loss(
                    pointer="/name",
                    keyword="name",
                    action=Action.REWRITTEN,
                    reason="MCP sampling toolChoice cannot name a tool; sent as required",
                )
            )
        if choice.parallel is False:
            losses.append(
                Loss(
                    pointer="/parallel",
                    keyword="parallel",
                    action=Action.DROPPED,
                    reason="MCP has no switch to turn parallel tool calls off",
                )
            )
        return Converted(value={"toolChoice": {"mode": mode}}, losses=tuple(losses)).check(strict)

    def import_tool_choice(self, fields: Mapping[str, Any]) -> ToolChoice:
        value = fields.get("toolChoice", fields.get("tool_choice")) or {}
        modes: dict[str, ChoiceMode] = {"auto": "auto", "required": "required", "none": "none"}
        return ToolChoice(mode=modes.get(str(value.get("mode") or "auto"), "auto"))


def _sampled(data: Mapping[str, Any]) -> bool:
    """Whether `data` is a sampling result or message (`CreateMessageResult`,
    `SamplingMessage`): content blocks, among them the `tool_use` blocks a model asked for."""
    return "content" in data and "role" in data and "method" not in data


def _drop(pointer: str, keyword: str, reason: str) -> Loss:
    return Loss(pointer=pointer, keyword=keyword, action=Action.DROPPED, reason=reason)


def _effect(annotations: Any, hints: Mapping[str, Any], losses: list[Loss]) -> Effect:
    """What a tool's hints claim it changes; where they are unclear, the reading that asks a
    person before it runs (the MCP default: may be destructive)."""
    if annotations is not None and not isinstance(annotations, Mapping):
        reason = "annotations must be an object; read as none (may be destructive)"
        losses.append(_drop("/annotations", "annotations", reason))
    if hints.get("readOnlyHint") is True and hints.get("destructiveHint") is True:
        # The MCP spec ignores destructiveHint beside readOnlyHint; a server that says
        # both may be wrong about either, and only one reading asks before it runs.
        reason = "the tool is hinted both read-only and destructive; read as destructive"
        losses.append(_drop("/annotations/readOnlyHint", "readOnlyHint", reason))
        return Effect.DESTRUCTIVE
    if hints.get("readOnlyHint") is True:
        return Effect.READ_ONLY
    if hints.get("destructiveHint") is False:
        return Effect.WRITE
    return Effect.DESTRUCTIVE
