"""The API reference (docs/reference/, built by `make docs`) covers every public package, and
every name a package exports has a docstring to show there."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
REFERENCE = ROOT / "docs" / "reference"
UNDOCUMENTED_PACKAGES = {
    "toolkeeper.bench",  # the benchmarks behind `toolkeeper bench` (the CLI guide)
    "toolkeeper.cli",  # `main`, the command itself (the CLI guide)
    "toolkeeper.executor.gates",  # the executor's own modules, one per gate
}


def module_path(module: str) -> Path:
    base = SRC.joinpath(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


@cache
def tree(module: str) -> ast.Module:
    return ast.parse(module_path(module).read_text())


def exported(module: str) -> list[str]:
    for node in tree(module).body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                assert node.value is not None
                return list(ast.literal_eval(node.value))
    return []


def statements(module: str) -> list[ast.stmt]:
    """Module-level statements, with those of `try` and `if TYPE_CHECKING` blocks (an
    extra's imports)."""
    found: list[ast.stmt] = []
    for node in tree(module).body:
        found.extend(node.body if isinstance(node, ast.Try | ast.If) else [node])
    return found


def documented(module: str, name: str) -> bool:
    """Whether `name`, defined in `module` or imported into it, has a docstring in the source
    (a class's or function's own; a constant's or alias's string right after it)."""
    body = statements(module)
    for position, node in enumerate(body):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name == name:
                return bool(ast.get_docstring(node))
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                after = body[position + 1] if position + 1 < len(body) else None
                return (
                    isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)
                )
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    package = module if module_path(module).name == "__init__.py" else None
                    base = (package or module.rpartition(".")[0]).split(".")
                    origin = ".".join(base[: len(base) - node.level + 1])
                    source = f"{origin}.{node.module}" if node.module else origin
                    if node.level == 0:
                        source = str(node.module)
                    if not module_path(source).exists():
                        return True  # (a third-party name re-exported: not ours to document)
                    return documented(source, alias.name)
    raise AssertionError(f"{module}.{name} is exported but not found in its source")


def public_packages() -> list[str]:
    found = []
    for init in sorted((SRC / "toolkeeper").rglob("__init__.py")):
        module = ".".join(init.parent.relative_to(SRC).parts)
        if exported(module) and module not in UNDOCUMENTED_PACKAGES:
            found.append(module)
    return found


def rendered() -> dict[str, list[str]]:
    """The objects each reference page renders (`::: target`), by page."""
    return {
        page.stem: re.findall(r"^::: (\S+)", page.read_text(), re.MULTILINE)
        for page in sorted(REFERENCE.glob("*.md"))
    }


def test_every_public_package_has_a_reference_page_in_the_nav() -> None:
    targets = {target for page in rendered().values() for target in page}
    missing = [package for package in public_packages() if package not in targets]
    assert not missing, f"add a page to docs/reference/ (and mkdocs.yml) for {missing}"
    nav = (ROOT / "mkdocs.yml").read_text()
    assert all(f"reference/{page}.md" in nav for page in rendered())


def test_every_exported_name_of_a_rendered_module_has_a_docstring() -> None:
    modules = {t for page in rendered().values() for t in page if module_path(t).exists()}
    assert "toolkeeper" in modules and "toolkeeper.observe.otel" in modules
    bare = [f"{m}.{n}" for m in sorted(modules) for n in exported(m) if not documented(m, n)]
    assert not bare, f"public names without a docstring: {bare}"


@pytest.mark.slow  # (mkdocs reads every module: about 30 s)
def test_the_site_builds_strict_and_renders_every_exported_name(tmp_path: Path) -> None:
    pytest.importorskip("mkdocstrings", reason='the docs extra: pip install -e ".[docs]"')
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for page, targets in rendered().items():
        html = (tmp_path / "reference" / f"{page}.html").read_text()
        ids = set(re.findall(r'id="([^"]+)"', html))
        for target in targets:
            if not module_path(target).exists():
                assert target in ids  # (one object rendered on its own)
                continue
            for name in exported(target):
                # (a name that is also its submodule's is rendered on its own, as mod.name.name)
                assert {f"{target}.{name}", f"{target}.{name}.{name}"} & ids, (page, name)
    assert not re.search(r'(src|href)="(https?:)?//[^"]*\.(js|css)"', html)
