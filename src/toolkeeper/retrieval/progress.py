"""Progress of long index builds: a bar on a terminal, log lines elsewhere.

What it is: `embed_in_steps`, which embeds many texts in steps and says how far it got — on
stderr as a redrawn bar when stderr is a terminal, else as a log line (logger `toolkeeper`) at
the start and the end. What it is not: an embedder (see `embed`) or the evaluation's progress
(see `toolkeeper.eval.progress`).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from ._deps import require

__all__ = ["SHOWN_FROM", "STEP", "embed_in_steps"]

SHOWN_FROM = 256
"""Texts from which progress is shown (fewer take a few seconds at most)."""
STEP = 256
"""Texts embedded per step."""

_log = logging.getLogger("toolkeeper")


def embed_in_steps(
    embed: Callable[[Sequence[str]], Any],
    texts: Sequence[str],
    *,
    label: str = "embedding tools",
    stream: TextIO | None = None,
) -> Any:
    """`embed(texts)`, in steps of `STEP` with progress shown when there are `SHOWN_FROM` or
    more: a bar redrawn on `stream` (default stderr) when it is a terminal, else a log line
    when it starts and one when it ends. The rows are those `embed` gives, in order."""
    if len(texts) < SHOWN_FROM:
        return embed(texts)
    np: Any = require("numpy")
    out = stream or sys.stderr
    bar = out.isatty()
    total = len(texts)
    started = time.monotonic()
    if not bar:
        _log.info("%s: %d texts to embed", label, total)
    rows = []
    for start in range(0, total, STEP):
        rows.append(embed(texts[start : start + STEP]))
        done = min(start + STEP, total)
        if bar:
            filled = 30 * done // total
            out.write(f"\r{label} [{'#' * filled}{'.' * (30 - filled)}] {done}/{total}")
            out.flush()
    seconds = time.monotonic() - started
    if bar:
        out.write(f" {seconds:.1f} s\n")
        out.flush()
    else:
        _log.info("%s: %d texts embedded in %.1f s", label, total, seconds)
    return np.concatenate(rows)
