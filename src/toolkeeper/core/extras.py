"""Optional extras: one error, and one line, for an extra that is not installed.

What it is: `MissingExtra`, the ImportError every guarded import raises, and `require`, which
imports a module of an extra or raises it. Its message is one line that names what needs the
extra and the command that installs it (`pip install "toolkeeper[otel]"`); the command line
prints it without a traceback. What it is not: a list of the extras (that is pyproject.toml).
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["MissingExtra", "missing", "require"]


class MissingExtra(ImportError):
    """An optional extra is not installed.

    Attributes:
        extra: the extra that installs what is missing (`otel`, `postgres`, ...).
    """

    def __init__(self, extra: str, needed_by: str, *, name: str | None = None) -> None:
        """`needed_by` names what needs it, as a person would: "PostgresStore", "[server]
        telemetry = \"otel\"", "toolkeeper list-tools"."""
        super().__init__(
            f'{needed_by} needs the {extra} extra: pip install "toolkeeper[{extra}]"', name=name
        )
        self.extra = extra


def missing(exc: ImportError, *modules: str) -> bool:
    """Whether `exc` says one of `modules` (or a module inside one) is not installed, and not
    that an installed one failed to import something of its own."""
    name = exc.name or ""
    return isinstance(exc, ModuleNotFoundError) and any(
        name == m or name.startswith(f"{m}.") or m.startswith(f"{name}.") for m in modules
    )


def require(module: str, extra: str, needed_by: str) -> ModuleType:
    """Import `module`, of the optional `extra`.

    Raises:
        MissingExtra: it is not installed.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if not missing(exc, module):
            raise
        raise MissingExtra(extra, needed_by, name=module) from exc
