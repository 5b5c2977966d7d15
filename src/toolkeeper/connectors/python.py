"""Python functions as tools: sync and async callables behind the `Connector` Protocol.

Async functions run on the event loop; sync ones in a worker thread
(`anyio.to_thread.run_sync`), so a slow sync tool never blocks other calls. A sync function
that returns an awaitable (a decorator's plain wrapper of an async function, a lambda calling
one) has only started its work: it is awaited, under the same timeout. A sync function that
outlives its timeout (or a cancelled call) is left to finish in its thread, since Python cannot
stop one: the call ends at its timeout on every event loop, as an async tool's does (a write's
outcome is then unknown). The `CallContext` is injected into the parameter annotated with it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any

import anyio.to_thread

from ..core.values import CallContext, ToolSpec
from ..schema.from_callable import FunctionSchema, function_schema, to_jsonable
from ..schema.validate import Violation
from .base import ToolOutput, UnrecordableResult

__all__ = ["FunctionConnector"]


class FunctionConnector:
    """Runs a Python function with validated arguments."""

    def __init__(self, func: Callable[..., Any], schema: FunctionSchema | None = None) -> None:
        self.func = func
        self.schema = schema if schema is not None else function_schema(func)

    @property
    def argument_check(self) -> Callable[[Mapping[str, Any]], list[Violation]] | None:
        """What the executor checks after the JSON Schema, before anything is recorded or
        run: whether the arguments become the function's Python values (None: they are
        plain JSON, nothing to check)."""
        return self.schema.violations if self.schema.model is not None else None

    async def invoke(self, spec: ToolSpec, arguments: Mapping[str, Any], ctx: CallContext) -> Any:
        """Call the function once; JSON-ify what it returns."""
        kwargs = self.schema.python_arguments(arguments)
        if self.schema.context_param is not None:
            kwargs[self.schema.context_param] = ctx
        args = [kwargs.pop(name) for name in self.schema.positional if name in kwargs]
        if self.schema.is_async:
            value = await self.func(*args, **kwargs)
        else:
            value = await anyio.to_thread.run_sync(
                functools.partial(self.func, *args, **kwargs), abandon_on_cancel=True
            )
            if inspect.isawaitable(value):
                value = await value
        # From here on the function has run: a result that cannot be made JSON is not a
        # failure of the call (its effect happened), only of its record.
        try:
            if isinstance(value, ToolOutput):
                return ToolOutput(data=to_jsonable(value.data), effect_ref=value.effect_ref)
            return to_jsonable(value)
        except (ValueError, TypeError, RecursionError) as exc:
            raise UnrecordableResult(f"{type(exc).__name__}: {exc}") from exc
