"""Options and helpers shared by sub-commands."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from ..ledger.base import LedgerStore

# The ledger's modules are imported where they are used: `toolkeeper ... --help` imports this
# module, and the ledger's dependencies are not light.

__all__ = [
    "LIST_LIMIT",
    "add_ledger_option",
    "cut",
    "existing_ledger",
    "ledger_hint",
    "ledger_url",
]


T = TypeVar("T")

LIST_LIMIT = 1000
"""What `ledger list` and `approvals list` show at most unless told (`--limit`)."""


def cut(records: list[T], limit: int, said: str) -> list[T]:
    """The first `limit` of `records` (read with one more, to tell), saying `said` on stderr
    ("the first N calls; --limit shows more") when more were left out."""
    if len(records) <= limit:
        return records
    print(f"{said}; --limit shows more", file=sys.stderr)
    return records[:limit]


_IN_ONE_PROCESS = "lives inside one process: there is no such ledger to look at"


def _url(text: str) -> str:
    from ..ledger.factory import in_process

    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: give a ledger URL or path")
    if in_process(text):
        raise argparse.ArgumentTypeError(f"{text} {_IN_ONE_PROCESS}")
    return text


def add_ledger_option(parser: argparse.ArgumentParser) -> None:
    """`--ledger URL`, defaulting to `$TOOLKEEPER_LEDGER` or `sqlite:///./toolkeeper.db`."""
    parser.add_argument(
        "--ledger",
        default=None,
        type=_url,
        metavar="URL",
        help="ledger URL (default: $TOOLKEEPER_LEDGER or sqlite:///./toolkeeper.db)",
    )


def ledger_url(args: argparse.Namespace) -> str:
    """The ledger URL a command should use."""
    from ..ledger.factory import DEFAULT_LEDGER_URL

    return str(args.ledger or os.environ.get("TOOLKEEPER_LEDGER") or DEFAULT_LEDGER_URL)


def existing_ledger(args: argparse.Namespace) -> LedgerStore:
    """The store of the ledger a command inspects or decides on, not yet opened.

    A SQLite file that does not exist is refused when it opens (`StoreError`) instead of being
    created empty: a mistyped `--ledger` must not read as "nothing recorded".

    Raises:
        ConfigurationError: the URL names no supported store, or an in-memory one (from
            `$TOOLKEEPER_LEDGER`: `--ledger` refuses it as a usage error).
    """
    from ..core.errors import ConfigurationError
    from ..ledger.factory import in_process, open_store

    url = ledger_url(args)
    if in_process(url):
        raise ConfigurationError(
            f"ledger {url} {_IN_ONE_PROCESS} (pass --ledger URL or set TOOLKEEPER_LEDGER)"
        )
    return open_store(url, create=False)


def ledger_hint(exc: Exception) -> str:
    """What went wrong, with how to point a command at the right ledger when there was none."""
    from ..ledger.sqlite import NoLedger

    if isinstance(exc, NoLedger):
        return f"{exc} (pass --ledger URL or set TOOLKEEPER_LEDGER)"
    return str(exc)
