"""What sync and async locks share: names, ids, argument rules, the renewal keepers, and
the words of their errors. No I/O here.

A lock named ``N`` is the job ``lock:N`` in a queue of its own, ``tenure.lock:N``: a
queue per lock, so that a waiter's `wait_for_jobs` wakes only for its own lock (a ready,
unheld lock in a shared queue would wake every waiter of every other lock at once: that is
spinning). Its fencing token is the lease's: ``FencingToken("lock:N", generation)``.
"""

from __future__ import annotations

import contextlib
import math
import threading
import weakref
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel

from .._clock import Clock
from .._validate import MAX_ATTEMPTS, MAX_ID_LENGTH, validate_delay, validate_id
from ..errors import InvalidArgument, LeaseLost, LockNotAcquired, TenureError
from ..models import Job, JobState, Lease
from ..worker import LeaseHandle, LeaseKeeper, LoopCaller, Renewer, Stats

__all__ = [
    "AsyncBodyGuard",
    "BodyGuard",
    "LOCK_ID_PREFIX",
    "LOCK_MAX_ATTEMPTS",
    "LOCK_QUEUE_PREFIX",
    "MAX_NAME_LENGTH",
    "WAIT_SLICE",
    "check_lock_job",
    "keeper_for",
    "keeper_for_async",
    "lock_ids",
    "loss_words",
    "lost_error",
    "not_acquired",
    "refusal_words",
    "validate_callback",
    "validate_name",
    "validate_wait",
]

LOCK_ID_PREFIX = "lock:"
LOCK_QUEUE_PREFIX = "tenure.lock:"
MAX_NAME_LENGTH = MAX_ID_LENGTH - len(LOCK_QUEUE_PREFIX)
# A lock job may expire this many times in all before the store buries it (see limits in
# docs/locks.md); a release refunds its attempt, so only expiries count.
LOCK_MAX_ATTEMPTS = MAX_ATTEMPTS
# The longest one wait for a release lasts before the waiter tries again anyway: a bound on
# a notification lost with a dropped connection, not a polling period (waits wake on the
# release itself, and at the holder's lease expiry).
WAIT_SLICE = 5.0


def validate_name(name: object) -> str:
    """Lock names: ids of 1-243 (`MAX_NAME_LENGTH`) characters of text, no control
    characters; the bound is the lock's own (the job id's 255 less its queue's prefix)."""
    if isinstance(name, str) and not 0 < len(name) <= MAX_NAME_LENGTH:
        got = "it is empty" if not name else f"got {len(name)}"
        raise InvalidArgument(
            "name", f"must be 1-{MAX_NAME_LENGTH} characters for a lock name, {got}"
        )
    return validate_id("name", name)


def lock_ids(name: str) -> tuple[str, str]:
    """The job id and queue of the lock ``name`` (`InvalidArgument` for a name no lock can
    have: see `validate_name`)."""
    name = validate_name(name)
    return LOCK_ID_PREFIX + name, LOCK_QUEUE_PREFIX + name


def validate_callback(argument: str, value: object) -> None:
    """A leader's ``on_elected`` / ``on_lost``: None or a callable (checked when the leader
    is made, not when the first term begins or ends)."""
    if value is not None and not callable(value):
        raise InvalidArgument(
            argument, f"must be a callable taking the term's token, or None; not {value!r:.60}"
        )


def validate_wait(blocking: object, timeout: object) -> float | None:
    """Seconds to wait for the lock: 0 (``blocking=False``), None (forever) or a timeout."""
    if not isinstance(blocking, bool):
        raise InvalidArgument("blocking", f"must be a bool, not {type(blocking).__name__}")
    if timeout is None or (isinstance(timeout, float) and math.isinf(timeout) and timeout > 0):
        return None if blocking else 0.0
    seconds = validate_delay(timeout, "timeout")
    if not blocking and seconds:
        raise InvalidArgument("timeout", "must not be given with blocking=False")
    return seconds if blocking else 0.0


