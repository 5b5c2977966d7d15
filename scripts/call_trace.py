"""How far one tool call travels through toolkeeper's source, and how big the code it passes is.

    PYTHONPATH=src python scripts/call_trace.py [--json] [--path]

The trace: a `Keeper` on a memory ledger, acting for a principal with every grant, holds one
read-only and one write tool (plain async functions). Each is called once to warm up, then one
fresh call of each (a new call id) is traced with `sys.settrace` from `keeper.execute(ToolCall)`
to its result. Only events in frames whose code lives under `src/toolkeeper/` count; the
tool, the standard library, anyio and code generated at run time (file `<string>`) do not.
Only the calling thread (the event loop's) is traced.

- files entered: distinct toolkeeper files with a line executed;
- switches: consecutive traced events (call, line, return, exception) in two different files,
  so a call into another file and the return from it count one each;
- functions entered: distinct toolkeeper functions (file and qualified name) called;
- files in the order first entered.

The sizes: the cyclomatic complexity and length of the most complex functions under
`src/toolkeeper/executor/`, and the lines of `keeper.py` and of the largest modules. The
complexity is radon's if radon is installed, else computed here with `ast` by radon's rules
(the two agree on every function radon lists).

The script uses toolkeeper's public API only, so it measures any executor behind `Keeper`.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import importlib
import importlib.util
import itertools
import json
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import FrameType
from typing import Any

import toolkeeper
from toolkeeper import CallStatus, Keeper, Principal, ToolCall

PACKAGE = Path(toolkeeper.__file__).parent
ROOT = f"{PACKAGE}{os.sep}"
"""Where the traced code lives, spelled as the interpreter names it in `co_filename`."""
TOP = 10
"""How many functions and modules the size report lists."""

Event = tuple[str, str, str]
"""A traced event: its kind, the file (relative to the package) and the function's qualname."""


# -- the trace ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Trace:
    """One traced call."""

    tool: str
    """The tool called."""
    effect: str
    """Its declared effect."""
    status: str
    """The call's result status."""
    files_entered: int
    """Distinct toolkeeper files with a line executed."""
    switches: int
    """Consecutive traced events (call, line, return, exception) in different files."""
    functions_entered: int
    """Distinct toolkeeper functions called."""
    events: int
    """Traced events in toolkeeper files."""
    switches_lines_only: int
    """Switches counted over line events alone (a variant, for comparison)."""
    switches_calls_returns_only: int
    """Switches counted over call and return events alone (a variant, for comparison)."""
    files: list[str]
    """The files entered, in the order first entered."""
    path: list[str]
    """The files in the order execution moved through them (one entry per stay)."""


def _code_name(frame: FrameType) -> str:
    code = frame.f_code
    return str(getattr(code, "co_qualname", code.co_name))


def _record(events: list[Event]) -> Callable[[FrameType, str, Any], Any]:
    """A global trace function that appends the events of toolkeeper frames to `events`."""

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        events.append((event, frame.f_code.co_filename[len(ROOT) :], _code_name(frame)))
        return local

    def global_(frame: FrameType, event: str, arg: Any) -> Any:
        filename = frame.f_code.co_filename
        if not filename.startswith(ROOT):
            return None
        events.append((event, filename[len(ROOT) :], _code_name(frame)))
        return local

    return global_


def _switches(events: Iterable[Event]) -> int:
    files = [file for _, file, _ in events]
    return sum(1 for a, b in itertools.pairwise(files) if a != b)


def _path(events: list[Event]) -> list[str]:
    path: list[str] = []
    for _, file, _ in events:
        if not path or path[-1] != file:
            path.append(file)
    return path


