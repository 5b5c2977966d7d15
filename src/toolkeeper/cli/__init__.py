"""The `toolkeeper` command.

Each sub-command lives in its own module of this package and exposes
`register(subparsers) -> None`, which adds its parser and sets `func` (a callable taking the
parsed `argparse.Namespace` and returning an exit code). Modules are imported lazily, so an
optional extra that one command needs never slows down or breaks another.

Two endings are handled here, once for every command: Ctrl-C exits 130 without a traceback,
and a reader that stops early (`toolkeeper ... | head`) ends the command quietly.
"""

from __future__ import annotations

import argparse
import importlib
import os
import select
import sys
from collections.abc import Callable, Sequence

from .. import __version__

__all__ = ["main"]

# module name in this package → the top-level commands it registers
_COMMANDS: dict[str, tuple[str, ...]] = {
    "demo": ("demo",),
    "approvals": ("approvals",),
    "tools": ("tools",),
    "ledger": ("ledger",),
    "bench": ("bench",),
    "dialects": ("dialects",),
    "eval": ("eval",),
    "serve": ("serve", "list-tools"),
    "chat": ("chat",),
}


def _parser(only: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolkeeper",
        description="The trusted runtime between a language model and its tools.",
    )
    parser.add_argument("--version", action="version", version=f"toolkeeper {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module, commands in _COMMANDS.items():
        if only is not None and only not in commands:
            continue
        importlib.import_module(f"{__name__}.{module}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    first = next((a for a in args_list if not a.startswith("-")), None)
    known = {c for cs in _COMMANDS.values() for c in cs}
    parser = _parser(first if first in known else None)
    command = next((a for a in args_list if a in known), None)
    if first not in known and command is not None and args_list[0] not in _OWN_OPTIONS:
        # `toolkeeper --ledger x ledger list`: else "invalid choice: 'x'"
        parser.error(
            f"{args_list[0]} is an option of a command: put it after the command, as in "
            f"`toolkeeper {command} ... {args_list[0]} ...`"
        )
    args = parser.parse_args(args_list)
    func: Callable[[argparse.Namespace], int] | None = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        code = func(args)
        sys.stdout.flush()  # here, so that a closed pipe is seen here and not at exit
    except BaseException as exc:
        if _caused_by(exc, KeyboardInterrupt):
            return _INTERRUPTED
        if _only(exc, BrokenPipeError) and _stdout_reader_gone():
            # As the Python docs advise: nothing more is written to the closed pipe, and the
            # interpreter's own flush at exit finds devnull instead.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return _CLOSED_PIPE
        raise
    return code


_OWN_OPTIONS = ("-h", "--help", "--version")
_INTERRUPTED = 130  # 128 + SIGINT, as shells report a command stopped by Ctrl-C
_CLOSED_PIPE = 141  # 128 + SIGPIPE, as shells report a command whose reader went away


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    """Whether `exc` is `kind`, or a task group's error that holds one."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.subgroup(kind) is not None
    return isinstance(exc, kind)


def _only(exc: BaseException, kind: type[BaseException]) -> bool:
    """Whether `exc` is `kind`, or a task group's error that holds nothing else (a real
    error beside it is not hidden)."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(kind)[1] is None
    return isinstance(exc, kind)


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe whose reader closed it (not some other pipe that broke)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no file descriptor (a test's capture)
        return False


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
