"""A plain progress bar on stderr for long evaluation runs (no dependency)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import TextIO, TypeVar

__all__ = ["progress"]

T = TypeVar("T")


def progress(
    items: Iterable[T],
    *,
    total: int,
    label: str,
    enabled: bool = True,
    stream: TextIO | None = None,
) -> Iterator[T]:
    """Yield `items`, redrawing `label [####....] n/total` on stderr about 10 times a second.

    The bar is drawn on a terminal only: into a file or a pipe, where redrawing would pile up
    lines, one line at the end says how many items took how long.
    """
    out = stream or sys.stderr
    drawn = enabled and out.isatty()
    last = 0.0
    start = time.monotonic()
    done = 0
    for done, item in enumerate(items, start=1):
        yield item
        now = time.monotonic()
        if drawn and (now - last > 0.1 or done == total):
            last = now
            width = 30
            filled = int(width * done / total) if total else width
            rate = done / (now - start) if now > start else 0.0
            out.write(
                f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {rate:.0f}/s"
            )
            out.flush()
    if drawn:
        out.write("\n")
    elif enabled:
        out.write(f"{label}: {done}/{total} in {time.monotonic() - start:.1f} s\n")
    if enabled:
        out.flush()
