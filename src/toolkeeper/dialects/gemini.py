"""Gemini: `functionDeclarations`, `functionCall` parts, `functionResponse` parts.

Parameters are exported as `parametersJsonSchema` in the subset Gemini accepts (`$ref`/`$defs`,
anyOf, prefixItems, minimum/maximum, additionalProperties, ...); other keywords are moved into
the description and reported. Imports read `parametersJsonSchema` or the older OpenAPI-style
`parameters` (`type: STRING`, `nullable`). Gemini may return calls without ids: `parse` then
synthesizes stable ones from the call's position, name and arguments, and `format_result`
leaves them out of the `functionResponse`, as Gemini matches such responses by name and order.
`parse` reads a whole response (its first candidate), one candidate or a list of them, a
`Content`, its parts, or one part or function call.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.values import ToolCall, ToolResult, ToolSpec
from ..schema.canonical import json_safe
from ..schema.losses import Action, Converted, Loss, prefixed
from .base import Dialect
from .choice import ChoiceMode, ToolChoice
from .fence import fencing
from .nodes import nullable
from .results import result_text
from .roots import object_root
from .schemas import FullSchema, GeminiSchema, full_schema
from .wire import first, function_fields, items_of, plain

__all__ = ["SYNTHETIC_ID_PREFIX", "Gemini", "from_openapi_schema"]

SYNTHETIC_ID_PREFIX = "tk-gemini-"
"""Call ids `parse` made up start with this."""

_MODES: dict[str, str] = {"auto": "AUTO", "required": "ANY", "none": "NONE", "tool": "ANY"}


_PIECE_FIELDS = ("partialArgs", "partial_args", "willContinue", "will_continue")
"""What marks a function call streamed in pieces: its arguments are still arriving."""
_CALL_FIELDS = frozenset({"id", "name", "args", *_PIECE_FIELDS})
"""The fields of a `FunctionCall` (its wire and Python names)."""


def _call_of(part: Any) -> Mapping[str, Any] | None:
    """The function call `part` holds; `part` itself when it is a function call (the SDK's
    `response.function_calls` lists them without their parts); None for other parts."""
    if not isinstance(part, Mapping):
        return None
    fc = part.get("functionCall", part.get("function_call"))
    if isinstance(fc, Mapping):
        return fc
    a_call = isinstance(part.get("name"), str) or any(part.get(k) for k in _PIECE_FIELDS)
    if a_call and set(part) <= _CALL_FIELDS:
        return part
    return None


_SCHEMA_FIELDS: Mapping[str, str] = {
    "additional_properties": "additionalProperties",
    "any_of": "anyOf",
    "max_items": "maxItems",
    "max_length": "maxLength",
    "max_properties": "maxProperties",
    "min_items": "minItems",
    "min_length": "minLength",
    "min_properties": "minProperties",
    "property_ordering": "propertyOrdering",
}
"""google-genai's Python names of `Schema` fields, which it takes as their wire names."""
_COUNTS = frozenset(
    {"maxItems", "maxLength", "maxProperties", "minItems", "minLength", "minProperties"}
)
"""`Schema` fields that are int64, which the REST API writes as text (`"5"`)."""


def from_openapi_schema(schema: Any) -> Any:
    """JSON Schema from Gemini's OpenAPI-style `Schema` (upper-case types, `nullable`, `ref`
    into the root `defs`), its fields read as google-genai reads them (by their Python names
    too, and a count given as text as the number)."""
    if isinstance(schema, list):
        return [from_openapi_schema(item) for item in schema]
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, Any] = {}
    for field, value in schema.items():
        key = _SCHEMA_FIELDS.get(field) or field
        if key in _COUNTS and isinstance(value, str):
            out[key] = _count(value)
        elif key == "type" and isinstance(value, str):
            if value.upper() != "TYPE_UNSPECIFIED":  # (no type: any value)
                out["type"] = value.lower()
        elif key == "ref" and isinstance(value, str):
            # Gemini's `ref` points into the root `defs` (`#/defs/Pet`), which become `$defs`.
            out["$ref"] = (
                "#/$defs/" + value[len("#/defs/") :] if value.startswith("#/defs/") else value
            )
        elif key == "nullable":
            continue
        elif key == "example":
            out["examples"] = [value]
        elif key in ("properties", "$defs", "defs"):
            out["$defs" if key == "defs" else key] = {
                name: from_openapi_schema(sub) for name, sub in value.items()
            }
        elif key in ("items", "anyOf", "prefixItems", "additionalProperties"):
            out[key] = from_openapi_schema(value)
        else:
            out[key] = value
    if schema.get("nullable") is True:
        return nullable(out)  # with its enum, its anyOf branches: null is one more value
    return out


def _count(text: str) -> int | str:
    """An int64 field as the REST API writes it (`"5"`): the number, or the text when it is
    none (then refused as a schema as it is)."""
    try:
        return int(text)
    except ValueError:
        return text


