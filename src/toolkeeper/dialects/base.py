"""What every dialect offers, and the pieces they share.

A dialect converts between toolkeeper's values (`ToolSpec`, `ToolCall`, `ToolResult`,
`ToolChoice`) and one vendor's wire format: tool definitions out (`export_tool`) and in
(`import_tool`), tool calls out of a model response (`parse`), results into the vendor's
result message (`format_result`), and tool_choice with the parallel-call switch
(`export_tool_choice` / `import_tool_choice`). Dialects are pure: no I/O, no SDK imports; they
accept the vendors' SDK objects by dumping them to plain JSON first.

A dialect is not a client: it never sends anything, and it never decides whether a call may
run — the executor does, from the `ToolCall` it returns (a call whose argument JSON does not
parse keeps the raw text, and the executor refuses it with INVALID_ARGUMENTS).
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

from ..core.values import MCP_CONTENT, Effect, ToolCall, ToolResult, ToolSpec
from ..schema.losses import Action, Converted, Loss, prefixed
from .keys import rename_properties, translate
from .schemas import merged_root

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

RESULT_CHARS = 100_000
"""The most characters of a result's text a model is shown by default (`format_result`):
about 25,000 tokens, the default cap Claude Code puts on an MCP tool's output."""


class NotAFunction(ValueError):
    """What was given to import is no function definition: a vendor's own tool (web search,
    code execution...), which has no schema, or something that is not a tool at all."""


def function_fields(
    data: Any, vendor: str, *, types: tuple[str | None, ...] = (None, "function")
) -> Mapping[str, Any]:
    """`data` when it is a function definition of `vendor` (its `type` one of `types`).

    Raises:
        NotAFunction: it is a vendor's own tool, or has no name.
    """
    if not isinstance(data, Mapping):
        raise NotAFunction(
            f"tool definitions for {vendor} are JSON objects, not {type(data).__name__}"
        )
    kind = data.get("type")
    if kind not in types:
        raise NotAFunction(
            f"{kind!r} is one of {vendor}'s own tools, not a function definition: "
            "it has no schema to import"
        )
    name = data.get("name")
    if not isinstance(name, str) or not name:
        keys = ", ".join(sorted(map(str, data))) or "nothing"
        raise NotAFunction(f"a function definition for {vendor} needs a name (it has {keys})")
    return data


ChoiceMode = Literal["auto", "required", "none", "tool"]
"""How the model may use tools; see `ToolChoice.mode`."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolChoice:
    """Which tools the model may or must call, and whether it may call several at once."""

    mode: ChoiceMode = "auto"
    """`auto`: the model decides; `required`: at least one call; `none`: no call;
    `tool`: exactly the tool `name`."""
    name: str | None = None
    """The tool to call when `mode` is `tool`."""
    parallel: bool | None = None
    """Whether several calls may come in one response; None leaves the vendor's default."""

    def __post_init__(self) -> None:
        if self.mode == "tool" and not self.name:
            raise ValueError("ToolChoice(mode='tool') needs the name of the tool")


_PLAIN_DEPTH = 64
"""How deep `plain` looks for SDK objects: deeper lie only a model's arguments."""


def plain(obj: Any, depth: int = 0) -> Any:
    """A JSON-compatible copy of `obj`: SDK (pydantic) objects are dumped by their wire names.

    What lies deeper than `_PLAIN_DEPTH` is left as it is: arguments a model nested a few
    hundred levels deep must reach the executor (which refuses them), not stop the parse.
    """
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        try:
            return dump(mode="json", by_alias=True, exclude_none=True)
        except ValueError:  # pydantic writes JSON at most 255 levels deep
            return dump(by_alias=True, exclude_none=True)
    if depth > _PLAIN_DEPTH:
        return obj
    if isinstance(obj, Mapping):
        return {str(k): plain(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [plain(v, depth + 1) for v in obj]
    return obj


def mapping(value: Any) -> Mapping[str, Any]:
    """`value` if it is a JSON object, else an empty one (responses are read defensively)."""
    return value if isinstance(value, Mapping) else {}


def items_of(value: Any) -> list[Any]:
    """`value` if it is a JSON array, else an empty one."""
    return list(value) if isinstance(value, list | tuple) else []


def first(value: Any) -> Mapping[str, Any]:
    """The first element of a JSON array when it is an object, else an empty object."""
    items = items_of(value)
    return mapping(items[0]) if items else {}


def arguments_of(raw: Any) -> Mapping[str, Any] | str:
    """Arguments as a model produced them: a JSON object, or the raw text when it is not one."""
    if raw is None:
        return {}
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            return raw
        return dict(value) if isinstance(value, dict) else raw
    return json.dumps(raw, default=str)


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
        return replace(result, error=replace(result.error, message=message, details=kept))
    changes: dict[str, Any] = {}
    text = result_text(result)
    if len(text) > max_chars:
        changes["data"] = _cut(text, max_chars, len(text), result.call_id)
    blocks = result.metadata.get(MCP_CONTENT)
    if blocks:
        shown = _cut_blocks(blocks, max_chars, result.call_id)
        if shown is not None:
            changes["metadata"] = {**result.metadata, MCP_CONTENT: shown}
    return replace(result, **changes) if changes else result


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


def declared_strict(spec: ToolSpec) -> bool | None:
    """Whether the tool's source asked for strict mode (`"strict"` of an OpenAI or Anthropic
    definition, kept in `metadata["strict"]` on import), or None when it did not say."""
    value = spec.metadata.get("strict")
    return value if isinstance(value, bool) else None


def strict_metadata(definition: Mapping[str, Any]) -> dict[str, Any]:
    """The `metadata` of a spec imported from `definition`: its `strict` when it says true or
    false (null, or no `strict`, leaves the vendor's default)."""
    value = definition.get("strict")
    return {"strict": value} if isinstance(value, bool) else {}


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

    def report_fields(
        self,
        spec: ToolSpec,
        losses: list[Loss],
        *,
        title: bool = False,
        output_schema: bool = False,
        examples: bool = False,
        hints: bool = False,
    ) -> None:
        """Report the model-visible fields of `spec` that this vendor has no place for.

        The keyword arguments say which ones it does carry. Fields left at their defaults are
        not reported: importing the definition back restores them.
        """
        why = f"{self.name} tool definitions have no such field"
        if spec.title and not title:
            losses.append(
                Loss(pointer="/title", keyword="title", action=Action.DROPPED, reason=why)
            )
        if spec.output_schema is not None and not output_schema:
            losses.append(
                Loss(
                    pointer="/output_schema",
                    keyword="output_schema",
                    action=Action.DROPPED,
                    reason=why,
                )
            )
        if spec.examples and not examples:
            losses.append(
                Loss(pointer="/examples", keyword="examples", action=Action.DROPPED, reason=why)
            )
        if not hints:
            if spec.effect is not Effect.WRITE:
                losses.append(
                    Loss(pointer="/effect", keyword="effect", action=Action.DROPPED, reason=why)
                )
            if spec.idempotent:
                losses.append(
                    Loss(
                        pointer="/idempotent",
                        keyword="idempotent",
                        action=Action.DROPPED,
                        reason=why,
                    )
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