def check_lock_job(job: Job, name: str) -> None:
    """Refuse a lock whose job is not a lock's (someone submitted that id to another
    queue) or cannot be claimed (dead after its last expiry, or cancelled by an operator)."""
    job_id, queue = lock_ids(name)
    if job.queue != queue:
        raise InvalidArgument(
            "name",
            f"lock {name!r} needs job {job_id!r} in queue {queue!r}, but a job with that id "
            f"exists in queue {job.queue!r}; choose another lock name",
        )
    if job.state == JobState.CANCELLED:
        raise LockNotAcquired(
            f"lock {name!r} cannot be acquired: an operator cancelled it{_reason(job.error)}, "
            f"and its job {job_id!r} stays cancelled (generation {job.generation}) until it "
            f"is requeued: store.requeue({job_id!r}) or `tenure jobs requeue {job_id}` (its "
            "tokens go on from the same sequence). Or delete the job (the store's generation "
            "floor keeps the next tokens above every old one).",
            name=name,
        )
    if job.state not in (JobState.READY, JobState.LEASED):
        raise LockNotAcquired(
            f"lock {name!r} cannot be acquired: its job {job_id!r} is {job.state} "
            f"(generation {job.generation}, attempts {job.attempts} of {job.max_attempts}: "
            f"{job.error or 'no error'}). To use it again: store.requeue({job_id!r}, "
            "reset_attempts=True) (its tokens go on from the same sequence), or delete the "
            "job (the store's generation floor keeps the next tokens above every old one).",
            name=name,
        )


def _reason(error: str | None) -> str:
    """The operator's reason for a cancel, when one was given (the store's default,
    "cancelled", says nothing more)."""
    return f" (reason: {error!r})" if error and error != "cancelled" else ""


def not_acquired(name: str, holder: Job | None, wait: float | None) -> LockNotAcquired:
    who = f" (held by {holder.owner!r}, generation {holder.generation})" if holder else ""
    how = "it was held" if not wait else f"it was still held after {wait:g} s"
    return LockNotAcquired(f"lock {name!r} was not acquired: {how}{who}", name=name)


# -- the words of a loss ------------------------------------------------------------------


def refusal_words(exc: LeaseLost, name: str, error: str | None = None) -> str:
    """What the store's refusal of a lock's renewal or release means for the lock, in the
    lock's words (``error``: the cancelled job's reason, when it was read)."""
    job_id = LOCK_ID_PREFIX + name
    now = exc.current_generation
    if exc.reason == "cancelled":
        return (
            f"an operator cancelled the lock{_reason(error)}: nobody can take it until it is "
            f"requeued (store.requeue({job_id!r}) or `tenure jobs requeue {job_id}`) or its "
            "job deleted"
        )
    if exc.reason == "claimed":
        return (
            f"its lease expired and another holder took the lock (generation {now}, owner "
            f"{exc.current_owner!r})"
        )
    if exc.reason == "superseded":
        return (
            f"its lease expired and the lock was taken since (it is at generation {now} "
            "now): another holder may have it"
        )
    if exc.reason in ("expired", "ended"):  # a lock's lease ends only by expiry
        return "its lease expired by the store's clock: another holder may take the lock now"
    if exc.reason == "missing":
        return f"the lock's job {job_id!r} no longer exists"
    return f"the store no longer accepts this holding ({exc.reason or 'no reason given'})"


def loss_words(kind: str | None, reason: str | None) -> str | None:
    """A lock's ``lost_reason`` from its lease handle's. A renewal the store refused is in
    the lock's words already (`_WeakRenewer`; the keeper puts "renewal rejected by the
    store: " before them); a lease that ran out here is told what that means."""
    if reason is None or kind != "deadline_passed":
        return reason
    return f"{reason}, so its lease must be taken as expired: another holder may have it now"


def lost_error(name: str, lease: Lease, reason: str | None) -> LeaseLost:
    """The `LeaseLost` of a lock lost while held (``lock.check()``, the end of its ``with``,
    a release the store refused)."""
    reason = (reason or "no reason recorded").rstrip(" .")
    return LeaseLost(
        f"lock {name!r} (generation {lease.generation}, owner {lease.owner!r}) was lost "
        f"while held: {reason}. Stop the work it guarded: fenced writes with its token "
        f"({lease.token}) are refused.",
        job_id=lease.job_id,
        generation=lease.generation,
    )


# -- renewal keepers -----------------------------------------------------------------------


