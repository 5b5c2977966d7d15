"""Where a key of a TOML configuration is, so that an error names its line and the key meant."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

__all__ = ["BARE", "dotted", "key_lines", "line_of", "unknown_key"]

BARE = re.compile(r"[A-Za-z0-9_-]+")
"""A key TOML writes without quotes."""

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-\"'. ]+?)\s*=")
_KEY_PART = re.compile(r"\s*(\"[^\"]*\"|'[^']*'|[^.]+?)\s*(?:\.|$)")


def _split_key(text: str) -> list[str]:
    """A dotted key's parts (`a."b.c"`: `a`, `b.c`)."""
    return [part.strip("\"'") for part in _KEY_PART.findall(text.strip())]


def dotted(loc: Sequence[str | int]) -> str:
    """A key's path as TOML writes it (`upstreams."a.b"`)."""
    parts = (str(p) for p in loc)
    return ".".join(p if BARE.fullmatch(p) else f'"{p}"' for p in parts)


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """Line numbers (1-based) of every table header and key, by their path; array tables get
    their index (`rules.0.kind`)."""
    lines: dict[tuple[str, ...], int] = {}
    counts: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            path = tuple(_split_key(header.group(2)))
            if header.group(1) == "[[":
                index = counts.get(path, -1) + 1
                counts[path] = index
                path = (*path, str(index))
            table = path
            _set_line(lines, table, number)
            continue
        key = _KEY.match(line)
        if key and not line.lstrip().startswith("#"):
            _set_line(lines, (*table, *_split_key(key.group(1))), number)
    return lines


def _set_line(lines: dict[tuple[str, ...], int], path: tuple[str, ...], number: int) -> None:
    """Where `path` first appears, and with it each table it implies (`[principal.a]` is
    where the table `principal` is too)."""
    for end in range(1, len(path) + 1):
        lines.setdefault(path[:end], number)


def _model_at(root: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The model of the table at `loc` under `root` (`("principals", "alice")`:
    `PrincipalConfig`)."""
    kind: Any = root
    for part in loc:
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            field = kind.model_fields.get(str(part))
            if field is None:
                return None
            kind = field.annotation
        elif get_origin(kind) in (dict, list):
            kind = get_args(kind)[-1]  # a value of a table of tables, an array's item
        else:
            return None
        while get_origin(kind) in (Annotated, Union, UnionType):  # `X | None`: the table X
            kind = next(a for a in get_args(kind) if a is not type(None))
    return kind if isinstance(kind, type) and issubclass(kind, BaseModel) else None


def unknown_key(root: type[BaseModel], loc: Sequence[str | int]) -> str:
    """Why a key is refused, with the key meant when it looks like a typo of one."""
    model = _model_at(root, loc[:-1])
    if model is None:
        return "unknown key"
    known = list(model.model_fields)
    if model is root and "base_dir" in known:
        known.remove("base_dir")  # set by load_config, not written
    close = difflib.get_close_matches(str(loc[-1]), known, n=1)
    if close:
        return f"unknown key (did you mean {close[0]}?)"
    return f"unknown key (known here: {', '.join(known)})"


def line_of(loc: Sequence[str | int], lines: dict[tuple[str, ...], int]) -> int | None:
    """The line of `loc`, or of the nearest table above it that has one."""
    path = tuple(str(p) for p in loc)
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return None
