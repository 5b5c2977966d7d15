"""`toolkeeper demo`: the research-assistant scenario on a fresh SQLite ledger."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import anyio

from . import _HELP

__all__ = ["register"]


def _run(args: argparse.Namespace) -> int:
    from ..core.errors import ToolkeeperError
    from ..demo import run_demo

    workdir = Path(args.dir) if args.dir else None
    if workdir is not None:
        try:
            workdir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a file of that name, a read-only place
            print(
                f"toolkeeper demo: cannot use {workdir} as a folder: {exc.strerror}",
                file=sys.stderr,
            )
            return 1
        if (workdir / "toolkeeper.db").exists():
            print(
                f"toolkeeper demo: {workdir / 'toolkeeper.db'} exists; the demo needs a fresh "
                "ledger",
                file=sys.stderr,
            )
            return 1
    try:
        anyio.run(run_demo, workdir)
    except ToolkeeperError as exc:  # a ledger it cannot open (its digest key unreadable...)
        print(f"toolkeeper demo: {exc}", file=sys.stderr)
        return 1
    return 0


def register(subparsers: Any) -> None:
    """Add `demo` to the command line."""
    parser = subparsers.add_parser("demo", help=_HELP["demo"])
    parser.add_argument(
        "--dir", default=None, help="keep the ledger and files here (default: a temp dir)"
    )
    parser.set_defaults(func=_run)
