"""`LeaseKeeper`: renews held leases on a thread of its own and decides loss on another.

* The **renewer** thread sends the renewals, with its own store connection, so a handler
  that blocks its thread or the event loop (CPU-bound code, blocking calls) cannot starve
  it, and a slow claim or idle wait on the worker's connection cannot delay it. Its store
  renews many leases in one call (`renew_many`), so a worker holding N leases sends one
  call per renewal period rather than N (`renewal_batch` decides which go together). The
  worker's connection is opened half a period ahead of the first renewal (`OnDemandStore`).
* The **watchdog** thread does no I/O at all: it wakes at each lease's local deadline and
  declares the lease lost if no renewal was confirmed by then. A renewal that hangs (the
  store stopped answering) therefore cannot delay the decision. It also wakes at each
  handler's per-attempt timeout, which ends renewals and stops the handler the same way.

Both start with the first lease the keeper is given, not with the worker: a run that
holds no lease starts neither. Both wait on the worker's clock (`Clock.monotonic`). On the
system clock they sleep until the next renewal or deadline (adding a lease due earlier
wakes them); on any other clock they wake at least every `TICK` seconds of real time while
leases are held, so a `ManualClock` that a test moves is noticed promptly. Waking every
`TICK` on the system clock too cost a busy worker two thread switches, each taking the GIL
from the event loop, twenty times a second for nothing.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from .._clock import Clock, SystemClock
from .._validate import MAX_BATCH
from ..errors import LeaseLost, StoreLost, StoreUnavailable
from ..models import Lease
from ._lease import LeaseHandle
from ._renewer_store import OnDemandStore
from ._retry import RETRY, Outage
from ._stats import Stats

__all__ = ["TICK", "LeaseKeeper", "Renewer", "joined_renewal", "renewal_batch"]

log = logging.getLogger("tenure")

TICK = 0.05  # seconds of real time: the longest the keeper threads sleep while leases exist
JITTER = (0.75, 1.0)  # each renewal period is the configured one times a factor in this range
_LOW, _SPAN = JITTER[0], JITTER[1] - JITTER[0]


class Renewer(Protocol):
    """What the keeper renews with: a `tenure.Store` (the worker's own connection), or an
    adapter with the same ``renew`` (`tenure.locks` renews an async store's lock leases
    through its event loop)."""

    def renew(self, lease: Lease) -> Lease: ...

    # And, when it has one (`tenure.Store` does), ``renew_many(leases)``, answering a
    # renewed `Lease` or a `LeaseLost` per lease, in order: the keeper then sends batches.


def renewal_batch(
    active: list[LeaseHandle], now: float, renew_every: Callable[[Lease], float]
) -> list[LeaseHandle]:
    """What one `renew_many` call renews once a lease of ``active`` is due at ``now``: the
    due ones, and every other at least half-way to its own renewal (``renew_every``: its
    period), the soonest local deadline first.

    Leases claimed at different times fall into step this way after one renewal each:
    a lease is renewed early by at most half its period, the price of a row in a call that
    is sent anyway, where renewing it on its own a little later would cost a round trip.
    """
    batch = [h for h in active if h.next_renew_at - now <= renew_every(h.lease) / 2]
    batch.sort(key=lambda h: h.lease.local_deadline)
    return batch


def joined_renewal(drawn: float, renewer_wake: float, now: float, period: float) -> float:
    """When a claim made at ``now`` is first renewed: at ``drawn``, its jittered time, or at
    ``renewer_wake``, when the renewer sleeps until an earlier claim's renewal that comes
    after ``drawn`` but within this claim's ``period``.

    Renewed then, with that claim's, the new leases need no wake-up of the renewer now (a
    thread switch, the GIL taken from the event loop): half the claims of a busy worker
    drew a time before the renewer's and woke it. Their renewal still falls between their
    jittered time and a whole period after the claim, the range the jitter allows, and the
    renewer's own time was jittered, so workers stay spread over the period."""
    return renewer_wake if drawn < renewer_wake <= now + period else drawn


