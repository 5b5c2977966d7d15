"""docs/dependencies.md says why each runtime dependency is there: a dependency added to
pyproject.toml without a line there fails here."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
DEVELOPMENT = {"bench", "test"}
"""Extras of development tools, summed up in one row rather than listed."""


def test_every_runtime_dependency_and_extra_is_explained() -> None:
    doc = (ROOT / "docs" / "dependencies.md").read_text()
    extras = PROJECT["optional-dependencies"]
    named = [Requirement(r).name for r in PROJECT["dependencies"]]
    for extra, requirements in extras.items():
        assert f"| `{extra}`" in doc, f"extra {extra} has no row"
        if extra not in DEVELOPMENT:
            named += [Requirement(r).name for r in requirements]
    missing = {name for name in named if name != "toolkeeper" and f"`{name}" not in doc}
    assert not missing, f"say why these are needed in docs/dependencies.md: {sorted(missing)}"
    assert "tokenizer.json" in doc and "Apache License 2.0" in doc
    assert (ROOT / "src/toolkeeper/retrieval/minilm/NOTICE").exists()
