"""What toolkeeper imports is installed by what it declares.

A fresh `pip install toolkeeper` (or `make run`, which installs the `examples` extra) has only
the declared distributions and what they require. The test environment has far more (the test
and bench extras), so an undeclared import passes every other test and fails on a user's
machine. Here each entry point is imported in a fresh interpreter, and every third-party module
it loads must come from the closure of the distributions its install declares.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _closure(requirements: list[str]) -> set[str]:
    """The distributions `requirements` install: themselves and what they require."""
    todo = [Requirement(r) for r in requirements]
    seen: set[str] = set()
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name == "toolkeeper":
            todo.extend(
                Requirement(r)
                for extra in req.extras
                for r in PROJECT["optional-dependencies"][extra]
            )
            continue
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(req.name) or []
        except metadata.PackageNotFoundError:
            continue
        extras = [*sorted(req.extras), ""]
        for raw in requires:
            sub = Requirement(raw)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in extras):
                todo.append(sub)
    return seen


def _loaded(code: str) -> set[str]:
    """Top-level modules that running `code` adds to a bare interpreter's."""
    script = (
        "import json, sys\n"
        "before = {m.split('.')[0] for m in sys.modules}\n"
        f"{code}\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} - before)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


_OPTIONAL = {
    "watchfiles": "uvicorn imports it for --reload when it happens to be installed",
}
"""Modules a dependency imports only if they are present (inside try/except ImportError)."""


def _undeclared(modules: set[str], allowed: set[str]) -> dict[str, list[str]]:
    owners = metadata.packages_distributions()
    missing: dict[str, list[str]] = {}
    for module in sorted(modules):
        if module in sys.stdlib_module_names or module == "toolkeeper" or module in _OPTIONAL:
            continue
        dists = sorted({canonicalize_name(d) for d in owners.get(module, [])})
        if dists and not set(dists) & allowed:
            missing[module] = dists
    return missing


def test_the_core_install_has_everything_the_core_imports() -> None:
    loaded = _loaded(
        "import toolkeeper, toolkeeper.keeper, toolkeeper.executor.executor\n"
        "import toolkeeper.ledger.memory, toolkeeper.ledger.sqlite, toolkeeper.dialects\n"
        "import contextlib, io\n"
        "from toolkeeper.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['demo'])"
    )
    assert _undeclared(loaded, _closure(PROJECT["dependencies"])) == {}


def test_make_run_installs_everything_the_gateway_imports() -> None:
    pytest.importorskip("mcp")
    loaded = _loaded(
        "import toolkeeper.cli.serve, toolkeeper.server, toolkeeper.config\n"
        "import toolkeeper.connectors.mcp, toolkeeper.server.transports\n"
        "import toolkeeper.retrieval.selector, toolkeeper.retrieval.embed\n"
        "import toolkeeper.retrieval.keyword, toolkeeper.retrieval.dense\n"
        "import toolkeeper.retrieval.tokens"
    )
    declared = _closure([*PROJECT["dependencies"], "toolkeeper[examples]"])
    assert _undeclared(loaded, declared) == {}


def test_the_check_sees_an_undeclared_import() -> None:
    # The guard itself: a module the core does not declare is reported with its distribution.
    assert _undeclared({"trio"}, _closure(PROJECT["dependencies"])) == {"trio": ["trio"]}
