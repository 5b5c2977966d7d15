"""OpenAI Responses: function tools, `function_call` output items, `function_call_output` items.

Schemas are converted exactly as for Chat Completions (strict mode when the schema allows it
and the tool does not declare `strict: false`);
the Responses API also carries an `output_schema` for a function's result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core.values import ToolCall, ToolResult, ToolSpec
from ..schema.losses import Converted, Loss, prefixed
from .base import Dialect
from .choice import ToolChoice
from .fence import fencing
from .openai_chat import drop_absent_nulls, openai_parameters
from .results import result_text
from .roots import object_root
from .schemas import FullSchema, full_schema
from .wire import function_fields, items_of, mapping, plain, strict_metadata

__all__ = ["OpenAIResponses"]


_WHOLE = frozenset({"response.completed", "response.output_item.done"})
"""Stream events that hold a whole response or a whole output item: parsed as what they hold."""


def _whole(data: Mapping[str, Any]) -> bool:
    kind = data.get("type")
    return isinstance(kind, str) and kind in _WHOLE


class OpenAIResponses(Dialect):
    """OpenAI Responses API."""

    name = "openai_responses"

    def __init__(self, *, strict_schema: bool = True) -> None:
        self.strict_schema = strict_schema
        """Export strict-mode definitions when the schema allows it (a tool declaring
        `strict: false` goes out non-strict all the same)."""

    def export_tool(self, spec: ToolSpec, *, strict: bool = False) -> Converted[dict[str, Any]]:
        losses: list[Loss] = []
        wire = self.export_name(spec, losses)
        self.report_fields(spec, losses)
        params, is_strict = openai_parameters(spec, strict_schema=self.strict_schema)
        tool: dict[str, Any] = {"type": "function", "name": wire}
        if spec.description:
            tool["description"] = spec.description
        tool["parameters"] = params.value
        tool["strict"] = is_strict
        out_losses: list[Loss] = []
        if spec.output_schema is not None:
            tool["output_schema"] = full_schema(spec.output_schema, "/output_schema", out_losses)
        return Converted(value=tool, losses=(*losses, *params.losses, *out_losses)).check(strict)

    def import_tool(
        self, definition: Mapping[str, Any] | Any, *, strict: bool = False
    ) -> Converted[ToolSpec]:
        data = function_fields(plain(definition), "OpenAI")
        rooted = object_root(
            FullSchema(data.get("parameters") or {"type": "object"}).walk(), "OpenAI"
        )
        losses = list(prefixed("/parameters", rooted.losses))
        output = None
        if isinstance(data.get("output_schema"), Mapping):
            output = full_schema(data["output_schema"], "/output_schema", losses)
        spec = ToolSpec(
            name=str(data["name"]),
            description=str(data.get("description") or ""),
            input_schema=rooted.value,
            output_schema=output,
            source=self.name,
            metadata=strict_metadata(data),
        )
        return Converted(value=spec, losses=tuple(losses)).check(strict)

    def parse(
        self, response: Any, *, tools: Sequence[ToolSpec] = (), turn: str | None = None
    ) -> list[ToolCall]:
        data = self.response_data(response)
        if isinstance(data, Mapping) and _whole(data):
            # Stream events holding a whole response (at the end) or a whole output item.
            data = mapping(data.get("response")) if "response" in data else [data.get("item")]
        if isinstance(data, Mapping) and "output" in data:
            turn = turn or self.response_turn(data.get("id"))  # the response's id names the turn
        if isinstance(data, Mapping) and data.get("type") == "function_call":
            data = [data]  # one item of a response's output
        items = items_of(data.get("output") if isinstance(data, Mapping) else data)
        calls = []
        for position, item in enumerate(items):
            if not isinstance(item, Mapping) or item.get("type") != "function_call":
                continue
            name = str(item.get("name") or "")
            arguments = item.get("arguments")
            call_id = item.get("call_id") or self.synthetic_id("tk-openai-", position, name, turn)
            extra = {"item_id": item["id"]} if item.get("id") else {}
            call = self.call(
                call_id=str(call_id),
                wire_name=name,
                raw_arguments=arguments,
                tools=tools,
                extra=extra,
            )
            calls.append(drop_absent_nulls(call, tools))
        return calls

    def stream_piece(self, data: Mapping[str, Any]) -> str | None:
        kind = data.get("type")
        if isinstance(kind, str) and kind.startswith("response.") and not _whole(data):
            return kind
        return None

    def result_message(self, result: ToolResult, tools: Sequence[ToolSpec]) -> dict[str, Any]:
        text = result_text(result)
        fence = fencing(result, text)
        output: Any = text
        if fence is not None:
            output = [
                {"type": "input_text", "text": fence.notice},
                {"type": "input_text", "text": fence.wrap(text)},
            ]
        return {"type": "function_call_output", "call_id": result.call_id, "output": output}

    def export_tool_choice(
        self, choice: ToolChoice, *, strict: bool = False, tools: Sequence[ToolSpec] = ()
    ) -> Converted[dict[str, Any]]:
        fields: dict[str, Any] = {}
        if choice.mode == "tool":
            fields["tool_choice"] = {
                "type": "function",
                "name": self.choice_name(choice, tools),
            }
        else:
            fields["tool_choice"] = choice.mode
        if choice.parallel is not None:
            fields["parallel_tool_calls"] = choice.parallel
        return Converted(value=fields).check(strict)

    def import_tool_choice(self, fields: Mapping[str, Any]) -> ToolChoice:
        value = fields.get("tool_choice", "auto")
        parallel = fields.get("parallel_tool_calls")
        if isinstance(value, Mapping):
            return ToolChoice(mode="tool", name=value.get("name"), parallel=parallel)
        return ToolChoice(mode=value, parallel=parallel)
