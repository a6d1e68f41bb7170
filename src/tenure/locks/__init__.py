"""Named locks with fencing tokens, and leader election, over any tenure store.

::

    import tenure

    with tenure.lock(store, "nightly-report", ttl=30) as lock:
        with tenure.fence.sql_fence(conn, lock.token) as cur:   # a stale holder is refused
            cur.execute(...)

    async with tenure.aio.lock(astore, "nightly-report", ttl=30) as lock:
        ...                                  # cancelled if the lock is lost

    leader = tenure.elect(store, "scheduler", ttl=15, on_elected=..., on_lost=...)

A lock is a job of the store (``lock:<name>`` in the queue ``tenure.lock:<name>``): the
token is its lease's generation. See docs/locks.md.
"""

from __future__ import annotations

from datetime import timedelta

from .._store import Store
from .._store_async import AsyncStore
from ._core import LOCK_ID_PREFIX, LOCK_QUEUE_PREFIX, lock_ids
from ._leader import Leader, elect
from ._lock import Lock
from ._lock_async import AsyncLock

__all__ = [
    "LOCK_ID_PREFIX",
    "LOCK_QUEUE_PREFIX",
    "AsyncLock",
    "Leader",
    "Lock",
    "elect",
    "lock",
    "lock_async",
    "lock_ids",
]


def lock(
    store: Store,
    name: str,
    ttl: float | timedelta = 30.0,
    *,
    timeout: float | timedelta | None = None,
    blocking: bool = True,
    owner: str | None = None,
) -> Lock:
    """A `Lock` on ``name`` for ``with``: waits up to ``timeout`` seconds (None: forever;
    ``blocking=False``: not at all), else raises `LockNotAcquired`."""
    return Lock(store, name, ttl, timeout=timeout, blocking=blocking, owner=owner)


def lock_async(
    store: AsyncStore,
    name: str,
    ttl: float | timedelta = 30.0,
    *,
    timeout: float | timedelta | None = None,
    blocking: bool = True,
    owner: str | None = None,
) -> AsyncLock:
    """`lock` for an async store (``tenure.aio.lock``): an `AsyncLock` for ``async with``."""
    return AsyncLock(store, name, ttl, timeout=timeout, blocking=blocking, owner=owner)
