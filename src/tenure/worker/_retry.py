"""The one retry rule of the worker's settles and renewals, and the outage they share.

A renew, complete, complete_many, fail or release that ends in `StoreUnavailable` is safe
to repeat (tenure.errors): the worker repeats it with capped, jittered backoff for as long
as the lease's local deadline leaves time for another attempt, so a store outage shorter
than the lease costs nothing. A definite answer (`LeaseLost`, `InvalidArgument`) ends it,
and `StoreLost` is never retried: that store cannot be trusted any more. Claims are not
retried here (a lost claim reply is left to expire). `RetryRule` is pure: the callers own
their clocks and sleeps, so the schedule is testable on a `tenure.ManualClock`.

`Outage` turns the failures of every caller (claim loop, settler, completer, keeper: two
threads) into one WARNING line when the store goes away and one INFO line when it is back.
`open_through_outage` opens the worker's store at start through the same outage: a store
that is down when the worker starts is waited for, up to `START_WAIT` seconds.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import anyio

from .._clock import Clock
from ..errors import StoreLost, StoreUnavailable
from ._stats import Stats

__all__ = ["RETRY", "START_WAIT", "DeadlinePassed", "Outage", "RetryRule", "open_through_outage"]

log = logging.getLogger("tenure")


class DeadlinePassed(StoreUnavailable):
    """A settle was given up: the store stayed unavailable until the lease's local deadline
    (no further attempt could have finished before it)."""


@dataclass(frozen=True)
class RetryRule:
    """Backoff ``first * factor**(failures - 1)``, capped at ``cap`` and multiplied by a
    random factor in ``jitter``; an attempt is only started if ``attempt_time`` seconds
    remain after the wait."""

    first: float = 0.05
    cap: float = 0.5
    factor: float = 2.0
    jitter: tuple[float, float] = (0.5, 1.0)
    attempt_time: float = 0.05

    @staticmethod
    def retryable(error: BaseException) -> bool:
        return isinstance(error, StoreUnavailable) and not isinstance(
            error, (StoreLost, DeadlinePassed)
        )

    def delay(self, failures: int, rng: random.Random) -> float:
        """The wait after the ``failures``-th failure in a row (1 for the first)."""
        base = min(self.cap, self.first * self.factor ** max(0, failures - 1))
        return base * rng.uniform(*self.jitter)

    def next_wait(
        self,
        error: BaseException,
        failures: int,
        now: float,
        deadline: float,
        rng: random.Random,
    ) -> float | None:
        """Seconds to wait before attempt ``failures + 1``, or None: stop (a definite answer,
        `StoreLost`, or no attempt could finish before ``deadline``; times on one clock)."""
        if not self.retryable(error):
            return None
        wait = self.delay(failures, rng)
        if now + wait + self.attempt_time > deadline:
            return None
        return wait


RETRY = RetryRule()


class Outage:
    """Whether the store is unavailable right now, as every caller sees it, and whether it
    was found lost (`StoreLost`: ``on_lost`` is called once, from the thread that found
    it). Thread-safe."""

    def __init__(
        self,
        clock: Clock,
        stats: Stats | None = None,
        on_lost: Callable[[StoreLost], object] | None = None,
    ) -> None:
        self._clock = clock
        self._stats = stats
        self._on_lost = on_lost
        self._lock = threading.Lock()
        self._since: float | None = None
        self._failures = 0
        self.lost: StoreLost | None = None

    @property
    def active(self) -> bool:
        return self._since is not None

    def store_lost(self, error: StoreLost) -> None:
        with self._lock:
            if self.lost is not None:
                return
            self.lost = error
        if self._on_lost is not None:
            self._on_lost(error)

    def failed(self, error: BaseException, **extra: object) -> bool:
        """A store call failed with `StoreUnavailable`; True when this began an outage (and
        its one WARNING line was logged). A `StoreLost` goes to `store_lost` instead."""
        if isinstance(error, StoreLost):
            self.store_lost(error)
            return False
        with self._lock:
            self._failures += 1
            if self._since is not None:
                return False
            self._since = self._clock.monotonic()
            self._failures = 1
        if self._stats is not None:
            self._stats.incr("outages")
        log.warning(
            "store unavailable: %s; retrying",
            error,
            extra={**extra, "error": str(error)},
        )
        return True

    def ok(self, **extra: object) -> None:
        """A store call succeeded: the outage, if any, is over (one INFO line)."""
        if self._since is None:  # the usual case, without the lock
            return
        with self._lock:
            if self._since is None:
                return
            length = self._clock.monotonic() - self._since
            failures, self._since = self._failures, None
        log.info(
            "store available again after %.1f s (%d call(s) failed or went unanswered)",
            length,
            failures,
            extra={**extra, "outage": round(length, 3), "failures": failures},
        )


# Seconds a starting worker waits for a store that is unavailable (real time: a test's
# manual clock does not move by itself).
START_WAIT = 60.0
_T = TypeVar("_T")


async def open_through_outage(
    open_store: Callable[[], Awaitable[_T]],
    outage: Outage,
    rng: random.Random,
    within: float = START_WAIT,
) -> _T:
    """``open_store()``, tried again while it raises a retryable `StoreUnavailable` (one
    WARNING through ``outage`` when the first attempt fails, one INFO once it opens) for up
    to ``within`` seconds; then its last error propagates."""
    deadline = time.monotonic() + within
    rule = RetryRule(first=0.1, cap=1.0)
    failures = 0
    while True:
        try:
            store = await open_store()
        except StoreUnavailable as error:
            failures += 1
            wait = rule.next_wait(error, failures, time.monotonic(), deadline, rng)
            if wait is None:
                raise
            outage.failed(error, phase="start")
            await anyio.sleep(wait)
            continue
        outage.ok(phase="start")
        return store
