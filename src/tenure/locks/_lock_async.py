"""`AsyncLock`: a named lock with a fencing token, on an async store. The source of
`Lock` (``_lock.py`` is generated from it by ``tools/async_to_sync.py``).

Acquire = ``submit`` of the lock's job (idempotent, once per store and name) + ``claim``
of it by id: the store's claim is atomic, timed by the store's clock, and gives every
holder a strictly greater generation (the token). Waiting = ``wait_for_jobs`` on the lock's
own queue (LISTEN/NOTIFY, BLPOP, SQLite's short polling), woken by a release and at the
holder's lease expiry. Release = ``release`` (the attempt is refunded). Renewals and the
loss decision are the worker's `LeaseKeeper` and `LeaseHandle`, and the fence registry
knows the lease, so `tenure.fence` refuses its token once it is lost or released.
"""

from __future__ import annotations

import contextlib
import time
import weakref
from datetime import timedelta
from types import TracebackType
from typing import Any

from .._store_async import AsyncStore
from .._validate import validate_id, validate_ttl
from ..errors import InvalidArgument, JobNotFound, LeaseLost, LockNotAcquired, TenureError
from ..models import FencingToken, Lease
from ..worker import REGISTRY, LeaseHandle, default_owner
from ._core import (
    LOCK_MAX_ATTEMPTS,
    WAIT_SLICE,
    AsyncBodyGuard,
    check_lock_job,
    keeper_for_async,
    lock_ids,
    loss_words,
    lost_error,
    not_acquired,
    refusal_words,
    validate_name,
    validate_wait,
)

__all__ = ["AsyncLock"]

# store -> the lock names whose job it has checked (created, in the lock's own queue)
_CHECKED: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()


