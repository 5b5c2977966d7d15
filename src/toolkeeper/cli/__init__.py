"""The `toolkeeper` command.

Each sub-command lives in its own module of this package and exposes
`register(subparsers) -> None`, which adds its parser and sets `func` (a callable taking the
parsed `argparse.Namespace` and returning an exit code). Modules are imported lazily, so an
optional extra that one command needs never slows down or breaks another: only the command
named is imported, and `toolkeeper --help` imports none (it shows `_HELP`).

Three endings are handled here, once for every command: Ctrl-C exits 130 without a traceback,
a reader that stops early (`toolkeeper ... | head`) ends the command quietly, and a missing
optional extra is one line that names it (exit 2).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import select
import sys
from collections.abc import Callable, Sequence
from typing import Any

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

# each top-level command's one line in `toolkeeper --help`, which its module's `register` uses too
_HELP: dict[str, str] = {
    "demo": "run the end-to-end demo scenario",
    "approvals": "list, show, approve or deny approval requests",
    "tools": "pending, diff, accept or reject upstream tools' changed definitions (pins)",
    "ledger": "list the calls in a ledger, and the unknown ones a person must settle",
    "bench": "time the executor, gateway, agent, connectors, console and retrieval next to "
    "peers, and scale over processes",
    "dialects": "convert tool definitions between formats, or check-args against them",
    "eval": "measure retrieval and when to abstain on benchmark files, fit-adapter, the safety "
    "rates of fault-injected runs, or an agent on a task file",
    "serve": "run the MCP gateway (streamable HTTP, or --stdio)",
    "list-tools": "list (or call) the tools of an MCP server over streamable HTTP",
    "chat": "chat with a model using a configuration's tools, approving calls at the terminal",
}


class _Parser(argparse.ArgumentParser):
    """An argument parser that, for a mistyped command or choice, suggests the close ones
    (its sub-parsers are of this class too), as argparse itself does from Python 3.14
    (`suggest_on_error`)."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is None or value in choices or not isinstance(value, str):
            super()._check_value(action, value)
            return
        spelled = {str(c).lower(): str(c) for c in choices}
        close = [
            spelled[c] for c in difflib.get_close_matches(value.lower(), spelled, n=3, cutoff=0.6)
        ]
        if not close:
            super()._check_value(action, value)
            return
        names = " or ".join(repr(c) for c in close)
        raise argparse.ArgumentError(action, f"invalid choice: {value!r}: did you mean {names}?")


def _parser(only: str | None, every: bool = False) -> argparse.ArgumentParser:
    """The parser of command `only`; of no command, or of `every` one (`toolkeeper --help`
    needs no command's options, only `_HELP`)."""
    parser = _Parser(
        prog="toolkeeper",
        description="The trusted runtime between a language model and its tools.",
    )
    parser.add_argument("--version", action="version", version=f"toolkeeper {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    if only is None and not every:  # `--help`, or a usage error
        for command, text in _HELP.items():
            sub.add_parser(command, help=text)
        return parser
    for module, commands in _COMMANDS.items():
        if every or only in commands:
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
        from ..core.extras import MissingExtra

        if _only(exc, MissingExtra):  # one line that says what to install, not a traceback
            print(f"toolkeeper {args.command}: {_leaf(exc)}", file=sys.stderr)
            return _USAGE
        if _only(exc, BrokenPipeError) and _stdout_reader_gone():
            # As the Python docs advise: nothing more is written to the closed pipe, and the
            # interpreter's own flush at exit finds devnull instead.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return _CLOSED_PIPE
        raise
    return code


_OWN_OPTIONS = ("-h", "--help", "--version")
_USAGE = 2  # as argparse exits on a usage error
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


def _leaf(exc: BaseException) -> BaseException:
    """The first error a task group's error holds, or `exc` itself."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


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