def _summary(tool: str, effect: str, status: str, events: list[Event]) -> Trace:
    lines = [e for e in events if e[0] == "line"]
    return Trace(
        tool=tool,
        effect=effect,
        status=status,
        files_entered=len({file for _, file, _ in lines}),
        switches=_switches(events),
        functions_entered=len({(file, name) for kind, file, name in events if kind == "call"}),
        events=len(events),
        switches_lines_only=_switches(lines),
        switches_calls_returns_only=_switches(e for e in events if e[0] in ("call", "return")),
        files=list(dict.fromkeys(file for _, file, _ in lines)),
        path=_path(events),
    )


async def _traces() -> list[Trace]:
    keeper = Keeper(ledger="memory://", principal=Principal(id="local", grants=frozenset({"*"})))

    @keeper.tool(effect="read_only")
    async def get_order(order_id: str) -> dict[str, str]:
        """Look an order up.

        Args:
            order_id: The order's id.
        """
        return {"order_id": order_id, "status": "open"}

    @keeper.tool(effect="write")
    async def ship_order(order_id: str) -> str:
        """Ship an order.

        Args:
            order_id: The order's id.
        """
        return f"shipped {order_id}"

    tools = [("get_order", "read_only"), ("ship_order", "write")]
    traces = []
    async with keeper:
        for name, _ in tools:
            call = ToolCall(call_id=f"warm-{name}", name=name, arguments={"order_id": "A1"})
            await _succeeded(keeper, call)
        for name, effect in tools:
            call = ToolCall(call_id=f"traced-{name}", name=name, arguments={"order_id": "A2"})
            events: list[Event] = []
            sys.settrace(_record(events))
            try:
                result = await keeper.execute(call)
            finally:
                sys.settrace(None)
            _check(call, result.status)
            traces.append(_summary(name, effect, result.status.value, events))
    return traces


async def _succeeded(keeper: Keeper, call: ToolCall) -> None:
    _check(call, (await keeper.execute(call)).status)


def _check(call: ToolCall, status: CallStatus) -> None:
    if status is not CallStatus.SUCCEEDED:
        raise SystemExit(f"call {call.call_id} to {call.name} ended {status.value}, not succeeded")


# -- the sizes ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Function:
    """One function's size."""

    name: str
    """`module.py:Class.function` (nested functions as `outer.<locals>.inner`)."""
    complexity: int
    """Cyclomatic complexity, by radon's rules (nested functions' bodies not included)."""
    lines: int
    """Lines from `def` to the function's last line (its decorators not included)."""


class _Complexity(ast.NodeVisitor):
    """Decision points of one function body, by radon's rules, nested functions left out."""

    def __init__(self) -> None:
        self.points = 0

    def generic_visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.Try):
            self.points += len(node.handlers) + bool(node.orelse)
        elif isinstance(node, ast.BoolOp):
            self.points += len(node.values) - 1
        elif isinstance(node, ast.If | ast.IfExp):
            self.points += 1
        elif isinstance(node, ast.For | ast.AsyncFor | ast.While):
            self.points += 1 + bool(node.orelse)
        elif isinstance(node, ast.comprehension):
            self.points += 1 + len(node.ifs)
        elif isinstance(node, ast.Match):
            wildcard = any(
                isinstance(c.pattern, ast.MatchAs) and c.pattern.pattern is None for c in node.cases
            )
            self.points += max(0, len(node.cases) - wildcard)
        super().generic_visit(node)

    def visit_Assert(self, node: ast.Assert) -> None:
        self.points += 1  # (radon does not look inside an assert)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        return None

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        return None

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        return None


def _functions_ast(file: Path, label: str) -> list[Function]:
    found: list[Function] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visitor = _Complexity()
                for statement in child.body:
                    visitor.visit(statement)
                end = child.end_lineno or child.lineno
                found.append(
                    Function(
                        name=f"{label}:{prefix}{child.name}",
                        complexity=1 + visitor.points,
                        lines=end - child.lineno + 1,
                    )
                )
                walk(child, f"{prefix}{child.name}.<locals>.")
            else:
                walk(child, prefix)

    walk(ast.parse(file.read_text(), str(file)), "")
    return found


