"""What every dialect offers: the `Importer` and `Dialect` base classes.

A dialect converts between toolkeeper's values (`ToolSpec`, `ToolCall`, `ToolResult`,
`ToolChoice`) and one vendor's wire format: tool definitions out (`export_tool`) and in
(`import_tool`), tool calls out of a model response (`parse`), results into the vendor's
result message (`format_result`), and tool_choice with the parallel-call switch
(`export_tool_choice` / `import_tool_choice`). Dialects are pure: no I/O, no SDK imports; they
accept the vendors' SDK objects by dumping them to plain JSON first.

A dialect is not a client: it never sends anything, and it never decides whether a call may
run — the executor does, from the `ToolCall` it returns (a call whose argument JSON does not
parse keeps the raw text, and the executor refuses it with INVALID_ARGUMENTS).

The pieces the dialects share live beside it and are importable from here too: reading a
vendor's JSON (`dialects.wire`), a result as a model reads it (`dialects.results`) and
`ToolChoice` (`dialects.choice`).
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ..core.values import ToolCall, ToolResult, ToolSpec
from ..schema.losses import Action, Converted, Loss, prefixed
from .choice import ChoiceMode, ToolChoice
from .keys import rename_properties, translate
from .results import RESULT_CHARS, check_result_limit, result_text, shown_result
from .roots import merged_root
from .wire import (
    NotAFunction,
    arguments_of,
    declared_strict,
    first,
    function_fields,
    items_of,
    mapping,
    plain,
    strict_metadata,
)

__all__ = [
    "RESULT_CHARS",
    "ChoiceMode",
    "Dialect",
    "Importer",
    "NotAFunction",
    "ToolChoice",
    "arguments_of",
    "check_result_limit",
    "declared_strict",
    "first",
    "function_fields",
    "items_of",
    "mapping",
    "plain",
    "result_text",
    "shown_result",
    "strict_metadata",
]


def _hash(text: str, size: int = 8) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:size]


class Importer(ABC):
    """Reads some format's tool definitions into `ToolSpec`s."""

    name: ClassVar[str]

    @abstractmethod
    def import_tool(
        self, definition: Mapping[str, Any] | Any, *, strict: bool = False
    ) -> Converted[ToolSpec]:
        """A `ToolSpec` from one tool definition (a dict, or the vendor SDK's object).

        Raises:
            LossError: `strict` is true and the conversion lost something.
        """

    def import_tools(
        self, definitions: Sequence[Any], *, strict: bool = False
    ) -> Converted[list[ToolSpec]]:
        """`import_tool` for each definition; loss pointers are prefixed with its index.

        Raises:
            LossError: `strict` is true and a conversion lost something.
        """
        specs: list[ToolSpec] = []
        losses: list[Loss] = []
        for i, definition in enumerate(definitions):
            one = self.import_tool(definition)
            specs.append(one.value)
            losses.extend(prefixed(f"/{i}", one.losses))
        return Converted(value=specs, losses=tuple(losses)).check(strict)


