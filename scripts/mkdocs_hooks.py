"""MkDocs hooks for `make docs` (named in mkdocs.yml): the site builds from what docs/ holds.

- A link from a page to a file of the repository outside docs/ (`../examples/deploy/...`,
  which works on a code host) becomes that path as code: the site has no copy of the file.
- A fence's words after the language (```` ```python no-test ````, ```` ```toml file=x.toml ````,
  which tests/test_docs_code.py reads) are dropped: Python-Markdown takes a fence with them
  for text.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_FENCE_WORDS = re.compile(r"^([ \t]*(?:`{3,}|~{3,})[\w+-]+)[ \t]+[^`\n]*$", re.M)
_OUTSIDE = re.compile(r"\[([^\]]+)\]\((\.\./[^)\s#]+)\)")


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

    return _OUTSIDE.sub(outside, _FENCE_WORDS.sub(r"\1", markdown))