def _radon_complexity(file: Path, label: str) -> dict[str, int]:
    """Radon's complexity of each function and method in `file`, by the names `_functions_ast`
    gives them (radon does not list the methods of a class defined in a function)."""
    found: dict[str, int] = {}

    def add(block: Any, prefix: str) -> None:
        found[f"{label}:{prefix}{block.name}"] = block.complexity
        for inner in block.closures:
            add(inner, f"{prefix}{block.name}.<locals>.")

    for block in importlib.import_module("radon.complexity").cc_visit(file.read_text()):
        if hasattr(block, "closures"):  # a function or a method, not a class
            add(block, f"{block.classname}." if block.is_method else "")
    return found


def _functions(file: Path, label: str, radon: bool) -> list[Function]:
    functions = _functions_ast(file, label)
    if not radon:
        return functions
    by_radon = _radon_complexity(file, label)
    return [replace(f, complexity=by_radon.get(f.name, f.complexity)) for f in functions]


def _sizes() -> dict[str, Any]:
    radon = importlib.util.find_spec("radon") is not None
    functions = [
        f
        for file in sorted((PACKAGE / "executor").rglob("*.py"))
        for f in _functions(file, str(file.relative_to(PACKAGE)), radon)
    ]
    functions.sort(key=lambda f: (-f.complexity, -f.lines, f.name))
    modules = {
        str(file.relative_to(PACKAGE)): len(file.read_text().splitlines())
        for file in PACKAGE.rglob("*.py")
    }
    largest = sorted(modules.items(), key=lambda item: (-item[1], item[0]))
    return {
        "complexity_by": "radon" if radon else "ast (radon's rules)",
        "executor_functions": [asdict(f) for f in functions[:TOP]],
        "executor_longest_function": asdict(max(functions, key=lambda f: (f.lines, f.name))),
        "keeper_py_lines": modules.get("keeper.py"),
        "largest_modules": [{"module": m, "lines": n} for m, n in largest[:TOP]],
        "modules_over_600_lines": sum(1 for n in modules.values() if n > 600),
    }


# -- output ------------------------------------------------------------------------------------


def _text(traces: list[Trace], sizes: dict[str, Any], show_path: bool) -> str:
    out = []
    for t in traces:
        out.append(
            f"{t.tool} ({t.effect}, {t.status}): files entered {t.files_entered}, "
            f"switches {t.switches}, functions entered {t.functions_entered} "
            f"[events {t.events}; switches over lines only {t.switches_lines_only}, "
            f"over calls and returns only {t.switches_calls_returns_only}]"
        )
        out.append("  files: " + " ".join(t.files))
        if show_path:
            out.append("  path: " + " > ".join(t.path))
    out.append("")
    out.append(f"executor functions by cyclomatic complexity ({sizes['complexity_by']}):")
    out.extend(
        f"  {f['complexity']:4}  {f['lines']:4} lines  {f['name']}"
        for f in sizes["executor_functions"]
    )
    longest = sizes["executor_longest_function"]
    out.append(
        f"  longest: {longest['name']}, {longest['lines']} lines, "
        f"complexity {longest['complexity']}"
    )
    out.append(f"keeper.py: {sizes['keeper_py_lines']} lines")
    out.append(f"largest modules ({sizes['modules_over_600_lines']} over 600 lines):")
    out.extend(f"  {m['lines']:5}  {m['module']}" for m in sizes["largest_modules"])
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--path", action="store_true", help="also print each call's file path")
    args = parser.parse_args(argv)
    traces = asyncio.run(_traces())
    sizes = _sizes()
    if args.json:
        report = {
            "python": sys.version.split()[0],
            "calls": [asdict(t) for t in traces],
            "sizes": sizes,
        }
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        sys.stdout.write(_text(traces, sizes, args.path))


if __name__ == "__main__":
    main()
