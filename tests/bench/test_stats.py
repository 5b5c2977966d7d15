"""Percentiles, summaries and interleaved repeats."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from toolkeeper.bench.stats import (
    Summary,
    Timing,
    interleave,
    interleave_async,
    percentile,
    time_async_calls,
    time_calls,
)


def test_percentile_interpolates_between_closest_ranks() -> None:
    values = [4.0, 1.0, 3.0, 2.0, 5.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 50) == 3.0
    assert percentile(values, 100) == 5.0
    assert percentile(values, 90) == pytest.approx(4.6)


def test_percentile_of_nothing_or_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)
    with pytest.raises(ValueError, match="within"):
        percentile([1.0], 101)


def test_summary_takes_the_median_of_the_repeat_medians_and_the_p99_of_every_call() -> None:
    slow_block = Timing(seconds=(1e-3, 1e-3, 1e-3))
    fast_block = Timing(seconds=(1e-6, 2e-6, 3e-6), failures=1)
    medium_block = Timing(seconds=(10e-6, 10e-6, 10e-6))

    summary = Summary.of([slow_block, fast_block, medium_block])

    assert summary.calls == 9
    assert summary.repeat_medians_us == pytest.approx((1000.0, 2.0, 10.0))
    assert summary.median_us == pytest.approx(10.0)
    assert summary.min_us == pytest.approx(1.0)
    assert summary.p99_us == pytest.approx(1000.0)
    assert summary.failures == 1
    assert summary.to_dict()["median_us"] == 10.0


def test_summary_of_no_calls_is_refused() -> None:
    with pytest.raises(ValueError, match="no calls"):
        Summary.of([Timing(seconds=())])


def test_every_call_is_timed_and_checked() -> None:
    timing = time_calls(lambda i: i * 2, 4, check=lambda i, result: result == 2 * i and i != 3)
    assert len(timing.seconds) == 4
    assert all(s >= 0 for s in timing.seconds)
    assert timing.failures == 1


@pytest.mark.anyio
async def test_every_awaited_call_is_timed_and_checked() -> None:
    async def double(i: int) -> int:
        return i * 2

    timing = await time_async_calls(double, 3, check=lambda i, result: result == 2 * i)
    assert (len(timing.seconds), timing.failures) == (3, 0)


def test_interleaved_blocks_start_from_a_different_block_each_repeat() -> None:
    ran: list[str] = []

    def block(name: str) -> Callable[[int], Timing]:
        def run(repeat: int) -> Timing:
            ran.append(f"{name}{repeat}")
            return Timing(seconds=(float(repeat),))

        return run

    out = interleave([("a", block("a")), ("b", block("b")), ("c", block("c"))], 3)

    assert ran == ["a0", "b0", "c0", "b1", "c1", "a1", "c2", "a2", "b2"]
    assert [t.seconds for t in out["a"]] == [(0.0,), (1.0,), (2.0,)]


def test_every_other_round_of_rotations_runs_backwards_so_no_block_always_follows_one() -> None:
    ran: list[str] = []

    def block(name: str) -> Callable[[int], Timing]:
        def run(repeat: int) -> Timing:
            ran.append(name)
            return Timing(seconds=(float(repeat),))

        return run

    interleave([(n, block(n)) for n in "abc"], 6)
    assert "".join(ran) == "abcbcacabcbaacbbac"
    followers = {ran[i + 1] for i in range(len(ran) - 1) if ran[i] == "a"}
    assert {"b", "c"} <= followers  # (not always the same one)


@pytest.mark.anyio
async def test_async_blocks_are_interleaved_the_same_way() -> None:
    ran: list[str] = []

    def block(name: str) -> Callable[[int], Awaitable[Timing]]:
        async def run(repeat: int) -> Timing:
            ran.append(f"{name}{repeat}")
            return Timing(seconds=(1.0,))

        return run

    out = await interleave_async([("a", block("a")), ("b", block("b"))], 2)
    assert ran == ["a0", "b0", "b1", "a1"]
    assert len(out["b"]) == 2
