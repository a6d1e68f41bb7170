"""One held lease as the worker tracks it, and the process-wide registry of held leases.

A `LeaseHandle` answers "is this lease lost?" the same way on every thread: lost once a
renewal was rejected, once the local deadline has passed without a confirmed renewal
(checked *when asked*, so a thread that wakes up after a stall sees the truth before any
watchdog has run), once the handler ran past its per-attempt timeout (``timed_out``, also
checked when asked: the lease is never renewed past it), or once the worker revoked it
(stopping). Loss is final: a renewal answer that arrives after the deadline does not bring
the lease back.

A timed-out lease is "lost" to the handler (ctx.lost, the fences refuse, it is stopped and
no longer renewed) but still the worker's in the store until its local deadline: the worker
fails the attempt with it (`_settle`).

The registry lets code that only has a fencing token (the `tenure.fence` helpers) ask
whether a worker in this process holds that lease, has lost it, or has finished with it:
see `token_state` and `check_token`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Literal

from .._clock import Clock
from ..errors import InvalidArgument, LeaseLost
from ..models import FencingToken, Lease

__all__ = [
    "REGISTRY",
    "check_token",
    "lease_extra",
    "LeaseHandle",
    "LossKind",
    "token_state",
    "TokenState",
]

log = logging.getLogger("tenure")

LossKind = Literal[
    "renewal_rejected", "deadline_passed", "revoked", "rejected_by_store", "timed_out"
]
TokenState = Literal["held", "lost", "ended", "unknown"]


class LeaseHandle:
    """The worker's view of one lease while its handler runs. Thread-safe."""

    # One per job claimed: slots make it smaller and quicker to build.
    __slots__ = (
        "_callbacks",
        "_clock",
        "_finished",
        "_lock",
        "_lost_at",
        "_lost_kind",
        "_lost_reason",
        "_on_lost",
        "_renew_listeners",
        "_settling",
        "_timeout",
        "ended_as",
        "lease",
        "next_renew_at",
        "renew_failures",
        "timeout_at",
    )

    def __init__(
        self,
        lease: Lease,
        clock: Clock,
        on_lost: Callable[[LeaseHandle], None] | None = None,
        timeout: float | None = None,
        lock: threading.Lock | None = None,
    ) -> None:
        # Held only for a few reads and writes of this handle's own fields, never while
        # another lock is taken or a callback runs: so the handles of one claim may share
        # one (``lock``), which spares a lock per job.
        self._lock = lock or threading.Lock()
        # The most recent lease (renewals replace it; job, owner and generation stay): a
        # plain attribute, read without the lock (one reference read is atomic) and
        # replaced under it. Read by the worker several times per job.
        self.lease: Lease = lease
        self._clock = clock
        # The per-attempt timeout (seconds) and when it passes, on the clock's monotonic time
        # from now (the handler starts now): set once, read by the keeper without a call.
        self._timeout = timeout
        self.timeout_at = None if timeout is None else clock.monotonic() + timeout
        self._on_lost = on_lost
        self._lost_reason: str | None = None
        self._lost_kind: LossKind | None = None
        self._lost_at: float | None = None
        self._finished = False
        self._settling = False
        # How the lease ended here, as the registry tells it (`_Registry.end`): None while
        # held, else "ended" or "lost".
        self.ended_as: TokenState | None = None
        # Made by the first `on_loss` / `on_renewed` (most jobs have neither): None till then.
        self._callbacks: list[Callable[[], object]] | None = None
        self._renew_listeners: list[Callable[[Lease], None]] | None = None
        # Owned by the LeaseKeeper (under its lock): when to send the next renewal, and
        # how many renewals in a row failed without an answer.
        self.next_renew_at = 0.0
        self.renew_failures = 0

    def __repr__(self) -> str:
        state = f"lost: {self._lost_reason}" if self._lost_reason else "held"
        return f"<LeaseHandle {self.lease.job_id!r} gen {self.lease.generation} {state}>"

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def lost_reason(self) -> str | None:
        self.is_lost()
        return self._lost_reason

    @property
    def lost_kind(self) -> LossKind | None:
        self.is_lost()
        return self._lost_kind

    @property
    def lost_at(self) -> float | None:
        """When the loss was decided, on the worker clock's monotonic time."""
        return self._lost_at

    @property
    def timeout(self) -> float | None:
        """The handler's per-attempt timeout in seconds (None: none)."""
        return self._timeout

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def is_settling(self) -> bool:
        """Whether the handler has ended and the job is being settled (`settling`)."""
        return self._settling

    @property
    def lost_flag(self) -> bool:
        """Whether a loss was already decided (without checking the deadline now)."""
        return self._lost_reason is not None

    def remaining(self) -> float:
        """Seconds before the local deadline; 0 once lost."""
        if self.is_lost():
            return 0.0
        return max(0.0, self.lease.local_deadline - self._clock.monotonic())

    def is_lost(self) -> bool:
        """True once the lease must be assumed gone; checks the local deadline now."""
        # Without the lock: each field is read once (atomic reads), and the loss itself is
        # decided under the lock by `mark_lost` (first caller wins, none after `finish`).
        if self._lost_reason is not None:
            return True
        if self._finished:
            return False
        now = self._clock.monotonic()
        if now < self.lease.local_deadline:
            timeout_at = self.timeout_at
            if timeout_at is None or now < timeout_at or self._settling:
                return False  # most looks end here: held, and within any timeout
        return self._decide(now)

    def _decide(self, now: float) -> bool:
        """`is_lost` past the local deadline, or past a running handler's timeout."""
        overdue = now - self.lease.local_deadline
        if overdue >= 0:  # the lease itself is gone: nothing may be settled with it
            self.mark_lost(
                f"the local deadline passed {overdue:.3f} s ago without a confirmed renewal",
                "deadline_passed",
            )
        else:
            self.mark_lost(
                f"the handler ran past its timeout ({self._timeout:g} s); the worker stopped "
                "renewing its lease and fails the attempt",
                "timed_out",
            )
        # False only if `finish` came first (then no loss was recorded).
        return self._lost_reason is not None

    def decide_at(self) -> float:
        """When the next loss would be decided on its own (watchdog): the local deadline,
        or the timeout if it comes first and the handler still runs. Without the lock:
        it only says when to look (`is_lost` decides), and a look at a renewal's or a
        settle's moment reads the fields from before or after it, either being a time at
        which the watchdog looks again."""
        deadline = self.lease.local_deadline
        timeout_at = self.timeout_at
        if timeout_at is None or self._settling:
            return deadline
        return min(deadline, timeout_at)

    def lost_error(self) -> LeaseLost:
        lease = self.lease
        return LeaseLost(
            f"lease on job {lease.job_id!r} generation {lease.generation} (owner "
            f"{lease.owner!r}) is lost: {self.lost_reason or 'unknown reason'}. Stop working "
            "on this job: another worker may hold it now, and its effects must not land.",
            job_id=lease.job_id,
            generation=lease.generation,
        )

    def mark_lost(self, reason: str, kind: LossKind) -> bool:
        """Record the loss (first caller wins) and run the loss callbacks on this thread."""
        with self._lock:
            if self._lost_reason is not None or self._finished:
                return False
            self._lost_reason = reason
            self._lost_kind = kind
            self._lost_at = self._clock.monotonic()
            callbacks, self._callbacks = self._callbacks, None
            on_lost = self._on_lost  # `finish` drops it
        if on_lost is not None:
            self._run(on_lost, self)
        for callback in callbacks or ():
            self._run(callback)
        return True

    def on_loss(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` (from whichever thread decides the loss) once the lease is
        lost; at once if it already is. Callbacks must be quick and must not block."""
        with self._lock:
            if self._lost_reason is None and not self._finished:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(callback)
                return
            lost = self._lost_reason is not None
        if lost:
            self._run(callback)

    def on_renewed(self, listener: Callable[[Lease], None]) -> None:
        """Call ``listener(lease)`` (on the renewer thread) after each adopted renewal."""
        with self._lock:
            if self._renew_listeners is None:
                self._renew_listeners = []
            self._renew_listeners.append(listener)

    # -- for the LeaseKeeper ---------------------------------------------------------

    def lease_to_renew(self) -> Lease | None:
        """The lease to send a renewal for, or None: finished, lost, or past its deadline
        (a lease past its local deadline is never renewed: it is lost)."""
        if self.is_lost():
            return None
        with self._lock:
            return None if self._finished else self.lease

    def renewed(self, lease: Lease) -> bool:
        """Adopt a confirmed renewal, unless the previous local deadline passed first."""
        with self._lock:
            if self._lost_reason is not None or self._finished:
                return False
            overdue = self._clock.monotonic() - self.lease.local_deadline
            if overdue < 0:
                self.lease = lease
                listeners = list(self._renew_listeners or ())
            else:
                listeners = None
        if listeners is not None:
            for listener in listeners:
                self._run(listener, lease)
            return True
        self.mark_lost(
            f"a renewal was confirmed {overdue:.3f} s after the local deadline had passed",
            "deadline_passed",
        )
        return False

    def settling(self) -> tuple[LossKind, str] | None:
        """The handler has ended and its job is being settled: its loss callbacks (which
        stop a handler) are dropped, but the lease is still renewed and watched, so that a
        settle the store cannot answer yet is retried under a live lease and given up at
        its local deadline. Returns the loss if any, deciding the deadline now."""
        self.is_lost()
        with self._lock:
            self._settling = True
            self._callbacks = None
            self._renew_listeners = None
            if self._lost_reason is None or self._lost_kind is None:
                return None
            return self._lost_kind, self._lost_reason

    def finish(self, decide: bool = True) -> tuple[LossKind, str] | None:
        """Stop tracking: no more renewals or loss decisions. Returns the loss if any,
        deciding the local deadline one last time (``decide``; not after the store has
        just confirmed the job's end: a loss decided then would be none)."""
        if decide:
            self.is_lost()
        with self._lock:
            self._finished = True
            self._callbacks = None
            self._renew_listeners = None
            # No loss is decided from now on: the registry may keep this handle a while
            # (`_Registry`), and must not keep the worker its callback belongs to.
            self._on_lost = None
            if self._lost_reason is None or self._lost_kind is None:
                return None
            return self._lost_kind, self._lost_reason

    @staticmethod
    def _run(callback: Callable[..., object], *args: object) -> None:
        try:
            callback(*args)
        except Exception:
            log.exception("tenure: a lease-loss callback failed")


def lease_extra(lease: Lease, **more: Any) -> dict[str, Any]:
    """The structured fields (``extra``) of a worker log record about ``lease``."""
    return {
        "job_id": lease.job_id,
        "owner": lease.owner,
        "generation": lease.generation,
        **more,
    }


# -- the registry ------------------------------------------------------------------------

_ENDED_KEPT = 4096


class _Registry:
    """(job_id, generation) -> the handles of that lease registered by workers in this
    process, kept after their lease ended here (lost, or finished with: `end` marks the
    handle, ``ended_as``) until about `_ENDED_KEPT` leases registered after them have ended
    too. Two stores' jobs may share an id and a generation: a key then holds a list.

    A token that names its store (`Lease.token`, ``ctx.token``) is judged by that store's
    leases only, live or ended. One without (parsed from the wire, built by hand) is judged
    by the live handles of its job and generation in any store, never by ended ones: an
    ended lease without its store cannot be told from another store's.

    A worker registers and ends each job's lease: registering costs one dict entry (a
    claim's leases under one lock), ending one attribute write and no lock. Once it is done
    with a batch of jobs (`keep_ended`), their ended leases are kept as an `_Ended` record
    (the store and how the lease ended: two strings), not as their handles: thousands of
    handles and leases kept a while made the garbage collector run during a worker's run,
    where a record of strings is not even tracked by it. Forgetting ended leases is done in
    bulk, once the map has grown by `_ENDED_KEPT` entries."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # In registration order (a dict's), which the sweep keeps.
        self._leases: dict[tuple[str, int], _Entry | list[_Entry]] = {}
        self._sweep_at = 2 * _ENDED_KEPT
        # The `_Ended` records, one of each per store and state: shared, not kept per job.
        self._records: dict[_Ended, _Ended] = {}

    def add(self, handle: LeaseHandle) -> None:
        self.add_many([handle])

    def add_many(self, handles: list[LeaseHandle]) -> None:
        with self._lock:
            leases = self._leases
            if len(leases) >= self._sweep_at:
                self._sweep()
            for handle in handles:
                lease = handle.lease
                key = (lease.job_id, lease.generation)
                found = leases.setdefault(key, handle)
                if found is not handle:  # another store's lease of that id and generation
                    if isinstance(found, list):
                        found.append(handle)
                    else:
                        leases[key] = [found, handle]

    @staticmethod
    def end(handle: LeaseHandle, state: TokenState) -> None:
        """``handle``'s lease ended here (``state``: ``"ended"`` or ``"lost"``; a later
        end says the last word)."""
        handle.ended_as = state

    def keep_ended(self, handles: list[LeaseHandle]) -> None:
        """Nothing will end these handles' leases again (their jobs are forgotten): those
        that ended are kept as `_Ended` records from now on. One lock per batch."""
        with self._lock:
            leases, records = self._leases, self._records
            for handle in handles:
                state = handle.ended_as
                if state is not None:
                    lease = handle.lease
                    key = (lease.job_id, lease.generation)
                    record = (lease.store_id, state)
                    record = records.setdefault(record, record)  # one per store and state
                    found = leases.get(key)
                    if found is handle:
                        leases[key] = record
                    elif isinstance(found, list):  # two stores' leases share the key (rare)
                        for index, entry in enumerate(found):
                            if entry is handle:
                                found[index] = record

    def _sweep(self) -> None:
        """Under the lock: forget the leases that ended, all but the last `_ENDED_KEPT`
        registered (live ones stay, however old)."""
        leases = self._leases
        ended = [
            key
            for key, found in leases.items()
            # (a list only where two stores' leases share a key: almost never)
            if (_all_ended(found) if isinstance(found, list) else _ended_as(found) is not None)
        ]
        for key in ended[: max(0, len(ended) - _ENDED_KEPT)]:
            del leases[key]
        self._sweep_at = len(leases) + _ENDED_KEPT

    def state(self, token: FencingToken) -> TokenState:
        store_id = token.store_id
        with self._lock:
            found = self._leases.get((token.job_id, token.generation))
            if found is None:
                return "unknown"
            entries = list(found) if isinstance(found, list) else [found]
        if store_id is not None:
            entries = [entry for entry in entries if _store_of(entry) == store_id]
        live = [e for e in entries if not isinstance(e, tuple) and e.ended_as is None]
        if live:
            return "lost" if any(handle.is_lost() for handle in live) else "held"
        if store_id is None or not entries:
            return "unknown"
        return _ended_as(entries[-1]) or "unknown"


# How an ended lease is kept (`_Registry.keep_ended`): its store, and how it ended. A plain
# tuple of strings, which the garbage collector stops tracking.
_Ended = tuple[str, TokenState]
_Entry = LeaseHandle | _Ended


def _store_of(entry: _Entry) -> str:
    return entry[0] if isinstance(entry, tuple) else entry.lease.store_id


def _ended_as(entry: _Entry) -> TokenState | None:
    return entry[1] if isinstance(entry, tuple) else entry.ended_as


def _all_ended(found: _Entry | list[_Entry]) -> bool:
    if isinstance(found, list):
        return all(_ended_as(entry) is not None for entry in found)
    return _ended_as(found) is not None


REGISTRY = _Registry()


def _token_of(value: object) -> FencingToken:
    if isinstance(value, FencingToken):
        return value
    token = getattr(value, "token", None)  # a Lease or a JobContext
    if isinstance(token, FencingToken):
        return token
    raise InvalidArgument(
        "token",
        "must be a tenure.FencingToken, a tenure.Lease or a worker JobContext, "
        f"not {type(value).__name__}",
    )


def token_state(token: FencingToken | Lease | object) -> TokenState:
    """What the workers of this process know about the lease behind ``token``.

    ``"held"``: a handler is running under it and it is not lost. ``"lost"``: it was lost
    (renewal rejected, local deadline passed, or revoked when the worker stopped).
    ``"ended"``: the handler finished and the worker settled the job. ``"unknown"``: no
    worker of this process ran it (or it ended long ago); only the destination's own fence
    can judge it then. A lease, a context and their tokens name their store; a token
    without one (parsed from the wire, built by hand) is "held" or "lost" while a handler
    runs under its job and generation here, and "unknown" once none does.
    """
    found = _token_of(token)
    return REGISTRY.state(found)


def check_token(token: FencingToken | Lease | object) -> None:
    """Raise `LeaseLost` if a worker of this process lost the lease behind ``token`` or
    has already finished with it; return quietly when it is held or unknown here.

    For fenced destinations: call it before acting on a token so that a handler that lost
    its lease stops at the first effect, even before the destination's fence would."""
    found = _token_of(token)
    state = REGISTRY.state(found)
    if state in ("lost", "ended"):
        what = "was lost" if state == "lost" else "has already ended (settled or released)"
        raise LeaseLost(
            f"refusing to act for job {found.job_id!r} generation {found.generation}: its "
            f"lease {what} in this process. Stop the work done under this token.",
            job_id=found.job_id,
            generation=found.generation,
        )
