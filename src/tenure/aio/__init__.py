"""The async API: the same names as `tenure`, with ``async`` methods.

``store = await tenure.aio.connect(url)``; then ``await store.claim(...)`` and so on. Works
with asyncio and trio (through anyio).
"""

from __future__ import annotations

import random

from .._clock import Clock, LeaseTiming
from .._protocol import RetryPolicy
from .._validate import DEFAULT_PAYLOAD_LIMIT, validate_payload_limit
from ..stores import open_async_driver, resolve_url
from ._store import AsyncStore

__all__ = ["AsyncStore", "connect"]


async def connect(
    url: str | None = None,
    *,
    clock: Clock | None = None,
    store_clock: Clock | None = None,
    timing: LeaseTiming | None = None,
    retry_policy: RetryPolicy | None = None,
    payload_limit: int = DEFAULT_PAYLOAD_LIMIT,
    rng: random.Random | None = None,
) -> AsyncStore:
    """Open the store at ``url``; see `tenure.connect` for the arguments."""
    validate_payload_limit(payload_limit)  # before the store is touched
    driver = await open_async_driver(resolve_url(url), store_clock)
    return AsyncStore(
        driver,
        clock=clock,
        timing=timing,
        retry_policy=retry_policy,
        payload_limit=payload_limit,
        rng=rng,
    )
