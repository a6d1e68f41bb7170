"""`AsyncLeader`: leader election on a named lock, as a task of the caller's event loop.

The async twin of `Leader` in behaviour (not generated from it: a thread there, a task
here). ``async with AsyncLeader(...)`` (or ``async with astore.elect(...)``) runs the
candidate in a task group of its own until the block ends; callbacks may be plain functions
or coroutine functions.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from datetime import timedelta
from types import TracebackType
from typing import Any

import anyio
import anyio.abc

from .._store_async import AsyncStore
from ..errors import LeaseLost, LockNotAcquired, StoreUnavailable
from ..models import FencingToken
from ..worker import LoopCaller
from ._lock_async import AsyncLock

__all__ = ["AsyncLeader"]

log = logging.getLogger("tenure")

ATTEMPT = 0.5  # the longest one acquire waits before trying again (stopping cancels it)

Callback = Callable[[FencingToken], Any]


class AsyncLeader:
    """Run for leader of ``name`` while the ``async with`` block runs::

    async with tenure.AsyncLeader(astore, "scheduler", ttl=15, on_elected=start):
        await anyio.sleep_forever()
    """

    def __init__(
        self,
        store: AsyncStore,
        name: str,
        ttl: float | timedelta = 30.0,
        *,
        on_elected: Callback | None = None,
        on_lost: Callback | None = None,
        owner: str | None = None,
    ) -> None:
        self._probe = AsyncLock(store, name, ttl, owner=owner)  # validates the arguments
        self._store, self._ttl = store, ttl
        self._on_elected, self._on_lost = on_elected, on_lost
        self._lock: AsyncLock | None = None
        self._elected = anyio.Event()
        self._group: anyio.abc.TaskGroup | None = None
        self._scope = anyio.CancelScope()
        self.terms = 0

    @property
    def name(self) -> str:
        return self._probe.name

    @property
    def is_leader(self) -> bool:
        lock = self._lock
        return lock is not None and lock.held

    @property
    def token(self) -> FencingToken | None:
        lock = self._lock
        return lock.token if lock is not None and lock.held else None

    async def wait_elected(self) -> None:
        """Wait until this candidate is (or has been) elected once."""
        await self._elected.wait()

    async def run(self) -> None:
        """Run for leader until cancelled (what ``async with`` runs in its task group)."""
        while True:
            lock = AsyncLock(self._store, self.name, self._ttl, owner=self._probe.owner)
            try:
                if not await lock.acquire(timeout=ATTEMPT):
                    continue
            except LockNotAcquired:
                log.exception("tenure: leader election stopped", extra={"lock": self.name})
                return
            except StoreUnavailable as exc:
                log.warning("leader election: the store is unavailable (%s)", exc)
                await anyio.sleep(ATTEMPT)
                continue
            await self._term(lock)

    async def _term(self, lock: AsyncLock) -> None:
        lost = anyio.Event()
        caller = LoopCaller.current()
        lock.on_loss(lambda: caller.call_soon(lost.set))
        self._lock = lock
        self.terms += 1
        token = lock.token
        log.info("elected leader", extra={"lock": self.name, "generation": token.generation})
        self._elected.set()
        try:
            await self._call(self._on_elected, token)
            await lost.wait()
        finally:
            self._lock = None
            with anyio.CancelScope(shield=True):
                try:
                    await lock.release()
                except (LeaseLost, StoreUnavailable) as exc:
                    log.warning("leader: could not give the lock back (%s)", exc)
        log.warning(
            "leadership lost: %s",
            lock.lost_reason,
            extra={"lock": self.name, "generation": token.generation},
        )
        await self._call(self._on_lost, token)

    async def _call(self, callback: Callback | None, token: FencingToken) -> None:
        if callback is None:
            return
        try:
            result = callback(token)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("tenure: a leader callback failed", extra={"lock": self.name})

    def stop(self) -> None:
        """Stop running (a leader gives the lock back); the ``async with`` waits for it."""
        self._scope.cancel()

    async def _run_until_stopped(self) -> None:
        with self._scope:
            await self.run()

    async def __aenter__(self) -> AsyncLeader:
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        group.start_soon(self._run_until_stopped, name=f"tenure leader {self.name!r}")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        group, self._group = self._group, None
        assert group is not None
        self.stop()
        return await group.__aexit__(exc_type, exc, tb)
