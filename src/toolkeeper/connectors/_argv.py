"""A program's argv template, filled from a call's validated arguments.

A template is a list of items. An item is text, where `{name}` stands for the argument
`name`, or a group (a list of such texts) that is left out whole unless every argument it
names is given. Each item becomes exactly one argv entry, however its value is spelled:
spaces, quotes, `;` or `$(...)` are plain characters to the program, since no shell ever
reads them. Filling:

- an item that is only `{name}` takes a list argument as one entry per element, and is left
  out when the argument is not given (or null);
- `{name}` inside other text (`--limit={limit}`) is the value as text, and the item is left
  out when the argument is not given;
- in a group, a boolean argument decides whether the group is included and adds no text
  (`["--verbose", "{verbose}"]`); elsewhere a boolean is `true` or `false`.

`check` refuses, before anything is recorded, what would change a program's reading of its
arguments although it is one entry: a value filling a whole entry that begins with `-` (the
program would take it as an option) unless a `--` item comes first in the template, and NUL
(the system cannot pass it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..schema.validate import Violation

__all__ = ["Template", "check", "fill", "placeholders", "schema_for", "template"]

Template = tuple[str | tuple[str, ...], ...]
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def placeholders(template: Template) -> dict[str, bool]:
    """Each argument the template names, and whether it must be given (it is outside any
    group)."""
    out: dict[str, bool] = {}
    for item in template:
        grouped = not isinstance(item, str)
        for text in (item,) if isinstance(item, str) else item:
            for name in _PLACEHOLDER.findall(text):
                out[name] = out.get(name, False) or not grouped
    return out


def schema_for(template: Template) -> dict[str, Any]:
    """An input schema for a template that comes without one: each argument a string,
    required unless it is in a group."""
    names = placeholders(template)
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {name: {"type": "string"} for name in names},
        "additionalProperties": False,
    }
    required = [name for name, must in names.items() if must]
    if required:
        schema["required"] = required
    return schema


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)


def _given(arguments: Mapping[str, Any], name: str) -> bool:
    return arguments.get(name) is not None


def _fill_text(text: str, arguments: Mapping[str, Any], grouped: bool) -> list[str] | None:
    """The entries one text makes; None when it is left out."""
    whole = _PLACEHOLDER.fullmatch(text)
    if whole is not None:
        name = whole.group(1)
        if not _given(arguments, name):
            return None
        value = arguments[name]
        if grouped and isinstance(value, bool):
            return []
        if isinstance(value, list):
            return [_text(v) for v in value]
        return [_text(value)]
    names = _PLACEHOLDER.findall(text)
    if any(not _given(arguments, n) for n in names):
        return None
    return [_PLACEHOLDER.sub(lambda m: _text(arguments[m.group(1)]), text)]


def fill(template: Template, arguments: Mapping[str, Any]) -> list[str]:
    """The argv entries of `template` with `arguments` (see the module's rules)."""
    out: list[str] = []
    for item in template:
        if isinstance(item, str):
            out += _fill_text(item, arguments, grouped=False) or []
            continue
        names = [n for text in item for n in _PLACEHOLDER.findall(text)]
        if any(not _given(arguments, n) or arguments[n] is False for n in names):
            continue
        for text in item:
            out += _fill_text(text, arguments, grouped=True) or []
    return out


def check(template: Template, arguments: Mapping[str, Any]) -> list[Violation]:
    """What in `arguments` the template must not pass on (see the module's rules)."""
    out: list[Violation] = []
    options_end = False
    for item in template:
        texts = (item,) if isinstance(item, str) else item
        for text in texts:
            if text == "--":
                options_end = True
                continue
            for name in _PLACEHOLDER.findall(text):
                if not _given(arguments, name):
                    continue
                value = arguments[name]
                values = value if isinstance(value, list) else [value]
                whole = _PLACEHOLDER.fullmatch(text) is not None
                for index, v in enumerate(values):
                    pointer = f"/{name}" + (f"/{index}" if isinstance(value, list) else "")
                    spelled = _text(v)
                    if "\x00" in spelled:
                        out.append(
                            Violation(
                                pointer=pointer, keyword="x-argv", message="may not contain NUL"
                            )
                        )
                    elif (
                        whole
                        and not options_end
                        and spelled.startswith("-")
                        and not isinstance(v, int | float)
                    ):
                        out.append(
                            Violation(
                                pointer=pointer,
                                keyword="x-argv",
                                message="may not begin with '-' (read as an option)",
                            )
                        )
    return out


def template(raw: Sequence[str | Sequence[str]]) -> Template:
    """A template from configuration (texts, and lists of texts for groups)."""
    return tuple(item if isinstance(item, str) else tuple(item) for item in raw)
