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

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from .._store import Store
from .._store_async import AsyncStore
from ..models import FencingToken
from ._core import LOCK_ID_PREFIX, LOCK_QUEUE_PREFIX, lock_ids
from ._leader import Leader, elect
from ._leader_aio import AsyncLeader
from ._lock import Lock
from ._lock_async import AsyncLock

__all__ = [
    "LOCK_ID_PREFIX",
    "LOCK_QUEUE_PREFIX",
    "AsyncLeader",
    "AsyncLock",
    "Leader",
    "Lock",
    "elect",
    "elect_async",
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


def elect_async(
    store: AsyncStore,
    name: str,
    ttl: float | timedelta = 30.0,
    *,
    on_elected: Callable[[FencingToken], Any] | None = None,
    on_lost: Callable[[FencingToken], Any] | None = None,
    owner: str | None = None,
) -> AsyncLeader:
    """`elect` for an async store: an `AsyncLeader`, running while its ``async with`` runs."""
    return AsyncLeader(store, name, ttl, on_elected=on_elected, on_lost=on_lost, owner=owner)
