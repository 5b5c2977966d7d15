from collections.abc import AsyncIterator

import pytest

from toolkeeper import Keeper
from toolkeeper.testing import FakeClock, MemoryAuditSink, MemoryStore

from ..conftest import APP


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def audit() -> MemoryAuditSink:
    return MemoryAuditSink()


@pytest.fixture
async def keeper(clock: FakeClock, audit: MemoryAuditSink) -> AsyncIterator[Keeper]:
    k = Keeper(principal=APP, ledger=MemoryStore(), audit=audit, clock=clock, sleep=clock.sleep)
    async with k:
        yield k