class Gemini(Dialect):
    """Gemini API (`google-genai`) function calling."""

    name = "gemini"
    # google-genai's FunctionDeclaration.name: a letter or an underscore first, then letters,
    # digits, underscores, dots, colons and dashes, at most 128 characters.
    name_pattern = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$")
    max_name = 128
    name_chars = "A-Za-z0-9_.:-"

    def export_tool(self, spec: ToolSpec, *, strict: bool = False) -> Converted[dict[str, Any]]:
        losses: list[Loss] = []
        wire = self.export_name(spec, losses)
        self.report_fields(spec, losses)
        params = object_root(GeminiSchema(spec.input_schema).walk(), "Gemini")
        declaration: dict[str, Any] = {"name": wire}
        if spec.description:
            declaration["description"] = spec.description
        declaration["parametersJsonSchema"] = params.value
        losses.extend(prefixed("/input_schema", params.losses))
        if spec.output_schema is not None:
            output = GeminiSchema(spec.output_schema).walk()
            declaration["responseJsonSchema"] = output.value
            losses.extend(prefixed("/output_schema", output.losses))
        return Converted(value=declaration, losses=tuple(losses)).check(strict)

    def import_tool(
        self, definition: Mapping[str, Any] | Any, *, strict: bool = False
    ) -> Converted[ToolSpec]:
        data = function_fields(plain(definition), "Gemini", types=(None,))
        params = data.get("parametersJsonSchema", data.get("parameters_json_schema"))
        if params is None and data.get("parameters") is not None:
            params = from_openapi_schema(data["parameters"])
        rooted = object_root(FullSchema(params or {}).walk(), "Gemini")
        losses = list(prefixed("/parameters", rooted.losses))
        output = data.get("responseJsonSchema", data.get("response_json_schema"))
        if output is None and data.get("response") is not None:
            output = from_openapi_schema(data["response"])
        if output is not None:
            output = full_schema(output, "/response", losses)
        spec = ToolSpec(
            name=str(data["name"]),
            description=str(data.get("description") or ""),
            input_schema=rooted.value,
            output_schema=output,
            source=self.name,
        )
        return Converted(value=spec, losses=tuple(losses)).check(strict)

    def parse(
        self, response: Any, *, tools: Sequence[ToolSpec] = (), turn: str | None = None
    ) -> list[ToolCall]:
        data = self.response_data(response)
        if isinstance(data, Mapping) and "candidates" in data:
            # Gemini names no calls: its response id tells one turn's calls from another's.
            turn = turn or self.response_turn(data.get("responseId") or data.get("response_id"))
            data = first(data["candidates"])
        elif isinstance(data, list) and "content" in first(data):
            data = first(data)  # a response's candidates
        if isinstance(data, Mapping) and isinstance(data.get("content"), Mapping):
            data = data["content"]  # one candidate of a response
        if isinstance(data, Mapping) and _call_of(data) is not None:
            data = [data]  # one part of a response, or one function call
        parts = items_of(data.get("parts") if isinstance(data, Mapping) else data)
        calls = []
        for position, part in enumerate(parts):
            fc = _call_of(part)
            if fc is None:
                continue
            if any(fc.get(key) for key in _PIECE_FIELDS):
                # Run as it stands, a call whose arguments are still on their way would run
                # with none (or fail as a nameless one).
                raise self.piece_error(
                    "a function call streamed in pieces: Vertex AI's partialArgs / willContinue"
                )
            name = str(fc.get("name") or "")
            arguments = fc.get("args")
            call_id = fc.get("id") or self.synthetic_id(SYNTHETIC_ID_PREFIX, position, name, turn)
            calls.append(
                self.call(
                    call_id=str(call_id),
                    wire_name=name,
                    raw_arguments=arguments,
                    tools=tools,
                    extra={"synthetic_id": not fc.get("id")},
                )
            )
        return calls

    def result_message(self, result: ToolResult, tools: Sequence[ToolSpec]) -> dict[str, Any]:
        if result.error is not None:
            body: dict[str, Any] = {"error": result.error.to_dict()}
        else:
            body = {"output": json_safe(result.data)}
        fence = fencing(result, result_text(result))
        if fence is not None:
            # The output stays where Gemini reads it, as it is; the fence's facts beside it.
            body = {"notice": fence.notice, **body, **fence.details()}
        # The name the model called: Gemini pairs an id-less response with its call by name.
        response: dict[str, Any] = {
            "name": self.exported_name(result.tool, tools),
            "response": body,
        }
        if not result.call_id.startswith(SYNTHETIC_ID_PREFIX):
            response = {"id": result.call_id, **response}
        return {"functionResponse": response}

    def export_tool_choice(
        self, choice: ToolChoice, *, strict: bool = False, tools: Sequence[ToolSpec] = ()
    ) -> Converted[dict[str, Any]]:
        config: dict[str, Any] = {"mode": _MODES[choice.mode]}
        if choice.mode == "tool":
            config["allowedFunctionNames"] = [self.choice_name(choice, tools)]
        losses: tuple[Loss, ...] = ()
        if choice.parallel is False:
            losses = (
                Loss(
                    pointer="/parallel",
                    keyword="parallel",
                    action=Action.DROPPED,
                    reason="Gemini has no switch to turn parallel function calls off",
                ),
            )
        return Converted(
            value={"toolConfig": {"functionCallingConfig": config}}, losses=losses
        ).check(strict)

    def import_tool_choice(self, fields: Mapping[str, Any]) -> ToolChoice:
        tool_config = fields.get("toolConfig", fields.get("tool_config")) or {}
        config = (
            tool_config.get("functionCallingConfig", tool_config.get("function_calling_config"))
            or {}
        )
        mode = str(config.get("mode") or "AUTO").upper()
        names = config.get("allowedFunctionNames", config.get("allowed_function_names")) or []
        if mode in ("ANY", "VALIDATED") and len(names) == 1:
            return ToolChoice(mode="tool", name=names[0])
        modes: dict[str, ChoiceMode] = {"AUTO": "auto", "ANY": "required", "NONE": "none"}
        return ToolChoice(mode=modes.get(mode, "auto"))
