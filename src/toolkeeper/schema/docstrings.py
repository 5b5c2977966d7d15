"""Google-style docstrings: the summary a tool's description comes from, and the parameter
descriptions its input schema carries."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

__all__ = ["ParsedDocstring", "parse_docstring"]

_SECTION = re.compile(r"^(\w[\w ]*):\s*$")
_ARG_SECTIONS = {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"}
_DROPPED_SECTIONS = {"raises", "raise", "except", "exceptions"}
"""Sections that speak to Python callers, not to a model."""
# `name (type): text`, where the type may hold one level of parentheses: `dict(str, int)`.
_PARAM = re.compile(r"^(\*{0,2}\w+)\s*(?:\(((?:[^()]|\([^()]*\))*)\))?\s*:\s*(.*)$")


@dataclass(frozen=True, kw_only=True, slots=True)
class ParsedDocstring:
    """What a docstring says about a function."""

    description: str = ""
    """Everything but the argument section, whitespace normalized per paragraph."""
    params: dict[str, str] = field(default_factory=dict)
    """Parameter name → description."""


def parse_docstring(doc: str | None) -> ParsedDocstring:
    """Split a Google-style docstring into its description and parameter descriptions."""
    if not doc:
        return ParsedDocstring()
    lines = inspect.cleandoc(doc).splitlines()
    kept: list[str] = []
    params: dict[str, str] = {}
    in_args = False
    dropped = False
    current: str | None = None
    arg_indent: int | None = None
    for line in lines:
        section = _SECTION.match(line)
        if section and not line.startswith((" ", "\t")):
            name = section.group(1).strip().lower()
            in_args = name in _ARG_SECTIONS
            dropped = name in _DROPPED_SECTIONS
            current, arg_indent = None, None
            if in_args or dropped:
                continue
        elif dropped and line.strip() and not line.startswith((" ", "\t")):
            dropped = False  # text after the section, at the left margin
        if dropped:
            continue
        if in_args:
            stripped = line.strip()
            if not stripped:
                continue  # a paragraph break inside a description (or between entries)
            indent = len(line) - len(line.lstrip())
            if arg_indent is None:
                arg_indent = indent
            match = _PARAM.match(stripped)
            if match and indent <= arg_indent:
                current = match.group(1).lstrip("*")
                params[current] = match.group(3).strip()
            elif current is not None and indent > 0:
                params[current] = (params[current] + " " + stripped).strip()
            elif indent == 0:
                in_args, current = False, None  # the section ended: text goes on
                kept.append(line)
            continue
        kept.append(line)
    return ParsedDocstring(description="\n".join(kept).strip(), params=params)
