"""redis-py 7+ looks its own version up in the installed package's metadata for each new
connection unless told it: tenure tells it once (`connection_options`), which took a fifth
off a worker's start on Redis (benchmarks/worker_start.py)."""

from __future__ import annotations

import importlib.util

import pytest
import redis

from tenure.stores.redis import AsyncRedisDriver, RedisDriver

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("redis.driver_info") is None,
    reason="this redis-py reads its version once, at import (no driver_info)",
)


@pytest.mark.parametrize("driver", [RedisDriver, AsyncRedisDriver])
def test_the_pools_tell_redis_py_its_version(driver: type) -> None:
    made = driver("redis://127.0.0.1:6379/0?prefix=unused")
    info = made._pool.connection_kwargs["driver_info"]
    assert (info.name, info.lib_version) == ("redis-py", redis.__version__)