class AsyncLock:
    """A named lock held under an expiring, renewed lease, with a fencing token::

        async with tenure.aio.lock(store, "nightly-report", ttl=30) as lock:
            await write(report, token=lock.token)   # fenced: a stale holder is refused

    The body is cancelled if the lease is lost (then `LeaseLost` is raised out of the
    ``async with``). Not reentrant; one holder per object at a time: ``acquire(blocking=False)``
    on an object that holds answers False, a waiting acquire raises `LockNotAcquired`.
    """

    def __init__(
        self,
        store: AsyncStore,
        name: str,
        ttl: float | timedelta = 30.0,
        *,
        owner: str | None = None,
        blocking: bool = True,
        timeout: float | timedelta | None = None,
    ) -> None:
        if not isinstance(store, AsyncStore):
            raise InvalidArgument(
                "store",
                "must be a tenure.aio.AsyncStore (from tenure.aio.connect), "
                f"not {type(store).__name__}",
            )
        self._store = store
        self._name = validate_name(name)
        self._job_id, self._queue = lock_ids(self._name)
        self._ttl = validate_ttl(ttl)
        self._owner = validate_id("owner", owner if owner is not None else default_owner())
        self._wait = validate_wait(blocking, timeout)
        self._handle: LeaseHandle | None = None
        self._guard: AsyncBodyGuard | None = None
        self._last: LeaseHandle | None = None
        self._loss: str | None = None

    def __repr__(self) -> str:
        state = "held" if self.held else "not held"
        return f"<AsyncLock {self._name!r} {state} owner {self._owner!r}>"

    @property
    def name(self) -> str:
        return self._name

    @property
    def owner(self) -> str:
        return self._owner

    @property
    def held(self) -> bool:
        """Whether this object holds the lock now (acquired, not released, not lost)."""
        return self._handle is not None and not self._handle.is_lost()

    @property
    def lost(self) -> bool:
        """True once the lock, while held, had to be assumed gone (renewal rejected, or the
        local deadline passed without a confirmed renewal); stays True after release."""
        if self._handle is not None:
            return self._handle.is_lost()
        return self._loss is not None

    @property
    def lost_reason(self) -> str | None:
        """Why the lock was lost (the lease expired, the store refused its renewal or its
        release, an operator cancelled it), or None."""
        handle = self._handle
        if handle is not None:
            return loss_words(handle.lost_kind, handle.lost_reason)
        return self._loss

    @property
    def lease(self) -> Lease:
        """The current (or last) lease of the lock; `LockNotAcquired` if never held."""
        handle = self._handle or self._last
        if handle is None:
            raise LockNotAcquired(f"lock {self._name!r} was never acquired", name=self._name)
        return handle.lease

    @property
    def token(self) -> FencingToken:
        """The fencing token of the current (or last) holding: strictly greater than that
        of every earlier holder of this name."""
        return self.lease.token

    def remaining(self) -> float:
        """Seconds before the local deadline of the current lease; 0 when not held."""
        return self._handle.remaining() if self._handle is not None else 0.0

    def check(self) -> None:
        """Raise `LeaseLost` if the lock is lost; call it before each effect."""
        if self.lost:
            raise self._lost_error()

    def on_loss(self, callback: Any) -> None:
        """Call ``callback()`` (from the thread that decides it) once the holding is lost."""
        if self._handle is None:
            raise LockNotAcquired(f"lock {self._name!r} is not held", name=self._name)
        self._handle.on_loss(callback)

    # -- acquire / release ---------------------------------------------------------------

    async def acquire(
        self, blocking: bool | None = None, timeout: float | timedelta | None = None
    ) -> bool:
        """Take the lock; False if ``timeout`` passed (or, ``blocking=False``, it was held,
        by another holder or by this object itself). Defaults to the ``blocking``/``timeout``
        given to the constructor. Not reentrant: a waiting acquire on an object that holds
        the lock raises `LockNotAcquired` (it could only wait for its own release)."""
        wait = (
            self._wait
            if blocking is None and timeout is None
            else validate_wait(True if blocking is None else blocking, timeout)
        )
        if self._handle is not None:
            if wait == 0:  # the answer threading.Lock gives: not now
                return False
            raise self._reentered()
        start = time.monotonic()
        lease = await self._claim()
        if lease is None:
            check_lock_job(await self._store.get(self._job_id), self._name)
        while lease is None:
            remaining = None if wait is None else wait - (time.monotonic() - start)
            if remaining is not None and remaining <= 0:
                return False
            await self._store.wait_for_jobs(
                queues=[self._queue], timeout=min(WAIT_SLICE, remaining or WAIT_SLICE)
            )
            lease = await self._claim()
        self._hold(lease)
        return True

    async def _claim(self) -> Lease | None:
        checked = _CHECKED.setdefault(self._store, set())
        if self._name not in checked:
            job = await self._store.submit(
                self._job_id, queue=self._queue, max_attempts=LOCK_MAX_ATTEMPTS
            )
            check_lock_job(job, self._name)
            checked.add(self._name)
        try:
            return await self._store.claim(self._job_id, self._owner, self._ttl)
        except JobNotFound:  # deleted since it was checked: create it again
            checked.discard(self._name)
            return await self._claim()

    def _hold(self, lease: Lease) -> None:
        handle = LeaseHandle(lease, self._store.clock)
        self._handle, self._last, self._loss = handle, handle, None
        REGISTRY.add(handle)
        keeper_for_async(self._store).add(handle)

    async def release(self) -> None:
        """Give the lock back (at once claimable by the next waiter). Fenced writes with
        its token are refused from now on. A lock known to be lost is released quietly;
        `LeaseLost` if the store refuses the release of one that was not (an operator
        cancelled it, or it expired unnoticed). `LockNotAcquired` if it is not held."""
        handle = self._handle
        if handle is None:
            raise LockNotAcquired(f"lock {self._name!r} is not held", name=self._name)
        self._handle = None
        loss = handle.finish()
        keeper_for_async(self._store).remove(handle)
        REGISTRY.end(handle, "lost" if loss else "ended")
        self._loss = loss_words(*loss) if loss else None
        try:
            if loss is None or loss[0] == "deadline_passed":
                try:
                    await self._store.release(handle.lease)
                except LeaseLost as exc:
                    if loss is None:  # lost without this process knowing (e.g. cancelled)
                        REGISTRY.end(handle, "lost")
                        words = await self._refusal_words(exc)
                        self._loss = f"release rejected by the store: {words}"
                        raise self._lost_error() from exc
                    # else: known lost, expired at the store meanwhile: nothing to give back
        finally:
            # Kept from now on as a record of how it ended, not as the handle (as a
            # worker's settled jobs are): a process taking many locks keeps no handles
            # alive for it.
            REGISTRY.keep_ended([handle])

    async def _refusal_words(self, exc: LeaseLost) -> str:
        error = None
        if exc.reason == "cancelled":  # the operator's reason, if the store answers
            with contextlib.suppress(TenureError):
                job = await self._store.get(self._job_id)
                error = job.error
        return refusal_words(exc, self._name, error)

    def _lost_error(self) -> LeaseLost:
        return lost_error(self._name, self.lease, self.lost_reason)

    def _reentered(self) -> LockNotAcquired:
        return LockNotAcquired(
            f"lock {self._name!r} is already held by this object (not reentrant): a waiting "
            "acquire could only wait for its own release. release() it first, or use another "
            "lock object; acquire(blocking=False) answers False instead.",
            name=self._name,
        )

    async def __aenter__(self) -> AsyncLock:
        if self._handle is not None:
            raise self._reentered()
        if not await self.acquire():
            holder = None
            with contextlib.suppress(JobNotFound):
                holder = await self._store.get(self._job_id)
            raise not_acquired(self._name, holder, self._wait)
        assert self._handle is not None
        self._guard = AsyncBodyGuard(self._handle)
        self._guard.enter()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        guard, self._guard = self._guard, None
        assert guard is not None
        swallowed = guard.exit(exc)
        with guard.shield(), contextlib.suppress(LeaseLost):
            await self.release()  # a refused release is a loss: raised below
        if self._loss is not None and (exc is None or swallowed):
            raise self._lost_error() from exc
        return swallowed
