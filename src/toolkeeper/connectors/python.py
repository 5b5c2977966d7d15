"""Python functions as tools: sync and async callables behind the `Connector` Protocol.

Async functions run on the event loop; sync ones in a worker thread
(`anyio.to_thread.run_sync`), so a slow sync tool never blocks other calls. A sync function
that returns an awaitable (a decorator's plain wrapper of an async function, a lambda calling
one) has only started its work: it is awaited, under the same timeout, and an async generator
it returns (the wrapped function is one) runs to its end on the event loop. A sync function that
outlives its timeout (or a cancelled call) is left to finish in its thread, since Python cannot
stop one: the call ends at its timeout on every event loop, as an async tool's does (a write's
outcome is then unknown). The `CallContext` is injected into the parameter annotated with it.

A generator function (sync or async) returns the list of what it yields: it runs to its end
where a function of its kind runs (in the worker thread, on the event loop) and under the
call's timeout, and what it raises on the way fails the call as any tool's error does.

Worker threads are taken from a `CapacityLimiter`: a `Keeper`'s own (`Keeper(tool_threads=...)`),
so tools never take the threads the rest of the application uses. Waiting for one counts
against the timeout (the ledger's deadline of the call includes it): a call still waiting at
its deadline fails with `UpstreamUnavailable`, since its function never started and never
will (nothing ran; retried where the policy allows). On trio a thread left to finish keeps its
place in the limiter until its function returns; on asyncio anyio gives the place back at once,
and the thread runs on outside the count.
"""

from __future__ import annotations

import functools
import inspect
import threading
import time
from collections.abc import AsyncGenerator, Callable, Coroutine, Generator, Mapping
from typing import Any

import anyio.to_thread

from ..core.values import CallContext, ToolSpec
from ..schema.from_callable import FunctionSchema, function_schema
from ..schema.validate import Violation
from .base import UpstreamUnavailable

__all__ = ["DEFAULT_TOOL_THREADS", "FunctionConnector"]

DEFAULT_TOOL_THREADS = 40
"""Sync tool functions that may run at once (as many as anyio's default thread limiter)."""


class FunctionConnector:
    """Runs a Python function with validated arguments.

    Args:
        func: The function, sync or async.
        schema: Its schema (default: derived from its signature and docstring).
        limiter: The worker threads a sync function may take (default: anyio's default
            limiter, which the rest of the application shares).
    """

    def __init__(
        self,
        func: Callable[..., Any],
        schema: FunctionSchema | None = None,
        *,
        limiter: anyio.CapacityLimiter | None = None,
    ) -> None:
        self.func = func
        self.schema = schema if schema is not None else function_schema(func)
        self.limiter = limiter
        self._yields_async = inspect.isasyncgenfunction(func)

    @property
    def argument_check(self) -> Callable[[Mapping[str, Any]], list[Violation]] | None:
        """What the executor checks after the JSON Schema, before anything is recorded or
        run: whether the arguments become the function's Python values (None: they are
        plain JSON, nothing to check)."""
        return self.schema.violations if self.schema.model is not None else None

    def invoke(
        self, spec: ToolSpec, arguments: Mapping[str, Any], ctx: CallContext
    ) -> Coroutine[Any, Any, Any]:
        """Call the function once; return what it returns (the executor makes it JSON).

        What is awaited is an async function's own coroutine: the connector adds none."""
        schema = self.schema
        kwargs = schema.python_arguments(arguments)
        if schema.context_param is not None:
            kwargs[schema.context_param] = ctx
        args = self._positional(kwargs) if schema.positional else []
        if schema.is_async:  # (a coroutine function: calling it makes the coroutine)
            return self.func(*args, **kwargs)  # type: ignore[no-any-return]
        return self._run_elsewhere(spec, ctx, args, kwargs)

    async def _run_elsewhere(
        self, spec: ToolSpec, ctx: CallContext, args: list[Any], kwargs: dict[str, Any]
    ) -> Any:
        """A function that is not a coroutine function: an async generator one on the event
        loop, any other in a worker thread."""
        if self._yields_async:  # (needs no thread: it runs on the event loop)
            return [item async for item in self.func(*args, **kwargs)]
        call = functools.partial(_run, self.func, args, kwargs)
        value = await self._in_thread(call, spec, ctx)
        if inspect.isawaitable(value):
            value = await value
        elif isinstance(value, AsyncGenerator):  # (an async one behind a sync decorator)
            value = [item async for item in value]
        return value

    def _positional(self, kwargs: dict[str, Any]) -> list[Any]:
        """Take the positional-only arguments out of `kwargs`, in order, up to the last one
        given: one left out before it (its default no JSON holds, `math.inf`) is its default,
        or what follows would take its place."""
        names, defaults = self.schema.positional, self.schema.positional_defaults
        given = [i for i, name in enumerate(names) if name in kwargs]
        if not given:
            return []
        return [
            kwargs.pop(name) if name in kwargs else defaults[name]
            for name in names[: given[-1] + 1]
        ]

    async def _in_thread(self, call: Callable[[], Any], spec: ToolSpec, ctx: CallContext) -> Any:
        """Run `call` in a worker thread.

        Raises:
            UpstreamUnavailable: The attempt's deadline passed while it waited for a thread:
                `call` never runs.
        """
        # Whichever side takes it first decides: the thread, to run `call`; the event loop,
        # when the call ends before, to make sure `call` never starts (a thread may be
        # picking it up just then).
        claim = threading.Lock()

        def run() -> Any:
            if not claim.acquire(blocking=False):
                return None  # (given up: nobody reads this)
            return call()

        try:
            return await anyio.to_thread.run_sync(run, abandon_on_cancel=True, limiter=self.limiter)
        except anyio.get_cancelled_exc_class():
            # Cut short at the deadline, by the timeout, before it started: `claim` makes sure
            # it never will. (A scope of ours with that deadline would not tell: the timeout's,
            # expired on the same tick, takes the cancellation.)
            if claim.acquire(blocking=False) and time.monotonic() >= ctx.deadline:
                limiter = self.limiter or anyio.to_thread.current_default_thread_limiter()
                raise UpstreamUnavailable(
                    f"no worker thread was free for {spec.name} within its timeout (all "
                    f"{limiter.total_tokens:g} were busy); it did not run, so it may be tried again"
                ) from None
            raise


def _run(func: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
    """Call a sync function in its worker thread; a generator it returns runs there too, to its
    end (serialized later, it would run on the event loop, outside the timeout)."""
    value = func(*args, **kwargs)
    return list(value) if isinstance(value, Generator) else value
