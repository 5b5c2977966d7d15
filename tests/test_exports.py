"""Each package's `__all__` is the public API: sorted, complete, and importable."""

import importlib
import pkgutil
import subprocess
import sys

import pytest

import toolkeeper


def _isort_key(name: str) -> tuple[int, str]:
    """ruff's RUF022 order: CONSTANTS, then Classes, then functions."""
    if name.isupper() or (name.upper() == name and "_" in name):
        return (0, name)
    return (1 if name[:1].isupper() else 2, name)


PACKAGES = [
    name for _, name, is_pkg in pkgutil.walk_packages(toolkeeper.__path__, "toolkeeper.") if is_pkg
]


@pytest.mark.parametrize("name", ["toolkeeper", *PACKAGES])
def test_all_is_sorted_and_every_name_exists(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # an optional extra that is not installed
        pytest.skip(str(exc))
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert list(exported) == sorted(exported, key=_isort_key)
    for item in exported:
        assert hasattr(module, item), f"{name}.{item}"


def test_public_names_of_the_top_package_are_exported() -> None:
    for name in toolkeeper.__all__:  # imported on first use
        getattr(toolkeeper, name)
    public = {
        n
        for n, v in vars(toolkeeper).items()
        if not n.startswith("_") and not isinstance(v, type(sys)) and n != "annotations"
    }
    assert public == set(toolkeeper.__all__)


def test_import_toolkeeper_imports_no_optional_extra() -> None:
    code = (
        "import sys, toolkeeper\n"
        "heavy = {'psycopg', 'mcp', 'tantivy', 'onnxruntime', 'numpy', 'openai', 'anthropic',"
        " 'matplotlib', 'uvicorn', 'starlette', 'torch', 'pydantic_ai', 'agents',"
        " 'langchain_core', 'opentelemetry'}\n"
        "print(sorted(heavy & {m.split('.')[0] for m in sys.modules}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_import_toolkeeper_imports_the_api_only_when_used() -> None:
    # so `toolkeeper --help` stays quick
    code = (
        "import sys, toolkeeper\n"
        "print(sorted(m for m in sys.modules if m.startswith('toolkeeper.')))\n"
        "toolkeeper.Keeper\n"
        "print('toolkeeper.keeper' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "True"]
