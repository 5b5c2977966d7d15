"""Why a file cannot be made at a path someone gave: one check, so that the command line and
the library refuse a mistyped path alike (a folder, or one in a folder that does not exist),
and leave no folders behind."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["file_problem"]


def file_problem(path: str | os.PathLike[str], instead: str) -> str | None:
    """Why a file cannot be written at `path`, if it cannot: it is a folder (`instead` says
    what to name), its folder does not exist, or the path cannot be followed at all (too long
    a name, a loop of symbolic links). None when it can be tried."""
    text = os.fspath(path)
    try:
        if Path(text).is_dir():
            return f"{text} is a folder: {instead}"
        if not Path(text).resolve().parent.is_dir():
            return f"the folder of {text} does not exist"
    except (OSError, RuntimeError) as exc:  # (3.11 reports a symlink loop as RuntimeError)
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return f"{text} cannot be used: {reason}"
    return None
