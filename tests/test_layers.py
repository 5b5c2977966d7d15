"""Imports run one way: a lower layer never imports a higher one.

Every `import` in `src/toolkeeper` counts, at the top of a module or inside a function or an
`if TYPE_CHECKING:` block.
"""

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import toolkeeper

SRC = Path(toolkeeper.__file__).parent

ASSEMBLERS = (
    "toolkeeper.agent",
    "toolkeeper.bench",
    "toolkeeper.cli",
    "toolkeeper.demo",
    "toolkeeper.eval",
    "toolkeeper.integrations",
    "toolkeeper.keeper",
    "toolkeeper.server",
)
"""What puts the runtime together or drives it (the Keeper, the agent loop, the server, the
command line, the demo and the benches)."""

RUNTIME = (
    "toolkeeper._console",
    "toolkeeper.catalog",
    "toolkeeper.config",
    "toolkeeper.connectors",
    "toolkeeper.core",
    "toolkeeper.dialects",
    "toolkeeper.executor",
    "toolkeeper.ledger",
    "toolkeeper.observe",
    "toolkeeper.policy",
    "toolkeeper.retrieval",
    "toolkeeper.schema",
)
"""The layers the assemblers are built from."""

MUST_NOT_IMPORT: dict[str, tuple[str, ...]] = {
    **{layer: ASSEMBLERS for layer in RUNTIME},
    "toolkeeper.core": ("toolkeeper",),  # only itself and the standard library
    "toolkeeper._console": ("toolkeeper",),  # (but core)
    "toolkeeper.ledger": (*ASSEMBLERS, "toolkeeper.executor"),
    "toolkeeper.catalog": (*ASSEMBLERS, "toolkeeper.connectors"),
}
"""A module, or every module of a package, and what none of them imports (a package stands
for its modules; a module may always import its own package and `toolkeeper.core`, unless it
is `toolkeeper.core` itself)."""

MAY_IMPORT_THE_CLI = ("toolkeeper.cli", "toolkeeper.__main__")
"""The only modules that import `toolkeeper.cli`: the command line is the top."""


def _name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.AST, package: str) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join([*base, *([node.module] if node.module else [])])
        else:
            module = node.module or ""
        yield module
        yield from (f"{module}.{alias.name}" for alias in node.names)


def _imports() -> dict[str, frozenset[str]]:
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        name = _name(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        found[name] = frozenset(
            imported
            for node in ast.walk(tree)
            for imported in _imported(node, package)
            if _within(imported, "toolkeeper")
        )
    return found


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _unit(name: str) -> str:
    """The top-level package or module of toolkeeper that `name` is in."""
    return ".".join(name.split(".")[:2])


IMPORTS = _imports()


def test_the_walk_sees_imports_inside_functions_and_type_checking_blocks() -> None:
    assert "toolkeeper.policy.redis_limiter" in IMPORTS["toolkeeper.config"]
    assert "toolkeeper.bench.report" in IMPORTS["toolkeeper.cli.bench"]


@pytest.mark.parametrize("layer", sorted(MUST_NOT_IMPORT))
def test_a_layer_imports_nothing_above_it(layer: str) -> None:
    def allowed(imported: str) -> bool:
        own = _within(imported, layer) or (
            layer != "toolkeeper.core" and _within(imported, "toolkeeper.core")
        )
        return own or not any(_within(imported, p) for p in MUST_NOT_IMPORT[layer])

    wrong = {
        (module, imported)
        for module, imports in IMPORTS.items()
        if _within(module, layer)
        for imported in imports
        if not allowed(imported)
    }
    assert sorted(wrong) == []


def test_only_the_command_line_imports_the_command_line() -> None:
    wrong = {
        (module, imported)
        for module, imports in IMPORTS.items()
        if not any(_within(module, top) for top in MAY_IMPORT_THE_CLI)
        for imported in imports
        if _within(imported, "toolkeeper.cli")
    }
    assert sorted(wrong) == []


def test_no_two_packages_import_each_other() -> None:
    edges = {
        (_unit(module), _unit(imported))
        for module, imports in IMPORTS.items()
        for imported in imports
        if _unit(module) != _unit(imported)
    }
    mutual = sorted((a, b) for a, b in edges if (b, a) in edges and a < b)
    assert mutual == []