class LeaseKeeper:
    """Keeps the leases of one worker alive, and declares them lost when they are not."""

    def __init__(
        self,
        store: Renewer,
        clock: Clock,
        stats: Stats,
        *,
        renew_every: Callable[[Lease], float],
        rng: random.Random | None = None,
        outage: Outage | None = None,
    ) -> None:
        self._store = store
        # A connection the keeper opens ahead of its first renewal (`_open_at`).
        self._on_demand = store if isinstance(store, OnDemandStore) else None
        self._open_ahead_failed = False
        self._renew_many: Callable[[list[Lease]], list[Lease | LeaseLost]] | None = getattr(
            store, "renew_many", None
        )
        self._clock = clock
        self._stats = stats
        self._outage = outage or Outage(clock, stats)
        # A lease's renewal period: a function of its ttl alone (`add_many` asks once per ttl).
        self._renew_every = renew_every
        # The system clock's monotonic time is the one `Condition.wait` sleeps on: no TICK.
        self._tick = math.inf if type(clock) is SystemClock else TICK
        self._rng = rng or random.Random()
        # The condition's own lock, also taken directly where nothing waits or notifies
        # (registering and forgetting leases, once per job): a Condition's ``with`` adds
        # two Python calls around the lock's.
        self._lock = threading.RLock()
        # One condition per thread, on the one lock: a claim wakes only the thread it is
        # news to (mostly neither), not both.
        self._renew_cond = threading.Condition(self._lock)
        self._watch_cond = threading.Condition(self._lock)
        self._handles: set[LeaseHandle] = set()
        self._removed: deque[LeaseHandle] = deque()  # appends are atomic on any thread
        # ``remove(handle)``: stop keeping ``handle`` (finished). Noted without the lock (the
        # deque's own append, atomic on any thread, and no Python call: once per job) and
        # forgotten under it by the next registration or either thread's next look. The
        # threads skip a finished handle meanwhile.
        self.remove: Callable[[LeaseHandle], None] = self._removed.append
        self._stopped = False
        # When (clock time) each thread wakes at the latest, under the lock (inf: only when
        # notified): adding a lease notifies them only if it is due before that, so that a
        # busy worker does not wake both threads (and hand the GIL over) for every job.
        self._renew_wake = self._watch_wake = math.inf
        self._threads = [
            threading.Thread(target=self._renew_loop, name="tenure-renewer", daemon=True),
            threading.Thread(target=self._watch_loop, name="tenure-lease-watchdog", daemon=True),
        ]
        # The threads `start` readied and no lease has started yet (`add_many` starts them).
        self._unstarted: list[threading.Thread] = []

    def start(self) -> None:
        """Ready the keeper. Its threads start with the first leases it is given
        (`add_many`), before those leases' handlers run: a run that holds no lease (a
        burst that finds no job, a worker idle since its start) starts no thread, where
        two thread starts were a tenth of a short run's start."""
        self._unstarted = list(self._threads)

    def stop(self, timeout: float = 5.0) -> None:
        with self._lock:
            self._stopped = True
            self._renew_cond.notify()
            self._watch_cond.notify()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            if thread.is_alive() and thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))

    def stop_if_idle(self) -> bool:
        """Stop the threads without waiting for them, if the renewer is asleep between
        calls: it then sends nothing more, and both threads end at their next look (a
        thread of the caller's own to wait on them costs a short run more than they do).
        False, and nothing done, while the renewer is awake (a call may be on its way):
        `stop` waits for it."""
        with self._lock:
            if self._renew_wake == -math.inf:  # awake: `_wait` sets it while asleep
                return False
            self._stopped = True
            self._renew_cond.notify()
            self._watch_cond.notify()
        return True

    def add(self, handle: LeaseHandle) -> None:
        self.add_many([handle])

    def add_many(self, handles: list[LeaseHandle]) -> None:
        """Keep ``handles`` alive: a claim's leases are registered under one lock."""
        every, random, keep = self._renew_every, self._rng.random, self._handles.add
        with self._lock:
            self._forget_removed()
            now = self._clock.monotonic()
            renew_at = watch_at = next_renew_at = math.inf
            ttl = math.nan
            for handle in handles:
                lease = handle.lease
                if lease.ttl != ttl:
                    # A claim's leases share a ttl, hence a period: asked once, and drawn
                    # once with its jitter (`_period`, written out), so that they are due
                    # together, as they would be after their first renewal anyway
                    # (`renewal_batch`). The jitter spreads claims, not a claim's leases.
                    ttl = lease.ttl
                    period = every(lease)
                    next_renew_at = joined_renewal(
                        now + period * (_LOW + _SPAN * random()), self._renew_wake, now, period
                    )
                    if next_renew_at < renew_at:
                        renew_at = next_renew_at
                handle.next_renew_at = next_renew_at
                keep(handle)
                # `decide_at`, written out: the handler has not ended.
                if lease.local_deadline < watch_at:
                    watch_at = lease.local_deadline
                timeout_at = handle.timeout_at
                if timeout_at is not None and timeout_at < watch_at:
                    watch_at = timeout_at
            if renew_at < self._renew_wake:
                self._renew_cond.notify()
            if watch_at < self._watch_wake:
                self._watch_cond.notify()
            starting: list[threading.Thread] = []
            if handles and self._unstarted and not self._stopped:
                starting, self._unstarted = self._unstarted, []
                # Awake until each has looked at the leases and gone to sleep (`_wait`):
                # no claim needs to wake them, and `stop_if_idle` waits for the renewer.
                self._renew_wake = self._watch_wake = -math.inf
        for thread in starting:  # out of the lock, which each thread takes first
            thread.start()

    def _forget_removed(self) -> None:
        """Under the lock: forget the handles removed so far."""
        removed, discard = self._removed, self._handles.discard
        while removed:
            discard(removed.popleft())

    def _period(self, lease: Lease) -> float:
        # random.uniform(low, high)'s own formula, one Python call fewer per lease.
        return self._renew_every(lease) * (_LOW + _SPAN * self._rng.random())

    def _wait(self, until: float | None, *, renewer: bool) -> None:
        """Under the lock: sleep until monotonic ``until`` (clock time), at most TICK of
        real time unless the clock is the system's."""
        wake = math.inf if until is None else until
        if renewer:
            self._renew_wake = wake
            cond = self._renew_cond
        else:
            self._watch_wake = wake
            cond = self._watch_cond
        try:
            if until is None:
                cond.wait()
                return
            delay = until - self._clock.monotonic()
            if delay > 0:
                cond.wait(min(delay, self._tick))
        finally:
            if renewer:
                self._renew_wake = -math.inf
            else:
                self._watch_wake = -math.inf

    # -- renewer -------------------------------------------------------------------------

    def _renew_loop(self) -> None:
        while True:
            with self._lock:
                if self._stopped:
                    return
                self._forget_removed()
                now = self._clock.monotonic()
                active = [h for h in self._handles if not (h.finished or h.lost_flag)]
                if not any(h.next_renew_at <= now for h in active):
                    open_at = self._open_at(active)
                    if open_at is None or open_at > now:
                        until = min((h.next_renew_at for h in active), default=None)
                        self._wait(until if open_at is None else open_at, renewer=True)
                        continue
                    due = None  # nothing to renew yet: the connection to open first
                else:
                    # Renewing now: the renewal opens the connection if it must, and the
                    # next leases may open it ahead again if that failed.
                    self._open_ahead_failed = False
                    if self._renew_many is not None:
                        due = renewal_batch(active, now, self._renew_every)
                    else:
                        due = [h for h in active if h.next_renew_at <= now]
                        due.sort(key=lambda h: h.lease.local_deadline)
            if due is None:
                self._open_ahead()
                continue
            if self._renew_many is not None:
                for start in range(0, len(due), MAX_BATCH):
                    if self._stopped:
                        return
                    self._renew_batch(due[start : start + MAX_BATCH])
                continue
            for handle in due:
                if self._stopped:
                    return
                self._renew(handle)

    def _open_at(self, active: list[LeaseHandle]) -> float | None:
        """Under the lock: when to open an on-demand connection (`OnDemandStore`) that is
        not open yet, half a renewal period ahead of the first renewal; None if there is
        nothing to open, or the last try failed (the renewal opens it)."""
        store = self._on_demand
        if store is None or store.is_open or self._open_ahead_failed or not active:
            return None
        every = self._renew_every
        return min(h.next_renew_at - every(h.lease) / 2 for h in active)

    def _open_ahead(self) -> None:
        """Open the on-demand connection now, so that the first renewal does not wait for
        a connect; if that fails, the renewal opens it, and a failure then is a failed
        renewal (retried while the lease's deadline allows)."""
        assert self._on_demand is not None
        try:
            self._on_demand.open()
        except Exception as exc:
            with self._lock:
                self._open_ahead_failed = True
            log.debug(
                "opening the renewer's connection failed; the renewal will try again",
                extra={"error": str(exc)},
            )

    def _renew(self, handle: LeaseHandle) -> None:
        lease = handle.lease_to_renew()
        if lease is None:
            return
        sent_at = self._clock.monotonic()
        try:
            renewed = self._store.renew(lease)
        except LeaseLost as exc:
            self._rejected(handle, exc)
            return
        except Exception as exc:
            self._unanswered(handle, lease, exc, sent_at)
            return
        self._outage.ok()
        self._adopt(handle, lease, renewed, sent_at)

    def _renew_batch(self, handles: list[LeaseHandle]) -> None:
        """One `renew_many` call for ``handles``: each answer is taken as `_renew` takes
        one; an error without answers is every lease's."""
        held = [(handle, handle.lease_to_renew()) for handle in handles]
        sent = [(handle, lease) for handle, lease in held if lease is not None]
        if not sent:
            return
        assert self._renew_many is not None
        sent_at = self._clock.monotonic()
        try:
            answers = self._renew_many([lease for _, lease in sent])
        except Exception as exc:
            for handle, lease in sent:
                self._unanswered(handle, lease, exc, sent_at)
            return
        self._outage.ok()
        for (handle, lease), answer in zip(sent, answers, strict=True):
            if isinstance(answer, LeaseLost):
                self._rejected(handle, answer)
            else:
                self._adopt(handle, lease, answer, sent_at)

    def _rejected(self, handle: LeaseHandle, exc: LeaseLost) -> None:
        if handle.finished or handle.is_settling:
            # The job is being settled: the settle's own answer tells whether the lease
            # was still current (a complete that landed first rejects this renewal). No
            # renewal of it can succeed now: none is sent until its deadline.
            with self._lock:
                handle.next_renew_at = handle.lease.local_deadline
            return
        handle.mark_lost(f"renewal rejected by the store: {exc}", "renewal_rejected")

    def _unanswered(
        self, handle: LeaseHandle, lease: Lease, exc: Exception, sent_at: float
    ) -> None:
        if isinstance(exc, StoreLost):
            self._stats.incr("renewal_errors")
            self._outage.store_lost(exc)  # the worker revokes every lease
            with self._lock:
                handle.next_renew_at = lease.local_deadline
            return
        self._renewal_failed(handle, lease, exc, self._clock.monotonic() - sent_at)

    def _adopt(self, handle: LeaseHandle, lease: Lease, renewed: Lease, sent_at: float) -> None:
        handle.renew_failures = 0
        latency = self._clock.monotonic() - sent_at
        if not handle.renewed(renewed):
            return
        self._stats.renewal(latency)
        with self._lock:
            handle.next_renew_at = sent_at + self._period(renewed)
        slow = latency > lease.ttl / 10
        log.log(
            logging.WARNING if slow else logging.DEBUG,
            "slow lease renewal" if slow else "lease renewed",
            extra={
                "job_id": lease.job_id,
                "owner": lease.owner,
                "generation": lease.generation,
                "latency": round(latency, 6),
            },
        )

    def _renewal_failed(
        self, handle: LeaseHandle, lease: Lease, exc: Exception, latency: float
    ) -> None:
        """A renewal without an answer: retried under `RETRY` while the local deadline
        allows (then the watchdog declares the loss); one line per outage, not per call."""
        self._stats.incr("renewal_errors")
        extra = {
            "job_id": lease.job_id,
            "owner": lease.owner,
            "generation": lease.generation,
            "latency": round(latency, 6),
            "error": str(exc),
            "remaining": round(handle.remaining(), 6),
        }
        now = self._clock.monotonic()
        if isinstance(exc, StoreUnavailable):
            handle.renew_failures += 1
            self._outage.failed(exc, operation="renew")
            wait = RETRY.next_wait(exc, handle.renew_failures, now, lease.local_deadline, self._rng)
            # None: no renewal could be confirmed in time; the watchdog decides the loss.
            retry_at = lease.local_deadline if wait is None else now + wait
            log.debug("lease renewal failed (store unavailable)", extra=extra)
        else:
            # Not an availability problem (a bug, or a store someone changed): say it each
            # time, with the traceback.
            retry_at = now + max(0.01, min(self._renew_every(lease) / 3, handle.remaining() / 4))
            log.warning(
                "lease renewal failed; retrying in %.3f s",
                retry_at - now,
                exc_info=True,
                extra=extra,
            )
        with self._lock:
            handle.next_renew_at = retry_at

    # -- watchdog ------------------------------------------------------------------------

    def _watch_loop(self) -> None:
        while True:
            with self._lock:
                if self._stopped:
                    return
                self._forget_removed()
                now = self._clock.monotonic()
                active = [h for h in self._handles if not (h.finished or h.lost_flag)]
                # A lease's local deadline, or its handler's timeout if that comes first.
                deadlines = [(h.decide_at(), h) for h in active]
                overdue = [h for deadline, h in deadlines if deadline <= now]
                if not overdue:
                    self._wait(min((d for d, _ in deadlines), default=None), renewer=False)
                    continue
            for handle in overdue:
                handle.is_lost()  # decides the loss and runs its callbacks, here
