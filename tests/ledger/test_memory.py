from __future__ import annotations

from typing import ClassVar

import pytest

from toolkeeper.ledger import LedgerStore, MemoryStore

from .contract import Connect, LedgerContract
from .pages_contract import PagesContract


class TestMemoryStore(LedgerContract, PagesContract):
    durable: ClassVar[bool] = False

    @pytest.fixture
    def connect(self) -> Connect:
        shared = MemoryStore()

        async def connect() -> LedgerStore:
            await shared.open()
            return shared

        return connect
