"""`Agent.run_stream`: a run's text as an async iterator, its result once it ends.

```python
async with agent.run_stream("Summarise the report", principal=alice) as stream:
    async for text in stream:
        print(text, end="")
result = stream.result
```
The run goes on to its end even when the caller stops reading early (leaving the block waits
for it): a run is never cut off between a call and its record.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from .model import OnText
from .run import RunResult

__all__ = ["RunStream", "streamed"]


class RunStream:
    """The text of a run as it streams in; `result` once the run ended."""

    def __init__(self, texts: MemoryObjectReceiveStream[str]) -> None:
        self._texts = texts
        self.result: RunResult | None = None
        """The run's result, once it ended (None before)."""

    def __aiter__(self) -> AsyncIterator[str]:
        return self._texts.__aiter__()


@asynccontextmanager
async def streamed(run: Callable[[OnText], Awaitable[RunResult]]) -> AsyncIterator[RunStream]:
    """`run(on_text)` in a task of its own, its text handed to the `RunStream` it yields."""
    send, receive = anyio.create_memory_object_stream[str](math.inf)
    stream = RunStream(receive)

    async def produce() -> None:
        async with send:
            stream.result = await run(send.send)

    with receive:
        async with anyio.create_task_group() as tg:
            tg.start_soon(produce)
            yield stream
