"""Every fenced code block of README.md and docs/*.md runs, or parses, in a test.

A block's info string is a language, then optional words. What each means here:

- ```` ```python ````: executed as `__main__` in a fresh namespace, on its own.
- ```` ```python file=NAME ```` (or ```` ```toml file=NAME ````): written to NAME, for a later
  block of the page to use (`python NAME`, a configuration's `file = "NAME"`); a python one is
  not executed by itself.
- ```` ```toml ````: loaded by the project's own loader, `toolkeeper.config.load_config`.
  Environment variables it names (`token_env = "X"`, `${X}`) are set to test values first.
- ```` ```sh ````: run by `bash -e -o pipefail`; the running interpreter's `bin` comes first
  on `PATH` (as in an activated shell), and `.venv` links to the running virtual environment,
  so `source .venv/bin/activate` works as in a checkout, as does `examples/`. It must exit 0.
- ```` ```text ````: not code (output, diagrams, file trees); nothing to run.
- `no-test` after the language: code that cannot run in a test (it serves until stopped, needs
  a network, an API key or `make`). The framework examples of docs/integrations.md are marked
  so here and run by tests/integrations/test_docs.py.

Any other info string fails, so that every block is one of these on purpose. A page's blocks
run in page order, in one temporary working directory of its own; each page's test asserts
that it ran every block not marked `no-test` or `text`.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

import pytest
from pydantic import BaseModel

from toolkeeper import cli
from toolkeeper.config import GatewayConfig, load_config

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LANGUAGES = {"python", "sh", "toml", "text"}
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.S | re.M)
ENV_NAME = re.compile(r'token_env\s*=\s*"([A-Za-z_][A-Za-z0-9_]*)"|\$\{([A-Za-z_][A-Za-z0-9_]*)\}')


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    flags: frozenset[str]
    file: str | None
    code: str

    @property
    def where(self) -> str:
        name = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page
        return f"{name}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.language != "text" and "no-test" not in self.flags


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of `page`, in order; an info string outside the convention fails."""
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        words = match.group(1).split()
        line = text.count("\n", 0, match.start()) + 1
        assert words, f"{page.name}:{line}: a block without a language (see this test's docstring)"
        language, flags = words[0], frozenset(words[1:])
        files = [f.removeprefix("file=") for f in flags if f.startswith("file=")]
        unknown = flags - {"no-test"} - {f"file={f}" for f in files}
        assert language in LANGUAGES and not unknown, f"{page.name}:{line}: ```{match.group(1)}"
        found.append(Block(page, line, language, flags, files[0] if files else None, match[2]))
    return found


def run_python(block: Block) -> None:
    exec(compile(block.code, block.where, "exec"), {"__name__": "__main__"})


def run_toml(block: Block, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for token_env, variable in ENV_NAME.findall(block.code):
        name = token_env or variable
        monkeypatch.setenv(name, f"docs-test-{name}-0123456789abcdef")  # each its own
    path = folder / (block.file or "toolkeeper.toml")
    path.write_text(block.code)
    load_config(path)


def run_sh(block: Block, folder: Path) -> None:
    if not (folder / "examples").exists():
        (folder / "examples").symlink_to(ROOT / "examples")
    venv = Path(sys.prefix)
    if (venv / "bin" / "activate").exists() and not (folder / ".venv").exists():
        (folder / ".venv").symlink_to(venv)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("TOOLKEEPER_LEDGER", None)
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block.code],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{block.where}: exit {done.returncode}\n{output}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_code_block_of_the_page_runs(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TOOLKEEPER_LEDGER", raising=False)
    page_blocks = blocks(page)
    ran = []
    for block in page_blocks:
        if not block.runs:
            continue
        if block.file is not None and block.language == "python":
            (tmp_path / block.file).write_text(block.code)
            later = page_blocks[page_blocks.index(block) + 1 :]
            assert any(block.file in b.code for b in later), f"{block.where}: {block.file} unused"
        elif block.language == "python":
            run_python(block)
        elif block.language == "toml":
            run_toml(block, tmp_path, monkeypatch)
        else:
            run_sh(block, tmp_path)
        ran.append(block)
    assert ran == [b for b in page_blocks if b.runs]


def test_a_broken_block_fails(tmp_path: Path) -> None:
    """The runners above notice a block that breaks (so a broken snippet fails its page)."""
    page = tmp_path / "page.md"
    page.write_text("```python\nprint(undefined_name)\n```\n\n```sh\ntoolkeeper no-such\n```\n")
    python, sh = blocks(page)
    with pytest.raises(NameError):
        run_python(python)
    with pytest.raises(AssertionError, match="exit 2"):
        run_sh(sh, tmp_path)
    page.write_text("```py\nx = 1\n```\n")
    with pytest.raises(AssertionError, match="```py"):
        blocks(page)


def _models(model: type[BaseModel], seen: set[type[BaseModel]]) -> set[type[BaseModel]]:
    """`model` and every model its fields hold, however nested (lists, dicts, unions)."""
    seen.add(model)
    for field in model.model_fields.values():
        stack: list[object] = [field.annotation]
        while stack:
            kind = stack.pop()
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                if kind not in seen:
                    _models(kind, seen)
            else:
                stack.extend(get_args(kind))
    return seen


def test_the_configuration_reference_names_every_key() -> None:
    """docs/configuration.md has a row for every key of every table of `toolkeeper.toml`."""
    page = (ROOT / "docs" / "configuration.md").read_text()
    missing = [
        f"{model.__name__}.{name}"
        for model in _models(GatewayConfig, set())
        for name in model.model_fields
        if f"| `{name}` |" not in page
    ]
    assert missing == []


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...]
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command under `parser`, by its words (`("ledger", "list")`)."""
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found += _commands(child, (*path, name))
    return found


def test_the_cli_reference_names_every_command_and_option() -> None:
    """docs/cli.md has a heading for every command and a row for each of its options."""
    page = (ROOT / "docs" / "cli.md").read_text()
    sections = re.split(r"^#{2,3} ", page, flags=re.M)
    missing = []
    for path, parser in _commands(cli._parser(None, every=True), ())[1:]:
        heading = f"`toolkeeper {' '.join(path)}`\n"
        section = next((s for s in sections if s.startswith(heading)), None)
        if section is None:
            missing.append(heading.strip())
            continue
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            name = ", ".join(action.option_strings) or action.metavar or action.dest
            if f"| `{name}` |" not in section:  # said as the row to add under the heading
                missing.append(f"{heading.strip()}: | `{name}` | {action.help or ''} |")
    assert missing == []


LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, as GitHub and mkdocs make them."""
    headings = re.findall(r"^#+ (.+)$", FENCE.sub("", page.read_text()), re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_of_the_page_leads_somewhere(page: Path) -> None:
    """Each link to a file names one that exists, and each `#anchor` a heading of its page."""
    broken = []
    for link in LINK.findall(page.read_text()):
        if "://" in link or link.startswith("mailto:"):
            continue
        path, _, anchor = link.partition("#")
        target = page.parent / path if path else page
        if not target.exists() or (
            anchor and target.suffix == ".md" and anchor not in _anchors(target)
        ):
            broken.append(link)
    assert broken == []
