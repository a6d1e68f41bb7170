"""Named locks and leader election on the store API, async: `lock` and `elect` (a mixin
of `AsyncStore`; ``_store_locks.py`` is generated from this file).

The locks themselves live one floor up (`tenure.locks`: they reuse the worker's lease
keeper); these methods reach them through the seam `tenure._seams.locks`, which
``tenure/__init__.py`` fills, so the store floor imports nothing above it. See
docs/locks.md.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from . import _seams as seams

__all__ = ["AsyncStoreLocks"]


class AsyncStoreLocks:
    """`AsyncStore`'s lock methods."""

    def lock(
        self,
        name: str,
        ttl: float | timedelta = 30.0,
        *,
        timeout: float | timedelta | None = None,
        blocking: bool = True,
        owner: str | None = None,
    ) -> Any:
        """A named lock with a fencing token on this store, for ``async with`` (a
        `tenure.AsyncLock`: docs/locks.md)::

            async with store.lock("nightly-report", ttl=30) as lock:
                await write(report, token=lock.token)

        Entering waits up to ``timeout`` (None: forever; ``blocking=False``: not at all),
        then raises `LockNotAcquired`. Bad arguments raise `InvalidArgument` here."""
        return seams.locks().lock_async(
            self, name, ttl, timeout=timeout, blocking=blocking, owner=owner
        )

    def elect(
        self,
        name: str,
        ttl: float | timedelta = 30.0,
        *,
        on_elected: Callable[[Any], Any] | None = None,
        on_lost: Callable[[Any], Any] | None = None,
        owner: str | None = None,
    ) -> Any:
        """Run for leader of ``name`` on this store's locks (a `tenure.AsyncLeader`, running
        inside ``async with``; docs/locks.md): ``on_elected(token)`` once this client holds
        the lock, ``on_lost(token)`` when that holding is lost, then it tries again."""
        return seams.locks().elect_async(
            self, name, ttl, on_elected=on_elected, on_lost=on_lost, owner=owner
        )
