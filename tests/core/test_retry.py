import math
import random
from typing import Any

import pytest

from toolkeeper.core.errors import ErrorCode, ToolError
from toolkeeper.core.retry import RetryPolicy


def test_waits_grow_by_the_backoff_and_stop_at_the_maximum() -> None:
    policy = RetryPolicy(initial_interval=1.0, backoff=3.0, max_interval=5.0, jitter=0.0)
    assert [policy.delay(n) for n in (1, 2, 3)] == [1.0, 3.0, 5.0]


def test_jitter_spreads_waits_within_bounds() -> None:
    policy = RetryPolicy(initial_interval=1.0, jitter=0.2)
    waits = {policy.delay(1, random.Random(seed)) for seed in range(50)}
    assert len(waits) > 1
    assert all(0.8 <= w <= 1.2 for w in waits)


def test_only_retryable_codes_within_the_attempt_budget_are_retried() -> None:
    policy = RetryPolicy(max_attempts=3, non_retryable=frozenset({ErrorCode.RATE_LIMITED}))
    busy = ToolError.of(ErrorCode.TOOL_ERROR, "busy", retryable=True)
    assert policy.should_retry(busy, 1)
    assert policy.should_retry(busy, 2)
    assert not policy.should_retry(busy, 3)
    assert not policy.should_retry(ToolError.of(ErrorCode.INVALID_ARGUMENTS, "x"), 1)
    assert not policy.should_retry(ToolError.of(ErrorCode.RATE_LIMITED, "slow down"), 1)


@pytest.mark.parametrize(
    "bad",
    [
        {"max_attempts": math.inf},  # retried a failing read without end
        {"max_attempts": 2.5},
        {"max_attempts": True},
        {"max_attempts": 0},  # ran once all the same
        {"initial_interval": math.inf},
        {"max_interval": math.inf},  # a wait grown past any float ended the retries as a fault
    ],
)
def test_attempts_not_a_whole_number_from_one_and_endless_waits_are_refused(
    bad: dict[str, Any],
) -> None:
    with pytest.raises(ValueError, match="out of range"):
        RetryPolicy(**bad)
