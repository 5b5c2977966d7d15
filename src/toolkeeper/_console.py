"""What the command-line front ends share: a count option type and a plain text table.

What it is: the pieces `toolkeeper` sub-commands, the benches (`server.bench`,
`eval.bench_retrieval`) and the demo use to read numbers from a command line and show rows to
a person, with no third-party dependency. What it is not: a command (see `toolkeeper.cli`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

__all__ = ["CELL_WIDTH", "count", "render_table"]


CELL_WIDTH = 60
"""Characters of a cell at most: a longer value is cut there, with an ellipsis."""


def count(minimum: int) -> Callable[[str], int]:
    """An argparse `type` for a whole number of at least `minimum` (a usage error otherwise)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected a count of {minimum} or more, not {text!r}")
        return value

    return parse


def _cell(value: object, width: int = CELL_WIDTH) -> str:
    # here, not at the top: `toolkeeper --help` imports this module, and `toolkeeper.core` is
    # not light
    from .core._visible import visible

    text = "" if value is None else str(value)
    if not text.isprintable():
        text = text.replace("\n", " ").replace("\t", " ")  # (a line break in a cell: a space)
    # What a model proposed (a tool name, a call id) must not move the cursor, recolour,
    # rewrite or hide part of the table a person reads.
    text = visible(text)
    return text if len(text) <= width else text[: width - 1] + "…"


def render_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Rows under headers, columns padded to their widest cell (cells cut at `CELL_WIDTH`)."""
    cells = [[_cell(h) for h in headers], *[[_cell(v) for v in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