class Dialect(Importer):
    """One vendor format. Subclasses implement the wire shapes; this class shares the rest.

    Attributes:
        name: the registry name (`openai_chat`, `anthropic`, ...).
        name_pattern: the tool names the vendor accepts; others are rewritten and reported.
        max_name: the longest tool name the vendor accepts.
    """

    name_pattern: ClassVar[re.Pattern[str]] = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
    max_name: ClassVar[int] = 64
    name_chars: ClassVar[str] = "A-Za-z0-9_-"
    """The characters a rewritten name keeps (a regex class body); others become `_`."""
    property_pattern: ClassVar[re.Pattern[str] | None] = None
    """The property names the vendor takes in parameter schemas (None: any); others are
    renamed on export and named back in parsed calls (`dialects.keys`)."""
    max_property: ClassVar[int] = 64

    # --- definitions -----------------------------------------------------------------------

    @abstractmethod
    def export_tool(self, spec: ToolSpec, *, strict: bool = False) -> Converted[dict[str, Any]]:
        """The vendor's definition of one tool: model-visible fields only.

        Raises:
            LossError: `strict` is true and the conversion lost something.
        """

    def export_tools(
        self, specs: Sequence[ToolSpec], *, strict: bool = False
    ) -> Converted[list[dict[str, Any]]]:
        """`export_tool` for each spec; loss pointers are prefixed with the spec's index.

        Raises:
            LossError: `strict` is true and a conversion lost something.
        """
        out: list[dict[str, Any]] = []
        losses: list[Loss] = []
        for i, one in enumerate(self.export_each(specs)):
            losses.extend(prefixed(f"/{i}", one.losses))
            out.append(one.value)
        return Converted(value=out, losses=tuple(losses)).check(strict)

    def export_each(self, specs: Sequence[ToolSpec]) -> list[Converted[dict[str, Any]]]:
        """Each spec exported on its own, named as in a list of them all (`wire_list`)."""
        out: list[Converted[dict[str, Any]]] = []
        for spec, unique in zip(specs, self.wire_list(specs), strict=True):
            one = self.export_tool(spec)
            wire = self.wire_name(one.value)
            if unique != wire:
                loss = Loss(
                    pointer="",
                    keyword="name",
                    action=Action.REWRITTEN,
                    reason=f"{wire!r} is taken by another tool in this list; "
                    f"exported as {unique!r}",
                )
                one = Converted(
                    value=self.with_wire_name(one.value, unique), losses=(*one.losses, loss)
                )
            out.append(one)
        return out

    def wire_names(self, specs: Sequence[ToolSpec]) -> dict[str, str]:
        """Exported name → spec name, exactly as `export_tools` names them."""
        return {wire: spec.name for wire, spec in zip(self.wire_list(specs), specs, strict=True)}

    def wire_list(self, specs: Sequence[ToolSpec]) -> list[str]:
        """The exported name of each spec, unique within the list, whatever its order.

        A name the vendor accepts, and no other spec has, is kept. A rewritten one
        (`safe_name`) that would meet another spec's name gets a suffix from the hash of its
        own name; so the same tools always get the same names, in any order. Another list
        may name a tool otherwise (`orders.get` is `orders_get` unless a tool of that name is
        in the list too): map calls back with the list the tools went out in
        (`Selection.parse` does).
        """
        safe = [self.safe_name(spec.name) for spec in specs]
        kept = Counter(
            spec.name for spec, wire in zip(specs, safe, strict=True) if wire == spec.name
        )
        wanted = Counter(safe)
        used: set[str] = set()
        out: list[str] = []
        for spec, wire in zip(specs, safe, strict=True):
            moved = wire != spec.name or kept[wire] > 1
            if moved and (wanted[wire] > 1 or wire in kept):
                wire = self.safe_name(f"{wire}_{_hash(spec.name, 4)}")
            attempt = 0
            while wire in used:  # the same name twice, or a hash that met another name
                attempt += 1
                wire = self.safe_name(
                    f"{self.safe_name(spec.name)}_{_hash(f'{spec.name}#{attempt}', 4)}"
                )
            used.add(wire)
            out.append(wire)
        return out

    def wire_name(self, definition: Mapping[str, Any]) -> str:
        """The tool name inside an exported definition."""
        return str(definition["name"])

    def with_wire_name(self, definition: dict[str, Any], name: str) -> dict[str, Any]:
        """An exported definition renamed."""
        return definition | {"name": name}

    # --- calls and results -----------------------------------------------------------------

    @abstractmethod
    def parse(
        self, response: Any, *, tools: Sequence[ToolSpec] = (), turn: str | None = None
    ) -> list[ToolCall]:
        """Every tool call in a model response, in order.

        The response is the vendor's JSON (a dict or list, or the same as text) or the SDK's
        object. `tools` (the specs that were exported) maps rewritten names back to the real
        ones. Never raises on what a response holds: a call whose argument JSON does not parse
        keeps the raw text as its arguments, and parts that are not calls are skipped.
        `turn` names the response for calls the vendor gives no id (Gemini without a
        `responseId`): the same turn parsed again gives the same ids (a retry replays).
        Without it, such calls get new ids on every parse: a later turn's identical call is
        another call, never a replay of the first.

        One call on its own (an OpenAI tool call, a Responses `function_call` item, an
        Anthropic `tool_use` block, a Gemini `functionCall` part or function call) is read as
        a response holding just that call, and a list of them as one holding them all.

        Raises:
            ValueError: `response` is text that is not JSON, or a piece of a streamed
                response (which holds part of a call at most).
            TypeError: `response` is no response at all (a number, a bool).
        """

    def stream_piece(self, data: Mapping[str, Any]) -> str | None:
        """The kind of stream event `data` is, or None when it is not one (a whole response
        or a part of one). Parsed alone, a piece would seem to hold no calls."""
        return None

    def response_data(self, response: Any) -> Mapping[str, Any] | list[Any]:
        """What `parse` reads: `response` as plain JSON, decoded when it is text.

        Raises:
            ValueError: `response` is text that is not JSON, or a piece of a stream.
            TypeError: `response` is neither a JSON object or array nor an SDK object.
        """
        if isinstance(response, str | bytes | bytearray):
            try:
                response = json.loads(response)
            except (ValueError, RecursionError) as exc:
                message = f"the {self.name} response, given as text, must be JSON: {exc}"
                raise ValueError(message) from exc
        data = plain(response)
        if data is None:  # an SDK's absent field (`message.tool_calls`): no calls
            return []
        if not isinstance(data, Mapping | list):
            raise TypeError(
                f"the {self.name} response must be a JSON object or array (or the SDK's "
                f"object), not {type(data).__name__}"
            )
        piece = self.stream_piece(data) if isinstance(data, Mapping) else None
        if piece is not None:
            raise self.piece_error(piece)
        return data

    def piece_error(self, piece: str) -> ValueError:
        """The refusal of a piece of a streamed response (`piece` says which kind)."""
        return ValueError(
            f"the {self.name} response is a piece of a stream ({piece}), which holds part "
            "of a call at most: parse the whole response once the stream has ended (the "
            "SDKs' stream helpers give it: get_final_completion(), get_final_response(), "
            "get_final_message())"
        )

    def format_result(
        self,
        result: ToolResult,
        *,
        tools: Sequence[ToolSpec] = (),
        max_chars: int | None = RESULT_CHARS,
    ) -> dict[str, Any]:
        """The vendor's message (or content block, or item) carrying `result` to the model.

        `tools`, the tools the request exported, name the tool as the model saw it where the
        format answers by name (Gemini) and the name had to be rewritten. A result whose text
        is longer than `max_chars` characters is cut there, with a note saying so (see
        `shown_result`; None sends it whole): a tool that answers with megabytes must not
        fill the model's context. The result itself, and its record, stay whole.

        Raises:
            ValueError: `max_chars` is below 1.
        """
        return self.result_message(shown_result(result, max_chars), tools)

    @abstractmethod
    def result_message(self, result: ToolResult, tools: Sequence[ToolSpec]) -> dict[str, Any]:
        """`format_result` once the result is as the model may see it: the vendor's shape."""

    # --- tool_choice ------------------------------------------------------------------------

    @abstractmethod
    def export_tool_choice(
        self, choice: ToolChoice, *, strict: bool = False, tools: Sequence[ToolSpec] = ()
    ) -> Converted[dict[str, Any]]:
        """The request fields that carry `choice` (e.g. `tool_choice`, `parallel_tool_calls`).

        Pass the `tools` the request exports, so that a tool whose name had to be rewritten
        is named as `export_tools` named it among them.

        Raises:
            LossError: `strict` is true and the conversion lost something.
        """

    def choice_name(self, choice: ToolChoice, tools: Sequence[ToolSpec]) -> str:
        """The exported name of the tool a `tool_choice` forces.

        Raises:
            ValueError: `tools` are given and the tool is not among them (the vendor would
                refuse the request, or force a tool the model was never shown).
        """
        name = choice.name or ""
        if tools and all(t.name != name for t in tools):
            raise ValueError(f"tool_choice names {name!r}, which is not among the tools offered")
        return self.exported_name(name, tools)

    def exported_name(self, name: str, tools: Sequence[ToolSpec]) -> str:
        """The name tool `name` is exported under among `tools` (alone, when not among them)."""
        for wire, original in self.wire_names(tools).items():
            if original == name:
                return wire
        return self.safe_name(name)

    @abstractmethod
    def import_tool_choice(self, fields: Mapping[str, Any]) -> ToolChoice:
        """The `ToolChoice` that request fields (as `export_tool_choice` makes them) express."""

    # --- shared helpers ---------------------------------------------------------------------

    def safe_name(self, name: str) -> str:
        """`name` if the vendor accepts it, else a stable rewrite that it accepts."""
        if self.name_pattern.fullmatch(name):
            return name
        cleaned = re.sub(f"[^{self.name_chars}]", "_", name) or "tool"
        if not re.match(r"[A-Za-z_]", cleaned):
            cleaned = "_" + cleaned
        if len(cleaned) > self.max_name:
            cleaned = cleaned[: self.max_name - 9] + "_" + _hash(name)
        return cleaned

    def export_name(self, spec: ToolSpec, losses: list[Loss]) -> str:
        """The exported tool name, with a loss entry when it had to be rewritten."""
        wire = self.safe_name(spec.name)
        if wire != spec.name:
            losses.append(
                Loss(
                    pointer="/name",
                    keyword="name",
                    action=Action.REWRITTEN,
                    reason=f"{self.name} tool names must match {self.name_pattern.pattern}; "
                    f"exported as {wire!r} (pass the specs to parse() to map calls back)",
                )
            )
        return wire

    def report_fields(self, spec: ToolSpec, losses: list[Loss], *, examples: bool = False) -> None:
        """Report the fields of `spec` a model would see that this vendor has no place for:
        its example inputs, unless the vendor carries them (`examples`).

        The rest of a spec outside name, description and schemas is no loss in any format:
        `title` is a display name for people (MCP's own words), `effect`, `idempotent`,
        `timeout` and the like steer the runtime, which holds the spec, not the model. An
        output schema a format has no field for (OpenAI Chat, Anthropic), or MCP's for a
        result that is not an object (sent as text), never reaches the model either.
        """
        if spec.examples and not examples:
            why = f"{self.name} tool definitions have no field for example inputs"
            losses.append(
                Loss(pointer="/examples", keyword="examples", action=Action.DROPPED, reason=why)
            )

    def original_name(self, wire: str, tools: Sequence[ToolSpec]) -> str:
        """The spec name a (possibly rewritten) wire name stands for."""
        return self.wire_names(tools).get(wire, wire)

    def call(
        self,
        *,
        call_id: str,
        wire_name: str,
        raw_arguments: Any,
        tools: Sequence[ToolSpec],
        extra: Mapping[str, Any] | None = None,
    ) -> ToolCall:
        """A `ToolCall` with the name mapped back and the arguments parsed (or kept raw)."""
        name = self.original_name(wire_name, tools)
        metadata: dict[str, Any] = {"dialect": self.name}
        if name != wire_name:
            metadata["wire_name"] = wire_name
        metadata.update(extra or {})
        arguments = arguments_of(raw_arguments)
        pattern = self.property_pattern
        if pattern is not None and isinstance(arguments, Mapping):
            spec = next((t for t in tools if t.name == name), None)
            if spec is not None:
                schema, _ = merged_root(spec.input_schema, self.name)  # the root exported
                arguments = translate(arguments, schema, pattern, self.max_property, exported=False)
        return ToolCall(call_id=call_id, name=name, arguments=arguments, metadata=metadata)

    def exported_schema(self, schema: dict[str, Any], losses: list[Loss]) -> dict[str, Any]:
        """`schema` with the property names this vendor refuses renamed (and reported)."""
        pattern = self.property_pattern
        if pattern is None:
            return schema
        return rename_properties(schema, pattern, self.max_property, self.name, losses)

    def exported_example(
        self, example: Mapping[str, Any], schema: Mapping[str, Any]
    ) -> dict[str, Any]:
        """An example input under the property names it is exported with (`schema`: the
        tool's input schema, its root choices merged, as `merged_root` gives it)."""
        pattern = self.property_pattern
        if pattern is None:
            return dict(example)
        translated: dict[str, Any] = translate(
            example, schema, pattern, self.max_property, exported=True
        )
        return translated

    @staticmethod
    def response_turn(value: Any) -> str | None:
        """A vendor's response id as a turn name (None when there is none)."""
        return value if isinstance(value, str) and value else None

    @staticmethod
    def synthetic_id(prefix: str, position: int, name: str, turn: str | None) -> str:
        """A call id for vendors that give none: from the response it came in (`turn`, the
        vendor's response id or the caller's), its position and name. The same response
        parsed twice gives the same ids (a retry replays); another response gives new ones.
        Without a turn the id is new every time: two turns' identical calls were taken for
        one, and the second replayed the first's (stale) result. The arguments are no part of
        it: the id is an unkeyed hash kept in the ledger, and they may hold a secret."""
        if not turn:
            turn = uuid.uuid4().hex
        return f"{prefix}{_hash(f'{turn}:{position}:{name}', 16)}"
