"""Loading the retrieval benchmarks (`../shared/bench/` formats) into `ToolSpec`s and queries.

What it is: readers for `tools.jsonl` and `queries.dev.jsonl` (BFCL, MetaTool, Seal-Tools) and
for the abstention set (one small catalog per query). Parameters in BFCL's and
Seal-Tools' dialects are imported through the dialects layer; tools without parameters
(MetaTool) get an empty object schema. Names that several tools share get a
`~N` suffix so that every tool keeps its own entry; scoring maps them back.
What it is not: a metric (see `toolkeeper.eval.metrics`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..core.values import ToolSpec
from ..dialects import Importer, get_importer

__all__ = [
    "AbstainQuery",
    "Catalog",
    "DatasetError",
    "Query",
    "load_abstain_queries",
    "load_queries",
    "load_tools",
    "spec_from_record",
    "unique_names",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class Query:
    """One retrieval question with its gold tools."""

    id: str
    text: str
    gold_ids: tuple[str, ...]
    gold_names: tuple[str, ...]
    category: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class AbstainQuery:
    """One question with its own small catalog; no gold name means no tool fits."""

    id: str
    text: str
    tools: tuple[ToolSpec, ...]
    gold_names: tuple[str, ...]
    category: str = ""

    @property
    def answerable(self) -> bool:
        """Whether some tool fits."""
        return bool(self.gold_names)


@dataclass(kw_only=True, slots=True)
class Catalog:
    """A benchmark's tools with the maps from index keys back to dataset ids and names."""

    specs: list[ToolSpec]
    id_of: dict[str, str] = field(default_factory=dict)
    """Index key (unique tool name) → dataset id."""
    name_of: dict[str, str] = field(default_factory=dict)
    """Index key → the name as the dataset wrote it."""


class DatasetError(ValueError):
    """A benchmark file that cannot be used; the message names the file and line."""


def _read_jsonl(path: str | Path, *, needs: Sequence[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each record of a JSON lines file, with its `file:line` for messages.

    Raises:
        DatasetError: the file cannot be read, or a line is not a JSON object with `needs`.
    """
    try:
        handle = open(path, encoding="utf-8")  # noqa: SIM115 - closed below, errors mapped
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    with handle:
        try:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                where = f"{path}:{number}"
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DatasetError(
                        f"{where}: not a JSON line ({exc.msg} at column {exc.pos + 1})"
                    ) from exc
                if not isinstance(record, dict):
                    kind = type(record).__name__
                    raise DatasetError(f"{where}: expected a JSON object, found {kind}")
                missing = [key for key in needs if key not in record]
                if missing:
                    raise DatasetError(
                        f"{where}: no {', '.join(map(repr, missing))} field; is this the right "
                        "file? (formats: ../shared/bench/README.md)"
                    )
                yield where, record
        except UnicodeDecodeError as exc:
            raise DatasetError(f"{path}: not UTF-8 text ({exc.reason})") from exc


def _text(where: str, record: Mapping[str, Any], key: str) -> str:
    """The field `key` of `record`, which must be a string."""
    value = record[key]
    if not isinstance(value, str):
        raise DatasetError(f"{where}: {key} must be a string, not {_kind(value)}")
    return value


def _names(where: str, record: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """The optional field `key` of `record`, a list of strings (absent or null: none)."""
    value = record.get(key)
    if value is None:
        return ()
    # (a string is a sequence too: "get_weather" was read as the names "g", "e", "t", ...)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DatasetError(f"{where}: {key} must be a list of strings, not {_kind(value)}")
    return tuple(value)


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _dialect_importer(fmt: str | None) -> Importer | None:
    name = {"bfcl": "bfcl", "seal-tools": "sealtools"}.get(fmt or "")
    return get_importer(name) if name else None


def _guess_format(record: Mapping[str, Any]) -> str | None:
    fmt = record.get("parameters_format")
    if isinstance(fmt, str):
        return fmt
    params = record.get("parameters")
    if isinstance(params, Mapping) and params.get("type") == "dict":
        return "bfcl"
    return None


def spec_from_record(record: Mapping[str, Any], *, name: str | None = None) -> ToolSpec:
    """A `ToolSpec` from one tool record (`name`, `description`, `parameters`).

    Args:
        record: The record as the dataset wrote it.
        name: The unique name to give the spec (defaults to the record's name).
    """
    importer = _dialect_importer(_guess_format(record))
    raw_name = str(record["name"])
    if importer is not None:
        return replace(importer.import_tool(dict(record)).value, name=name or raw_name)
    schema = {"type": "object", "properties": {}}
    return ToolSpec(
        name=name or raw_name,
        description=str(record.get("description") or ""),
        input_schema=schema,
        source=str(record.get("source_category") or "bench"),
    )


def unique_names(names: Iterable[str]) -> list[str]:
    """`names` with repeats suffixed `~2`, `~3`, ... in order of appearance."""
    seen: dict[str, int] = {}
    out: list[str] = []
    for name in names:
        count = seen.get(name, 0) + 1
        seen[name] = count
        out.append(name if count == 1 else f"{name}~{count}")
    return out


def load_tools(paths: str | Path | Sequence[str | Path]) -> Catalog:
    """Read one or more `tools.jsonl` files into one catalog with unique names."""
    if isinstance(paths, str | Path):
        paths = [paths]
    located = [found for p in paths for found in _read_jsonl(p, needs=("name",))]
    keys = unique_names(_text(where, r, "name") for where, r in located)
    catalog = Catalog(specs=[])
    for key, (where, record) in zip(keys, located, strict=True):
        catalog.specs.append(_spec(where, record, key))
        catalog.id_of[key] = str(record.get("id", key))
        catalog.name_of[key] = str(record["name"])
    return catalog


def _spec(where: str, record: Mapping[str, Any], name: str) -> ToolSpec:
    try:
        return spec_from_record(record, name=name)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise DatasetError(
            f"{where}: tool {record.get('name')!r} cannot be imported: {exc}"
        ) from exc


def load_queries(path: str | Path) -> list[Query]:
    """Read a `queries.dev.jsonl` file."""
    return [
        Query(
            id=str(r["id"]),
            text=_text(where, r, "query"),
            gold_ids=_names(where, r, "gold_tool_ids"),
            gold_names=_names(where, r, "gold_tool_names"),
            category=str(r.get("category", "")),
        )
        for where, r in _read_jsonl(path, needs=("id", "query"))
    ]


def load_abstain_queries(path: str | Path) -> list[AbstainQuery]:
    """Read the abstention set: each query brings its own candidate tools."""
    out: list[AbstainQuery] = []
    for where, r in _read_jsonl(path, needs=("id", "query", "candidate_tools")):
        tools = r["candidate_tools"]
        if not isinstance(tools, list) or not all(
            isinstance(t, Mapping) and isinstance(t.get("name"), str) for t in tools
        ):
            raise DatasetError(
                f"{where}: candidate_tools must be a list of tools with a 'name' string"
            )
        keys = unique_names(t["name"] for t in tools)
        out.append(
            AbstainQuery(
                id=str(r["id"]),
                text=_text(where, r, "query"),
                tools=tuple(_spec(where, t, k) for t, k in zip(tools, keys, strict=True)),
                gold_names=_names(where, r, "gold_tool_names"),
                category=str(r.get("category", "")),
            )
        )
    return out