# Runs a store method with its arguments, from the renewer thread: the store's own call
# (sync stores), or the call sent through the store's event loop (async stores).
StoreCall = Callable[..., Any]


class _WeakRenewer:
    """Renews through a store without keeping it alive; a refusal is told in the lock's
    words (`refusal_words`)."""

    def __init__(self, store: Any, call: StoreCall) -> None:
        self._store = weakref.ref(store)
        self._call = call

    def renew(self, lease: Lease) -> Lease:
        name = lease.job_id.removeprefix(LOCK_ID_PREFIX)
        store = self._store()
        if store is None:
            raise LeaseLost(
                f"the store of lock {name!r} was closed and collected while it was held",
                job_id=lease.job_id,
                generation=lease.generation,
            )
        try:
            renewed: Lease = self._call(store.renew, lease)
        except LeaseLost as exc:
            error = None
            if exc.reason == "cancelled":  # the operator's reason, if the store answers
                with contextlib.suppress(TenureError):
                    error = self._call(store.get, lease.job_id).error
            raise LeaseLost(
                refusal_words(exc, name, error),
                job_id=exc.job_id,
                generation=exc.generation,
                current_generation=exc.current_generation,
                current_owner=exc.current_owner,
                reason=exc.reason,
            ) from exc
        return renewed


_KEEPERS: weakref.WeakKeyDictionary[Any, tuple[object, LeaseKeeper]] = weakref.WeakKeyDictionary()
_KEEPERS_LOCK = threading.Lock()


def _keeper(store: Any, clock: Clock, call: StoreCall, loop: object) -> LeaseKeeper:
    """The `LeaseKeeper` (renewer and watchdog threads) of every lock taken on ``store``
    (in event loop ``loop``, for async stores), started on first use and stopped when the
    store is collected."""
    with _KEEPERS_LOCK:
        found = _KEEPERS.get(store)
        if found is not None and found[0] is loop:
            return found[1]
        if found is not None:
            found[1].stop(0)
        renewer: Renewer = _WeakRenewer(store, call)
        keeper = LeaseKeeper(renewer, clock, Stats(), renew_every=lambda lease: lease.ttl / 3)
        keeper.start()
        _KEEPERS[store] = (loop, keeper)
        weakref.finalize(store, keeper.stop, 0)
        return keeper


def keeper_for(store: Any) -> LeaseKeeper:
    """The keeper of the sync locks of ``store``: renewals on the store itself (a
    `tenure.Store` is safe to share between threads)."""
    return _keeper(store, store.clock, lambda method, *args: method(*args), None)


def keeper_for_async(store: Any) -> LeaseKeeper:
    """The keeper of the async locks of ``store`` taken in the running event loop: the
    renewer thread sends each renewal through that loop (an async store's connections
    belong to it) and waits for its answer; the watchdog thread needs no loop at all, so a
    loop that stops answering loses the lock at its local deadline, as it should."""
    token = anyio.lowlevel.current_token()

    def call(method: Callable[..., Any], *args: Any) -> Any:
        return anyio.from_thread.run(method, *args, token=token)

    return _keeper(store, store.clock, call, token)


class BodyGuard:
    """The sync body of a lock runs on: loss sets ``lock.lost`` and the fences refuse."""

    def __init__(self, handle: LeaseHandle) -> None:
        self.handle = handle

    def enter(self) -> None:
        pass

    def exit(self, exc: BaseException | None) -> bool:
        return False

    def shield(self) -> AbstractContextManager[object]:
        return nullcontext()


class AsyncBodyGuard(BodyGuard):
    """The async body of a lock is cancelled at loss (from the watchdog's thread, through
    the loop, without waiting for it), as the worker cancels an async handler."""

    def __init__(self, handle: LeaseHandle) -> None:
        super().__init__(handle)
        self._scope = anyio.CancelScope()
        self._caller = LoopCaller.current()

    def enter(self) -> None:
        self._scope.__enter__()
        self.handle.on_loss(lambda: self._caller.call_soon(self._scope.cancel))

    def exit(self, exc: BaseException | None) -> bool:
        swallowed = self._scope.__exit__(type(exc) if exc else None, exc, None)
        return bool(swallowed)

    def shield(self) -> AbstractContextManager[object]:
        return anyio.CancelScope(shield=True)
