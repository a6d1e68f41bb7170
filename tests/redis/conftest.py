"""Fixtures of the Redis-specific tests: ``backend`` pinned to Redis (so ``url`` is an
isolated key prefix on the server named by TENURE_TEST_REDIS_URL, default
redis://127.0.0.1:6379/0), a raw client and the test's prefix. The store fixtures are the
suite's (tests/conftest.py): ``real_store``/``open_real_store`` run on Redis time,
``store``/``open_store`` on the test's manual clock."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.backends import REDIS, Backend, redis_client


@pytest.fixture
def backend() -> Backend:
    return REDIS


@pytest.fixture
def raw() -> Iterator[Any]:
    """A plain redis-py client of the same server (for looking under the API)."""
    client = redis_client()
    yield client
    client.close()


@pytest.fixture
def prefix(url: str) -> str:
    from tenure.stores.redis import parse_redis_url

    return parse_redis_url(url).prefix
