"""A clock tests move by hand."""

from __future__ import annotations

__all__ = ["FakeClock"]


class FakeClock:
    """Wall-clock seconds that only change when `advance` is called.

    Pass it as `Keeper(clock=clock)`; pass `clock.sleep` where a sleeping function is taken,
    so that retry waits advance the clock instead of waiting.
    """

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move time forward."""
        self.now += seconds

    async def sleep(self, seconds: float) -> None:
        """Record the wait and advance the clock by it, without waiting."""
        self.slept.append(seconds)
        self.now += seconds
