"""MkDocs hooks for `make docs` (named in mkdocs.yml): the site builds from what docs/ holds.

- A nav entry whose page is not in docs/ is left out (the guides arrive one by one), so the
  nav can list every page the site is meant to have and `mkdocs build --strict` still passes.
- A link from a page to a file of the repository outside docs/ (`../examples/deploy/...`,
  which works on a code host) becomes that path as code: the site has no copy of the file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_OUTSIDE = re.compile(r"\[([^\]]+)\]\((\.\./[^)\s#]+)\)")


def _present(entries: list[Any], docs: Path) -> list[Any]:
    kept: list[Any] = []
    for entry in entries:
        if isinstance(entry, dict):
            ((title, target),) = entry.items()
            if isinstance(target, list):
                inner = _present(target, docs)
                if inner:
                    kept.append({title: inner})
            elif "://" in str(target) or (docs / str(target)).is_file():
                kept.append(entry)
        elif "://" in str(entry) or (docs / str(entry)).is_file():
            kept.append(entry)
    return kept


def on_config(config: Any) -> Any:
    if config.nav:
        config.nav = _present(config.nav, Path(config.docs_dir))
    return config


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    docs = Path(config.docs_dir)
    folder = (docs / page.file.src_path).parent

    def outside(match: re.Match[str]) -> str:
        target = (folder / match.group(2)).resolve()
        if docs.resolve() in target.parents or not target.exists():
            return match.group(0)  # (inside docs/, or broken: mkdocs reports it)
        root = docs.resolve().parent
        text = match.group(1)
        path = target.relative_to(root).as_posix()
        return f"{text} (`{path}`)" if text.strip("`") != path else f"`{path}`"

    return _OUTSIDE.sub(outside, markdown)
