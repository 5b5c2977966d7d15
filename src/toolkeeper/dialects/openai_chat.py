"""OpenAI Chat Completions: `tools[].function`, `message.tool_calls`, `role: "tool"` messages.

Definitions are exported in strict mode when the schema allows it (every property required,
optional ones made nullable, closed objects, the keyword subset strict mode accepts); `parse`
maps a `null` the model had to send for an optional property back to "absent" when the specs
are passed in. A schema strict mode cannot express is exported with `strict: false`, and the
report says why. A tool whose source declared `strict` (`metadata["strict"]`, kept by the
OpenAI and Anthropic imports) keeps it: `strict: false` goes out as it came in, and a
`strict: true` that cannot be kept is reported.

`parse` reads a whole completion (its first choice), one choice or a list of them, the
assistant message (its `tool_calls`, or a legacy `function_call`, whose result goes back as a
`role: "function"` message), its tool calls, or one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core.values import ToolCall, ToolResult, ToolSpec
from ..schema.losses import Action, Converted, Loss, prefixed
from ..schema.walker import deref
from .base import Dialect
from .choice import ToolChoice
from .fence import fencing
from .nodes import is_nullable
from .results import result_text
from .roots import merged_root, object_root
from .schemas import FullSchema, OpenAISchema
from .strict import NotStrict, OpenAIStrictSchema, strict_size_problem
from .wire import declared_strict, first, function_fields, items_of, mapping, plain, strict_metadata

__all__ = ["OpenAIChat", "drop_absent_nulls", "openai_parameters"]

_LEGACY_PREFIX = "tk-openai-fn-"
"""How the ids `parse` makes up for legacy `function_call`s start: their results are answered
with a `role: "function"` message, as such a call has no id a `role: "tool"` one could name."""


def openai_parameters(
    spec: ToolSpec, *, strict_schema: bool
) -> tuple[Converted[dict[str, Any]], bool]:
    """The `parameters` schema of `spec` for OpenAI, and whether it goes out strict.

    Strict when the schema allows it and neither the spec (`declared_strict`) nor the dialect
    (`strict_schema`) says otherwise. Loss pointers are relative to the ToolSpec
    (`/input_schema/...`).
    """
    schema, merged = merged_root(spec.input_schema, "OpenAI")
    losses: list[Loss] = []
    strict = False
    declared = declared_strict(spec)
    if strict_schema and declared is not False:
        try:
            converted = OpenAIStrictSchema(schema).walk()
            too_big = strict_size_problem(converted.value)
            if too_big is not None:
                raise NotStrict("", too_big)
            strict = True
        except NotStrict as exc:
            converted = OpenAISchema(schema).walk()
            losses.append(exc.loss())
    else:
        converted = OpenAISchema(schema).walk()
        if declared:
            losses.append(
                Loss(
                    pointer="/metadata/strict",
                    keyword="strict",
                    action=Action.REWRITTEN,
                    reason="the tool declares strict: true; exported with strict: false, "
                    "as the dialect was made with strict_schema=False",
                )
            )
    rooted = object_root(converted, "OpenAI")
    losses[:0] = prefixed("/input_schema", (*merged, *rooted.losses))
    return Converted(value=rooted.value, losses=tuple(losses)), strict


def drop_absent_nulls(call: ToolCall, tools: Sequence[ToolSpec]) -> ToolCall:
    """`call` without the nulls strict mode made the model send for absent optional arguments.

    Strict mode makes every property required, an optional one nullable, at every depth: a
    null for a property the spec leaves optional and that does not accept null means "absent".
    Such nulls are dropped wherever they are (nested objects, array items, local `$ref`s); the
    JSON pointers dropped are listed in `metadata["absent_nulls"]`.
    """
    if not isinstance(call.arguments, Mapping):
        return call
    spec = next((t for t in tools if t.name == call.name), None)
    if spec is None:
        return call
    dropped: list[str] = []
    schema, _ = merged_root(spec.input_schema, "OpenAI")  # the root the model was shown
    arguments = _without_nulls(call.arguments, schema, schema, "", dropped, 0)
    if not dropped:
        return call
    metadata = dict(call.metadata) | {"absent_nulls": dropped}
    return ToolCall(
        call_id=call.call_id,
        name=call.name,
        arguments=arguments,
        task_id=call.task_id,
        principal=call.principal,
        metadata=metadata,
    )


def _branch(node: Any, root: Mapping[str, Any], key: str, value: Any = None) -> Any:
    """The schema a value follows: `node`, or the branch of its `anyOf` that has `key`
    (`properties` for an object, `items` for an array); of several objects, the one whose
    properties hold most of the value's names (the first on a tie)."""
    node = deref(node, root)
    if not isinstance(node, Mapping) or key in node:
        return node
    best, best_fit = node, -1
    for branch in node.get("anyOf") or node.get("oneOf") or ():
        branch = deref(branch, root)
        if not isinstance(branch, Mapping) or key not in branch:
            continue
        fit = 0
        if isinstance(value, Mapping) and isinstance(branch.get("properties"), Mapping):
            fit = sum(name in branch["properties"] for name in value)
        if fit > best_fit:
            best, best_fit = branch, fit
    return best


