"""`AsyncLeader`: leader election on a named lock, as a task of the caller's event loop.

The async twin of `Leader` in behaviour: a thread there, a task here, so only the loop is
written twice; what a term is (counted, announced, ended) is `Candidacy`, shared.
``async with AsyncLeader(...)`` (or ``async with astore.elect(...)``) runs the candidate
in a task group of its own until the block ends; callbacks may be plain functions or
coroutine functions.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import timedelta
from types import TracebackType
from typing import Any

import anyio
import anyio.abc

from .._store_async import AsyncStore
from ..errors import InvalidArgument, LeaseLost, LockNotAcquired, StoreUnavailable
from ..models import FencingToken
from ..worker import LoopCaller
from ._candidacy import ATTEMPT, Candidacy
from ._core import validate_callback
from ._lock_async import AsyncLock

__all__ = ["AsyncLeader"]

Callback = Callable[[FencingToken], Any]


class AsyncLeader:
    """Run for leader of ``name`` while the ``async with`` block runs::

    async with tenure.AsyncLeader(astore, "scheduler", ttl=15, on_elected=start):
        await anyio.sleep_forever()

    ``stopped`` and ``error`` say whether it still runs: a lock an operator cancelled stops
    it for good (``error`` says so, and ``wait_elected`` raises it).
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
        validate_callback("on_elected", on_elected)
        validate_callback("on_lost", on_lost)
        self._store, self._ttl = store, ttl
        self._on_elected, self._on_lost = on_elected, on_lost
        self._candidacy: Candidacy[AsyncLock] = Candidacy(self._probe.name)
        self._elected = anyio.Event()
        # Set when first elected or when stopped, whichever comes first (`wait_elected`).
        self._changed = anyio.Event()
        self._stopped = False
        self._group: anyio.abc.TaskGroup | None = None
        self._scope = anyio.CancelScope()

    @property
    def name(self) -> str:
        return self._probe.name

    @property
    def terms(self) -> int:
        """How many times this candidate was elected."""
        return self._candidacy.terms

    @property
    def is_leader(self) -> bool:
        return self._candidacy.is_leader

    @property
    def token(self) -> FencingToken | None:
        """The token of the current term, or None when not the leader."""
        return self._candidacy.token

    @property
    def stopped(self) -> bool:
        """True once the candidate no longer runs: `stop()` was called (or its ``async
        with`` ended, or `run` was cancelled), or it stopped on its own because its lock
        cannot be taken (``error``)."""
        return self._stopped

    @property
    def error(self) -> Exception | None:
        """Why the candidate stopped on its own (a `LockNotAcquired` saying, e.g., that an
        operator cancelled the lock and how to use it again), or None."""
        return self._candidacy.error

    async def wait_elected(self) -> None:
        """Wait until this candidate is (or has been) elected once; `LockNotAcquired` at
        once if it stopped before (``error`` says why, when it stopped on its own)."""
        await self._changed.wait()
        if not self._elected.is_set():
            error = self._candidacy.error
            raise self._candidacy.stopped_error() from error

    async def run(self) -> None:
        """Run for leader until cancelled (what ``async with`` runs in its task group);
        returns if the lock cannot be taken (``error`` says why)."""
        try:
            await self._campaign()
        finally:
            self._set_stopped()

    def _set_stopped(self) -> None:
        self._stopped = True
        self._changed.set()

    async def _campaign(self) -> None:
        while True:
            lock = AsyncLock(self._store, self.name, self._ttl, owner=self._probe.owner)
            try:
                if not await lock.acquire(timeout=ATTEMPT):
                    continue
            except (LockNotAcquired, InvalidArgument) as exc:  # until someone mends it
                self._candidacy.cannot_run(exc)
                return
            except StoreUnavailable as exc:
                self._candidacy.store_down(exc)
                await anyio.sleep(ATTEMPT)
                continue
            await self._term(lock)

    async def _term(self, lock: AsyncLock) -> None:
        lost = anyio.Event()
        caller = LoopCaller.current()
        lock.on_loss(lambda: caller.call_soon(lost.set))
        token = self._candidacy.elected(lock)
        self._elected.set()
        self._changed.set()
        try:
            await self._call(self._on_elected, token)
            await lost.wait()
        finally:
            self._candidacy.ended()
            with anyio.CancelScope(shield=True):
                try:
                    await lock.release()
                except (LeaseLost, StoreUnavailable) as exc:
                    self._candidacy.not_given_back(exc)
        self._candidacy.deposed(lock, token)
        await self._call(self._on_lost, token)

    async def _call(self, callback: Callback | None, token: FencingToken) -> None:
        if callback is None:
            return
        try:
            result = callback(token)
            if inspect.isawaitable(result):
                await result
        except Exception:
            self._candidacy.callback_failed()

    def stop(self) -> None:
        """Stop running (a leader gives the lock back); the ``async with`` waits for it."""
        self._scope.cancel()
        self._set_stopped()

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
