"""Fixtures of the Redis-specific tests: an isolated key prefix per test on the server
named by TENURE_TEST_REDIS_URL (default redis://127.0.0.1:6379/0), and a raw client."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import tenure
from tests.backends import REDIS, _redis_client


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    with REDIS.isolated_url(tmp_path) as isolated:
        yield isolated


@pytest.fixture
def raw() -> Iterator[Any]:
    """A plain redis-py client of the same server (for looking under the API)."""
    client = _redis_client()
    yield client
    client.close()


@pytest.fixture
def open_store(url: str) -> Iterator[Callable[..., tenure.Store]]:
    """Open clients of the test's store; by default on Redis time (no store_clock)."""
    opened: list[tenure.Store] = []

    def factory(**options: Any) -> tenure.Store:
        store = tenure.connect(options.pop("url", url), **options)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: Callable[..., tenure.Store]) -> tenure.Store:
    return open_store()


@pytest.fixture
def prefix(url: str) -> str:
    from tenure.stores.redis import parse_redis_url

    return parse_redis_url(url).prefix
