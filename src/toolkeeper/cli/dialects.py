"""`toolkeeper dialects convert`: tool definitions from one format to others, with loss reports.

```
toolkeeper dialects convert --from bfcl --to openai_chat tools.jsonl          # JSON lines out
toolkeeper dialects convert --from mcp --to anthropic,gemini tools.json --json  # one report
toolkeeper dialects convert --from bfcl --to all tools.jsonl --json
toolkeeper dialects check-args --from bfcl tools.jsonl args.dev.jsonl [--coerce]
```
Input is a JSON document (one definition, a list, or an object with a `tools` list) or JSON
lines (one definition per line); `-` reads stdin. Without `--json`, converted definitions go to
stdout (JSON lines for JSON-lines input, else one JSON list) and the loss report to stderr.
With `--json`, stdout gets one JSON document: per target format the definitions, each one's
losses, and how many converted without loss. `--strict` fails (exit 1) on the first loss.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _HELP

if TYPE_CHECKING:
    from ..dialects import Loss

__all__ = ["convert", "register"]

# `toolkeeper.dialects`' registries by name, here so that `--help` need not import the
# dialects (a test checks they agree); the dialects are imported in the functions using them
DIALECTS = ("openai_chat", "openai_responses", "anthropic", "gemini", "mcp")
IMPORTERS = (*DIALECTS, "bfcl", "sealtools")


def register(subparsers: Any) -> None:
    """Add `dialects convert` and `dialects check-args`."""
    parser = subparsers.add_parser("dialects", help=_HELP["dialects"])
    sub = parser.add_subparsers(dest="dialects_command", metavar="SUBCOMMAND", required=True)
    conv = sub.add_parser("convert", help="convert tool definitions, reporting every loss")
    _add_source(conv, "the format of the definitions read")
    conv.add_argument(
        "--to",
        dest="targets",
        required=True,
        type=_targets,
        metavar="FORMATS",
        help=f"one or more of {', '.join(DIALECTS)} (comma-separated), or `all`",
    )
    conv.add_argument("file", help="JSON or JSON lines file; `-` for stdin")
    conv.add_argument("--json", action="store_true", help="one JSON document on stdout")
    conv.add_argument("--strict", action="store_true", help="fail on the first loss")
    conv.set_defaults(func=_run)
    check = sub.add_parser(
        "check-args", help="validate labelled arguments (args.dev.jsonl) against imported tools"
    )
    _add_source(check, "the format of the tool definitions")
    check.add_argument("tools", help="tool definitions, JSON lines with an `id` each")
    check.add_argument("args", help="labelled arguments, JSON lines")
    check.add_argument("--coerce", action="store_true", help="run the opt-in coercion first")
    check.set_defaults(func=_check_args)


def _add_source(parser: Any, help_text: str) -> None:
    parser.add_argument(
        "--from", dest="source", required=True, choices=sorted(IMPORTERS), help=help_text
    )


def _targets(text: str) -> list[str]:
    if text.strip() == "all":
        return list(DIALECTS)
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names or any(name not in DIALECTS for name in names):
        raise argparse.ArgumentTypeError(
            f"expected one or more of {', '.join(DIALECTS)} (comma-separated), or all; not {text!r}"
        )
    return names


_TOO_DEEP = "JSON nested more deeply than it can be read (about 1,000 levels)"


def _read(path: str) -> tuple[list[tuple[str, Any]], bool]:
    """The items of a JSON document or a JSON lines file, each with where it is for messages
    (`FILE:LINE`, `FILE: item N` in a list, `FILE` alone), and whether it is JSON lines.

    Raises:
        ValueError: the file cannot be read, or is neither; the message names file and line.
    """
    name = "<stdin>" if path == "-" else path
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"{name}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ValueError(f"{name}: not UTF-8 text ({exc.reason})") from exc
    try:
        document = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        lines = [(number, line) for number, line in enumerate(text.split("\n"), 1) if line.strip()]
        items: list[tuple[str, Any]] = []
        for number, line in lines:
            try:
                items.append((f"{name}:{number}", json.loads(line)))
            except RecursionError as deep:
                raise ValueError(f"{name}:{number}: {_TOO_DEEP}") from deep
            except json.JSONDecodeError as bad:
                if not items:  # not even the first line: a JSON document, broken
                    if isinstance(exc, RecursionError):
                        raise ValueError(f"{name}: {_TOO_DEEP}") from exc
                    raise ValueError(
                        f"{name}:{exc.lineno}: not JSON ({exc.msg} at column {exc.colno})"
                    ) from exc
                raise ValueError(
                    f"{name}:{number}: not a JSON line ({bad.msg} at column {bad.colno})"
                ) from bad
        return items, True
    if isinstance(document, dict) and isinstance(document.get("tools"), list):
        document = document["tools"]
    if not isinstance(document, list):
        return [(name, document)], False
    return [(f"{name}: item {index}", item) for index, item in enumerate(document)], False


def _definitions(path: str) -> tuple[list[tuple[str, Any]], bool]:
    """`_read` of a file of tool definitions, which must hold some: nothing but blank lines
    is an empty or truncated file (an explicit `[]` is not), which `convert` converted to
    nothing, exit 0, as if that were the answer, and `check-args` blamed the rows for naming
    none of its tools."""
    items, lines = _read(path)
    if lines and not items:
        name = "<stdin>" if path == "-" else path
        raise ValueError(f"{name}: empty: no tool definitions (expected JSON, or JSON lines)")
    return items, lines


def _import(importer: Any, where: str, definition: Any, strict: bool) -> Any:
    """One definition imported, its input schema valid JSON Schema, or a ValueError that says
    `where` the item is and what is wrong."""
    from ..dialects import NotAFunction
    from ..schema.validate import SchemaError, compile_validator

    if not isinstance(definition, dict):
        kind = type(definition).__name__
        raise ValueError(f"{where} is a {kind}, not a tool definition (a JSON object)")
    try:
        converted = importer.import_tool(definition, strict=strict)
    except NotAFunction as exc:
        raise ValueError(f"{where}: {exc}") from exc
    except KeyError as exc:
        raise ValueError(f"{where} has no {exc} key, which {importer.name} requires") from exc
    except (AttributeError, TypeError) as exc:
        raise ValueError(
            f"{where} is not a tool definition in the {importer.name} format ({exc})"
        ) from exc
    try:  # vendors reject such a schema, and no argument can be checked against it
        compile_validator(converted.value.input_schema)
    except SchemaError as exc:
        raise ValueError(
            f"{where} ({converted.value.name}): {exc} (is it in the {importer.name} format?)"
        ) from exc
    return converted


def convert(
    definitions: list[Any],
    source: str,
    targets: list[str],
    *,
    strict: bool = False,
    where: Sequence[str] = (),
) -> dict[str, Any]:
    """Convert definitions from `source` to each target; the report `--json` prints.

    `where` names each definition in error messages (default: `item N`).

    Raises:
        LossError: `strict` is true and a conversion lost something.
        ConfigurationError: an unknown format name.
        ValueError: an item is not a tool definition, or its schema is not valid JSON Schema.
    """
    from ..dialects import get_dialect, get_importer
    from ..dialects.report import prefixed

    importer = get_importer(source)
    where = where or [f"item {index}" for index in range(len(definitions))]
    imported = [_import(importer, w, d, strict) for w, d in zip(where, definitions, strict=True)]
    report: dict[str, Any] = {
        "from": source,
        "count": len(definitions),
        "import_lossless": sum(1 for c in imported if c.lossless),
        "formats": {},
    }
    for target in targets:
        dialect = get_dialect(target)
        items = []
        by_keyword: Counter[str] = Counter()
        lossless = 0
        each = dialect.export_each([spec.value for spec in imported])
        for index, (spec, exported) in enumerate(zip(imported, each, strict=True)):
            exported.check(strict)
            losses: list[Loss] = [*prefixed("/import", spec.losses), *exported.losses]
            lossless += not losses
            by_keyword.update(f"{loss.keyword}:{loss.action.value}" for loss in losses)
            items.append(
                {
                    "index": index,
                    "name": spec.value.name,
                    "definition": exported.value,
                    "losses": [loss.to_dict() for loss in losses],
                }
            )
        report["formats"][target] = {
            "converted": len(items),
            "lossless": lossless,
            "lossy": len(items) - lossless,
            "losses_by_keyword": dict(by_keyword.most_common()),
            "items": items,
        }
    return report


def _fail(message: str, code: int = 2) -> int:
    print(f"toolkeeper dialects: {message}", file=sys.stderr)
    return code


def _run(args: argparse.Namespace) -> int:
    from ..core.errors import ConfigurationError
    from ..dialects import LossError

    try:
        items, lines = _definitions(args.file)
        report = convert(
            [item for _, item in items],
            args.source,
            args.targets,
            strict=args.strict,
            where=[where for where, _ in items],
        )
    except LossError as exc:
        return _fail(str(exc), 1)
    except (ConfigurationError, ValueError, KeyError, TypeError) as exc:
        return _fail(str(exc))
    if args.json:
        json.dump(report, sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    for target, result in report["formats"].items():
        definitions_out = [item["definition"] for item in result["items"]]
        if lines:
            for definition in definitions_out:
                print(json.dumps(definition, ensure_ascii=False))
        else:
            print(json.dumps(definitions_out, ensure_ascii=False, indent=2))
        for item in result["items"]:
            for loss in item["losses"]:
                print(
                    f"{target} #{item['index']} {item['name']}: {loss['pointer'] or '/'} "
                    f"{loss['keyword']} {loss['action']}: {loss['reason']}",
                    file=sys.stderr,
                )
        print(
            f"{target}: {result['converted']} converted, {result['lossless']} without loss",
            file=sys.stderr,
        )
    return 0


def _check_args(args: argparse.Namespace) -> int:
    from ..core.errors import ConfigurationError
    from ..dialects import get_importer
    from ..dialects.argcheck import check_arguments

    try:
        importer = get_importer(args.source)
        tools, _ = _definitions(args.tools)
        specs = {}
        for where, tool in tools:
            spec = _import(importer, where, tool, False).value
            if "id" not in tool:
                raise ValueError(f"{where}: no 'id' field: rows name their tool by its id")
            specs[str(tool["id"])] = spec
        rows = []
        for where, row in _read(args.args)[0]:
            if not isinstance(row, dict):
                raise ValueError(f"{where}: expected a JSON object, found {type(row).__name__}")
            rows.append(row)
    except (ConfigurationError, ValueError) as exc:
        return _fail(str(exc))
    if not rows:
        return _fail(f"{args.args}: no rows")
    if not any(str(row.get("tool_id")) in specs for row in rows):
        return _fail(
            f"no row of {args.args} names a tool of {args.tools} (by tool_id): "
            "do the files belong together?"
        )
    report = check_arguments(specs, rows, coerce_first=args.coerce)
    json.dump(report.to_dict(), sys.stdout)
    sys.stdout.write("\n")
    return 0 if report.mutations_pointed == report.mutations else 1