def _without_nulls(
    value: Any, node: Any, root: Mapping[str, Any], at: str, dropped: list[str], depth: int
) -> Any:
    if depth > 32:
        return value
    if isinstance(value, Mapping):
        node = _branch(node, root, "properties", value)
        props = node.get("properties") if isinstance(node, Mapping) else None
        if not isinstance(props, Mapping):
            return value
        required = set(node.get("required", ()))
        out: dict[str, Any] = {}
        for name, item in value.items():
            sub = props.get(name)
            where = f"{at}/{str(name).replace('~', '~0').replace('/', '~1')}"
            if sub is None:
                out[name] = item
            elif item is None and name not in required and not is_nullable(deref(sub, root)):
                dropped.append(where)
            else:
                out[name] = _without_nulls(item, sub, root, where, dropped, depth + 1)
        return out
    if isinstance(value, list):
        node = _branch(node, root, "items")
        items = node.get("items") if isinstance(node, Mapping) else None
        if isinstance(items, Mapping):
            return [
                _without_nulls(v, items, root, f"{at}/{i}", dropped, depth + 1)
                for i, v in enumerate(value)
            ]
    return value


class OpenAIChat(Dialect):
    """OpenAI Chat Completions."""

    name = "openai_chat"

    def __init__(self, *, strict_schema: bool = True) -> None:
        self.strict_schema = strict_schema
        """Export strict-mode definitions when the schema allows it (a tool declaring
        `strict: false` goes out non-strict all the same)."""

    def export_tool(self, spec: ToolSpec, *, strict: bool = False) -> Converted[dict[str, Any]]:
        losses: list[Loss] = []
        wire = self.export_name(spec, losses)
        self.report_fields(spec, losses)
        params, is_strict = openai_parameters(spec, strict_schema=self.strict_schema)
        function: dict[str, Any] = {"name": wire}
        if spec.description:
            function["description"] = spec.description
        function["parameters"] = params.value
        function["strict"] = is_strict
        return Converted(
            value={"type": "function", "function": function},
            losses=(*losses, *params.losses),
        ).check(strict)

    def wire_name(self, definition: Mapping[str, Any]) -> str:
        return str(definition["function"]["name"])

    def with_wire_name(self, definition: dict[str, Any], name: str) -> dict[str, Any]:
        return definition | {"function": definition["function"] | {"name": name}}

    def import_tool(
        self, definition: Mapping[str, Any] | Any, *, strict: bool = False
    ) -> Converted[ToolSpec]:
        data = plain(definition)
        wrapped = isinstance(data, Mapping) and isinstance(data.get("function"), Mapping)
        function = function_fields(data["function"] if wrapped else data, "OpenAI")
        schema = FullSchema(function.get("parameters") or {"type": "object"}).walk()
        rooted = object_root(schema, "OpenAI")
        spec = ToolSpec(
            name=str(function["name"]),
            description=str(function.get("description") or ""),
            input_schema=rooted.value,
            source=self.name,
            metadata=strict_metadata(function),
        )
        return Converted(value=spec, losses=prefixed("/parameters", rooted.losses)).check(strict)

    def parse(
        self, response: Any, *, tools: Sequence[ToolSpec] = (), turn: str | None = None
    ) -> list[ToolCall]:
        data = self.response_data(response)
        if isinstance(data, Mapping) and "choices" in data:
            turn = turn or self.response_turn(data.get("id"))  # the completion's id names the turn
            data = first(data["choices"])
        elif isinstance(data, list) and "message" in first(data):
            data = first(data)  # a completion's choices
        if isinstance(data, Mapping) and "message" in data:
            data = mapping(data["message"])  # one choice of a completion
        prefix = "tk-openai-"
        if isinstance(data, Mapping) and data.get("type") == "function" and "function" in data:
            raw_calls = [data]  # one tool call of a message
        elif isinstance(data, Mapping):
            raw_calls = items_of(data.get("tool_calls"))
            legacy = data.get("function_call")
            if not raw_calls and isinstance(legacy, Mapping):
                raw_calls = [{"id": None, "type": "function", "function": legacy}]
                prefix = _LEGACY_PREFIX
        else:
            raw_calls = items_of(data)
        calls = []
        for position, item in enumerate(raw_calls):
            if not isinstance(item, Mapping) or item.get("type", "function") != "function":
                continue
            function = mapping(item.get("function"))
            name = str(function.get("name") or "")
            arguments = function.get("arguments")
            call_id = item.get("id") or self.synthetic_id(prefix, position, name, turn)
            call = self.call(
                call_id=str(call_id), wire_name=name, raw_arguments=arguments, tools=tools
            )
            calls.append(drop_absent_nulls(call, tools))
        return calls

    def stream_piece(self, data: Mapping[str, Any]) -> str | None:
        return "a chat.completion.chunk" if data.get("object") == "chat.completion.chunk" else None

    def result_message(self, result: ToolResult, tools: Sequence[ToolSpec]) -> dict[str, Any]:
        text = result_text(result)
        fence = fencing(result, text)
        content: Any = text
        if fence is not None:
            content = [
                {"type": "text", "text": fence.notice},
                {"type": "text", "text": fence.wrap(text)},
            ]
        if result.call_id.startswith(_LEGACY_PREFIX):
            name = self.exported_name(result.tool, tools)
            if fence is not None:  # (a function message's content is one text)
                content = f"{fence.notice}\n{fence.wrap(text)}"
            return {"role": "function", "name": name, "content": content}
        return {"role": "tool", "tool_call_id": result.call_id, "content": content}

    def export_tool_choice(
        self, choice: ToolChoice, *, strict: bool = False, tools: Sequence[ToolSpec] = ()
    ) -> Converted[dict[str, Any]]:
        fields: dict[str, Any] = {}
        if choice.mode == "tool":
            name = self.choice_name(choice, tools)
            fields["tool_choice"] = {"type": "function", "function": {"name": name}}
        else:
            fields["tool_choice"] = choice.mode
        if choice.parallel is not None:
            fields["parallel_tool_calls"] = choice.parallel
        return Converted(value=fields).check(strict)

    def import_tool_choice(self, fields: Mapping[str, Any]) -> ToolChoice:
        value = fields.get("tool_choice", "auto")
        parallel = fields.get("parallel_tool_calls")
        if isinstance(value, Mapping):
            name = (value.get("function") or {}).get("name") or value.get("name")
            return ToolChoice(mode="tool", name=name, parallel=parallel)
        return ToolChoice(mode=value, parallel=parallel)
