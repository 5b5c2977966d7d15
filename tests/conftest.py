import os

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def postgres_url() -> str:
    return os.environ.get("TOOLKEEPER_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
