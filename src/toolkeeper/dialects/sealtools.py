"""Import tool docs in Seal-Tools' dialect.

Seal-Tools writes parameters as `{"properties", "required"}` with Python type names (`str`,
`int`, `float`, `bool`) and a few free-form keys (`example`, `unit`, `values`, ...), and
describes the result in `responses` the same way. The importer maps them onto JSON Schema
2020-12 (the result becomes `output_schema`); free-form keys it cannot map are moved into the
description and reported. Import only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..core.values import ToolSpec
from ..schema.losses import Action, Converted, Loss
from ..schema.walker import KNOWN_KEYWORDS
from .base import Importer
from .wire import plain

__all__ = ["SEALTOOLS_TYPES", "SealTools", "import_tool"]

SEALTOOLS_TYPES: Mapping[str, str] = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "list": "array",
    "dict": "object",
}
"""Seal-Tools type names and their JSON Schema types."""


def _property(raw: Any, pointer: str, losses: list[Loss]) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        losses.append(
            Loss(
                pointer=pointer,
                keyword="",
                action=Action.DROPPED,
                reason="not a parameter object; read as any value",
            )
        )
        return {}
    out: dict[str, Any] = {}
    notes: list[str] = []
    for key, value in raw.items():
        if key == "type":
            mapped = SEALTOOLS_TYPES.get(str(value), str(value))
            if mapped not in SEALTOOLS_TYPES.values():
                losses.append(
                    Loss(
                        pointer=f"{pointer}/type",
                        keyword="type",
                        action=Action.DROPPED,
                        reason=f"unknown Seal-Tools type {value!r}",
                    )
                )
                continue
            out["type"] = mapped
        elif key in ("example", "examples"):
            out["examples"] = value if isinstance(value, list) else [value]
        elif key in KNOWN_KEYWORDS:
            out[key] = value
        else:
            notes.append(f"{key}: {json.dumps(value, ensure_ascii=False)}")
            losses.append(
                Loss(
                    pointer=f"{pointer}/{key}",
                    keyword=key,
                    action=Action.MOVED_TO_DESCRIPTION,
                    reason="not a JSON Schema keyword",
                )
            )
    if notes:
        text = "; ".join(notes)
        out["description"] = f"{out['description']} ({text})" if out.get("description") else text
    return out


def _object(raw: Mapping[str, Any], pointer: str, losses: list[Loss]) -> dict[str, Any]:
    props = raw.get("properties") or {}
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            name: _property(sub, f"{pointer}/properties/{name}", losses)
            for name, sub in props.items()
        },
    }
    required = raw.get("required")
    if isinstance(required, str):
        required = [required]  # one name (its letters were read as names)
    if required:
        schema["required"] = list(required)
    return schema


class SealTools(Importer):
    """Seal-Tools tool docs (`name`, `description`, `parameters`, `responses`)."""

    name = "sealtools"

    def import_tool(
        self, definition: Mapping[str, Any] | Any, *, strict: bool = False
    ) -> Converted[ToolSpec]:
        data = plain(definition)
        losses: list[Loss] = []
        schema = _object(data.get("parameters") or {}, "/parameters", losses)
        output = None
        if isinstance(data.get("responses"), Mapping) and data["responses"]:
            output = _object({"properties": data["responses"]}, "/responses", losses)
        metadata = {k: data[k] for k in ("id", "source_category") if k in data}
        spec = ToolSpec(
            name=str(data["name"]),
            description=str(data.get("description") or ""),
            input_schema=schema,
            output_schema=output,
            source=self.name,
            metadata=metadata,
        )
        return Converted(value=spec, losses=tuple(losses)).check(strict)


def import_tool(
    definition: Mapping[str, Any] | Any, *, strict: bool = False
) -> Converted[ToolSpec]:
    """`SealTools().import_tool`: one Seal-Tools doc as a ToolSpec, with the loss report.

    Raises:
        LossError: `strict` is true and the conversion lost something.
    """
    return SealTools().import_tool(definition, strict=strict)
