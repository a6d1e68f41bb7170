"""The Redis store: ``redis://host:port/db?prefix=tenure`` (``rediss://`` for TLS).

Store time is the Redis server's ``TIME``, read inside each operation's Lua script. One
primary only: see ``docs/redis.md`` for why replicas, failover and Redlock can hand one
fencing token to two owners, and for the persistence settings that keep tokens monotonic
across restarts (``appendonly yes``, ``appendfsync always``).

The async driver (``_aio.py``) is the source of truth; ``_sync.py`` is generated from it.
redis-py's asyncio client runs on asyncio only, so under trio the async API runs the sync
driver in worker threads.
"""

from __future__ import annotations

import anyio.to_thread

from ..._clock import Clock
from .._driver_async import AsyncDriver
from .._threaded import ThreadedDriver, on_asyncio
from ._common import LAYOUT_VERSION, Keys, encode, parse_redis_url
from ._driver import RedisDriver
from ._driver_async import AsyncRedisDriver

__all__ = [
    "LAYOUT_VERSION",
    "AsyncRedisDriver",
    "Keys",
    "RedisDriver",
    "encode",
    "open_async",
    "open_sync",
    "parse_redis_url",
]


def open_sync(url: str, clock: Clock | None) -> RedisDriver:
    driver = RedisDriver(url, clock)
    driver.open()
    return driver


async def open_async(url: str, clock: Clock | None) -> AsyncDriver:
    if not on_asyncio():  # trio: redis.asyncio cannot run here
        return ThreadedDriver(await anyio.to_thread.run_sync(open_sync, url, clock))
    driver = AsyncRedisDriver(url, clock)
    await driver.open()
    return driver
