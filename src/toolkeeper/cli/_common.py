"""Options and helpers shared by sub-commands."""

from __future__ import annotations

import argparse
import os

__all__ = ["add_ledger_option", "ledger_url"]


def add_ledger_option(parser: argparse.ArgumentParser) -> None:
    """`--ledger URL`, defaulting to `$TOOLKEEPER_LEDGER` or `sqlite:///./toolkeeper.db`."""
    parser.add_argument(
        "--ledger",
        default=None,
        metavar="URL",
        help="ledger URL (default: $TOOLKEEPER_LEDGER or sqlite:///./toolkeeper.db)",
    )


def ledger_url(args: argparse.Namespace) -> str:
    """The ledger URL a command should use."""
    return str(args.ledger or os.environ.get("TOOLKEEPER_LEDGER") or "sqlite:///./toolkeeper.db")
