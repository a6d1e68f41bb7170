"""The claim loop of `tenure.Worker`: claim for the free slots, start what was claimed,
wait when there is nothing, and back off while the store is away.

`Claiming` is the part of `Worker` that owns claiming (the worker mixes it in); the state it
shares with the rest of the worker is declared here, and set by `Worker.__init__` and
`Worker._serve`.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

import anyio
import anyio.abc
import anyio.lowlevel

from .._clock import Clock
from .._store_async import AsyncStore
from .._validate import MAX_BATCH
from ..errors import StoreLost, StoreUnavailable
from ..models import Claim, Job, Lease
from ._completer import Completer
from ._config import Config
from ._invoke import Running
from ._lease import LeaseHandle
from ._retry import Outage
from ._settle import Settler
from ._stats import Stats
from ._telemetry import claim_span

__all__ = ["Claiming"]

log = logging.getLogger("tenure")


class Claiming:
    """Claiming, for `Worker` (see the module docstring)."""

    _config: Config
    _stats: Stats
    _rng: random.Random
    _jobs: dict[LeaseHandle, Running]
    _completer: Completer | None
    _settler: Settler | None
    _outage: Outage | None
    _stop_requested: bool
    _idle_scope: anyio.CancelScope | None
    _slot_freed: anyio.Event | None
    _claiming: int
    _unknown_claims_until: float
    _said_idle: bool

    if TYPE_CHECKING:

        @property
        def owner(self) -> str | None: ...

        def _start(
            self,
            task_group: anyio.abc.TaskGroup,
            claimed: Sequence[tuple[Lease, Job]],
            clock: Clock,
        ) -> None: ...

    async def _claim_loop(
        self,
        task_group: anyio.abc.TaskGroup,
        store: AsyncStore,
        queues: tuple[str, ...],
        burst: bool,
        clock: Clock,
    ) -> None:
        config = self._config
        failures = 0
        while not self._stop_requested:
            free = config.concurrency - len(self._jobs)
            if free <= 0:
                await self._wait_for_slot()
                continue
            if free < config.concurrency:
                # Jobs whose completions are on their way free their slots when the store
                # answers: claim for all of them in one call rather than one by one. The
                # wait is one store round trip at most.
                assert self._completer is not None
                await self._completer.quiet()
                await anyio.lowlevel.checkpoint()
                free = config.concurrency - len(self._jobs)
                if free <= 0 or self._stop_requested:
                    continue
            self._claiming = free
            try:
                claimed = await self._claim(store, free, queues)
            except StoreUnavailable as exc:
                # The store already looked for this claim's leases by their secret hashes;
                # reaching here, it could not tell: leases it may have taken expire.
                failures += 1
                self._stats.incr("store_errors")
                assert self._outage is not None
                self._outage.failed(exc, owner=self.owner, operation="claim")
                if isinstance(exc, StoreLost):
                    break
                if exc.outcome_unknown:
                    self._claim_reply_lost(clock)
                delay = min(5.0, 0.1 * 2**failures) * self._rng.uniform(0.5, 1.0)
                log.debug(
                    "claim failed (store unavailable); trying again in %.2f s",
                    delay,
                    extra={"owner": self.owner, "error": str(exc)},
                )
                await self._idle(None, queues, delay)
                continue
            finally:
                self._claiming = 0
            failures = 0
            assert self._outage is not None
            self._outage.ok(owner=self.owner)
            self._take_claimed(task_group, clock, claimed)
            if self._stop_requested:
                break
            if not claimed:
                if burst and not self._jobs and clock.monotonic() < self._unknown_claims_until:
                    # A claim whose reply was lost may hold jobs under leases nobody has:
                    # they are claimable once those expire, and a burst is not done before.
                    wait = self._unknown_claims_until - clock.monotonic()
                    await self._idle(store, queues, min(config.poll_interval, wait))
                    continue
                if not self._said_idle and not self._jobs:
                    self._said_idle = True
                    await self._say_idle(store, queues, burst)
                if burst and not self._jobs:
                    break
                await self._idle(store, queues, config.poll_interval)

    async def _say_idle(self, store: AsyncStore, queues: tuple[str, ...], burst: bool) -> None:
        """Said once: a worker that claims nothing names the store and queues it looked in
        (the usual cause is jobs submitted to another store). A burst also says what it
        leaves behind: jobs not due yet, a retry's backoff among them, which a reader of
        "until the queues are empty" expects it to run."""
        later = await _scheduled(store, queues) if burst else 0
        log.info(
            "no job to claim in %s (queues %s)%s%s",
            store.url,
            ", ".join(queues),
            ": exiting (burst mode)" if burst else "; waiting for jobs",
            f"; {later} job(s) of these queues are not due yet (a delay or a retry's "
            "backoff) and are left for a later run"
            if later
            else "",
            extra={"owner": self.owner, "store": store.url, "scheduled": later},
        )

    async def _claim(self, store: AsyncStore, free: int, queues: tuple[str, ...]) -> list[Claim]:
        owner = self.owner or ""
        with claim_span(owner, queues) as span:  # a null context without OpenTelemetry
            claimed = await store.claim_jobs(owner, self._config.ttl, free, queues=queues)
            if span is not None:
                span.set_attribute("messaging.batch.message_count", len(claimed))
        return claimed

    def _claim_reply_lost(self, clock: Clock) -> None:
        """A claim (or a completion call that also claimed) may have taken jobs without
        this worker learning of them: their leases expire within a TTL (plus the store's
        clock drift, bounded by a tenth), and a burst worker waits for that."""
        until = clock.monotonic() + self._config.ttl * 1.1 + 0.5
        self._unknown_claims_until = max(self._unknown_claims_until, until)

    def _refill_slots(self, finishing: int) -> int:
        """How many jobs a completion call of ``finishing`` jobs should claim: the slots
        they free and any already free, less those a claim in flight is asking for."""
        if self._stop_requested:
            return 0
        free = self._config.concurrency - len(self._jobs) - self._claiming + finishing
        return max(0, min(free, MAX_BATCH))

    def _take_claimed(
        self, task_group: anyio.abc.TaskGroup, clock: Clock, claimed: list[Claim]
    ) -> None:
        """Run what a claim (the claim loop's, or a completion call's) took; a stopping
        worker gives it back instead."""
        assert self._settler is not None
        now = clock.monotonic()
        if not self._stop_requested and all(lease.local_deadline > now for lease, _ in claimed):
            self._start(task_group, claimed, clock)  # most claims: every job runs
            return
        late: list[str] = []
        runnable: list[tuple[Lease, Job]] = []
        for lease, job in claimed:
            if self._stop_requested:
                why = "claimed as the worker was stopping"
                task_group.start_soon(self._settler.give_back, lease, why)
            elif lease.local_deadline <= now:
                late.append(lease.job_id)
            else:
                runnable.append((lease, job))
        if runnable:
            self._start(task_group, runnable, clock)
        if late:
            # A claim that waited out a store outage (for a connection, say) can be answered
            # after its leases' local deadlines: a handler started now would be stopped at
            # once and the job run again. Not started; the leases expire in the store.
            self._stats.incr("claimed", len(late))
            self._stats.incr("claims_expired", len(late))
            self._claim_reply_lost(clock)
            log.warning(
                "%d job(s) claimed too late to run: the store answered after their leases' "
                "local deadline; they will be claimed again once the leases expire",
                len(late),
                extra={"owner": self.owner, "jobs": late},
            )

    async def _idle(
        self, store: AsyncStore | None, queues: tuple[str, ...], timeout: float
    ) -> None:
        with anyio.CancelScope() as scope:
            self._idle_scope = scope
            if self._stop_requested:
                scope.cancel()
            try:
                if store is None:
                    await anyio.sleep(timeout)
                else:
                    await store.wait_for_jobs(queues=queues, timeout=timeout)
            except StoreUnavailable as exc:
                self._stats.incr("store_errors")
                assert self._outage is not None
                self._outage.failed(exc, owner=self.owner, operation="wait_for_jobs")
                log.debug(
                    "waiting for jobs failed (store unavailable)",
                    extra={"owner": self.owner, "error": str(exc)},
                )
                if not isinstance(exc, StoreLost):
                    await anyio.sleep(timeout)
        self._idle_scope = None

    async def _wait_for_slot(self) -> None:
        self._slot_freed = anyio.Event()
        if not self._stop_requested and len(self._jobs) >= self._config.concurrency:
            await self._slot_freed.wait()


async def _scheduled(store: AsyncStore, queues: tuple[str, ...]) -> int:
    """How many jobs of ``queues`` wait to be due (0 when the store cannot count them)."""
    try:
        stats = await store.queue_stats()
    except StoreUnavailable:
        return 0
    if stats is None:
        return 0
    return sum(found.scheduled for found in stats.queues if found.queue in queues)
