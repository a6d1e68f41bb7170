"""Periodic jobs served by a worker (``@worker.periodic`` and the store's schedules): each
due tick becomes one job.

Which ticks are due is decided from this worker's own clock (`tenure._schedule.due_ticks`);
what makes that safe across a fleet is the tick's job id (`tick_job_id`, from the
schedule's name and the tick's UTC time): every worker that finds a tick due submits the
same id, and the store's idempotent submit keeps one job. A worker whose clock is ahead
submits early, so the job is delayed to its tick time by the store's clock
(`tick_delay`); a worker whose clock is behind submits a tick another worker already
created, and finds it there. A worker starting takes up from the latest tick whose job is
in the store (looking back `RESUME_LOOKUPS` ticks at most; none found: from its start), so
the ticks missed while no worker ran follow the schedule's catch-up policy, as do those a
running worker could not submit while the store was unreachable.

Store schedules (`Store.add_schedule`) of the queues the worker serves are read at start
and every `SCHEDULES_EVERY` seconds of the worker's clock: one seen for the first time is
taken up as at start, one changed keeps its place, one removed is dropped (no more ticks).
A store schedule named as one of the worker's own is not run by it: the code one wins (it
is logged once), since both would submit the same tick ids.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from .._concurrency import pause_async
from .._schedule import (
    LATE_GRACE,
    STALL_GRACE,
    Schedule,
    due_ticks,
    make_schedule,
    next_tick,
    tick_delay,
    tick_job_id,
    ticks_back,
)
from .._store_async import AsyncStore
from .._validate import DEFAULT_MAX_ATTEMPTS
from ..errors import InvalidArgument, JobNotFound, StoreLost, StoreUnavailable
from ..models import Job, StoredSchedule

__all__ = ["RESUME_LOOKUPS", "SCHEDULES_EVERY", "Periodic"]

log = logging.getLogger("tenure")

# How long the loop sleeps at most between looks at the clock: a clock that jumps (or
# runs fast under faketime) is seen soon.
_LOOK_EVERY = 0.2
# Ticks a starting worker looks up (one get each, latest first) to find where the fleet
# was: a bounded cost at start; a job purged or older than that is not found.
RESUME_LOOKUPS = 60
# Seconds (worker clock) between reads of the store's schedules: how soon an added or
# removed one takes effect, for one small read per worker.
SCHEDULES_EVERY = 30.0
# Seconds (worker clock) before a read of the store's schedules that failed is tried again:
# the worker's own schedules go on meanwhile, and an outage is said once, not at every look.
_READ_RETRY = 5.0


def _runnable(stored: StoredSchedule) -> Schedule:
    # Checked again here: the host may lack the cron extra or the time zone's data.
    return make_schedule(
        stored.name,
        stored.cron,
        queue=stored.queue,
        payload=stored.payload,
        tz=stored.timezone,
        catch_up=stored.catch_up,
        max_attempts=stored.max_attempts,
    )


class Periodic:
    """One worker's periodic schedules (see the module docstring). ``queues``: read the
    store's schedules of these queues too (None: only ``schedules``)."""

    def __init__(
        self,
        store: AsyncStore,
        schedules: Sequence[Schedule],
        wall: Callable[[], float] = time.time,
        *,
        queues: Sequence[str] | None = None,
        read_every: float = SCHEDULES_EVERY,
    ) -> None:
        self._store = store
        self._code = {schedule.name: schedule for schedule in schedules}
        self._stored: dict[str, Schedule] = {}
        self._queues = None if queues is None else frozenset(queues)
        self._read_every = read_every
        self._read_at: float | None = None
        self._wall = wall
        start = wall()
        self._last = {name: start for name in self._code}
        self._to_take_up: set[str] = set()
        # Schedules whose last look submitted every due tick: their next look's lateness
        # is a stall of this worker, not ticks missed (`tenure._schedule.STALL_GRACE`).
        self._steady: set[str] = set()
        self._refused: dict[str, str] = {}  # store schedules not run, and why (said once)
        self._read_failing = False

    @property
    def schedules(self) -> list[Schedule]:
        """The schedules this worker runs now: its own, then the store's."""
        return [*self._code.values(), *self._stored.values()]

    async def resume(self) -> None:
        """Read the store's schedules, then take up each schedule from its latest tick
        whose job is in the store."""
        await self._read_if_due()
        self._to_take_up = set(self._last)
        await self._take_up()

    async def read_schedules(self) -> None:
        """Read the store's schedules of this worker's queues: start the new ones (taken up
        at the next tick), follow the changed ones, drop the removed ones."""
        now = self._wall()
        found: dict[str, Schedule] = {}
        for stored in await self._store.schedules():
            if self._queues is None or stored.queue not in self._queues:
                continue
            schedule = self._accepted(stored)
            if schedule is not None:
                found[schedule.name] = schedule
        for name in self._stored.keys() - found.keys():
            del self._last[name]
            self._to_take_up.discard(name)
            self._steady.discard(name)
            log.info(
                "store schedule %s: no more ticks here (removed, or now of a queue not served)",
                name,
                extra={"schedule": name},
            )
        for name, schedule in found.items():
            if name not in self._stored:
                self._last[name] = now
                self._to_take_up.add(name)
                log.info(
                    "store schedule %s: %r to queue %s",
                    name,
                    schedule.cron,
                    schedule.queue,
                    extra={"schedule": name, "queue": schedule.queue},
                )
        self._stored = found
        self._read_at = now

    def _accepted(self, stored: StoredSchedule) -> Schedule | None:
        reason = None
        schedule = None
        if stored.name in self._code:
            reason = "this worker has a periodic job of that name, which wins"
        else:
            try:
                schedule = _runnable(stored)
            except (InvalidArgument, ImportError) as exc:
                reason = str(exc)
        if reason is None:
            self._refused.pop(stored.name, None)
        elif self._refused.get(stored.name) != reason:
            self._refused[stored.name] = reason
            log.warning(
                "store schedule %s: not run by this worker (%s)",
                stored.name,
                reason,
                extra={"schedule": stored.name, "queue": stored.queue},
            )
        return schedule

    async def _take_up(self) -> None:
        now = self._wall()
        for schedule in self.schedules:
            if schedule.name not in self._to_take_up:
                continue
            for tick in ticks_back(schedule, now, RESUME_LOOKUPS):
                try:
                    await self._store.get(tick_job_id(schedule.name, tick))
                except JobNotFound:
                    continue
                self._last[schedule.name] = tick
                log.info(
                    "periodic %s: taking up after tick %s",
                    schedule.name,
                    tick_job_id(schedule.name, tick),
                    extra={"queue": schedule.queue},
                )
                break
            self._to_take_up.discard(schedule.name)

    def _reading_due(self, now: float) -> bool:
        if self._queues is None:
            return False
        # A clock stepped back reads again too: the interval is measured on it.
        return self._read_at is None or not 0 <= now - self._read_at < self._read_every

    async def _read_if_due(self) -> None:
        now = self._wall()
        if not self._reading_due(now):
            return
        try:
            await self.read_schedules()
        except StoreLost:
            raise
        except StoreUnavailable as exc:
            self._read_at = now - self._read_every + _READ_RETRY
            if not self._read_failing:
                log.warning(
                    "store schedules not read (%s); trying again every %g s",
                    exc,
                    _READ_RETRY,
                    extra={"queues": sorted(self._queues or ())},
                )
            self._read_failing = True
            return
        if self._read_failing:
            log.info("store schedules read again", extra={"queues": sorted(self._queues or ())})
            self._read_failing = False

    async def tick(self) -> list[Job]:
        """Submit every tick due by this worker's clock (reading the store's schedules
        first when that is due); the jobs as the store answered (``created`` False:
        another worker submitted that tick first)."""
        await self._read_if_due()
        if self._to_take_up:
            await self._take_up()
        now = self._wall()
        jobs: list[Job] = []
        store_now: float | None = None
        for schedule in self.schedules:
            name = schedule.name
            last = self._last[name]
            stalled = name in self._steady and now - last <= STALL_GRACE
            ticks = due_ticks(schedule, last, now, grace=STALL_GRACE if stalled else LATE_GRACE)
            for tick in ticks:
                if store_now is None:
                    store_now = await self._store.now()
                jobs.append(await self._submit(schedule, tick, store_now))
            if ticks:
                # Only once every due tick is in the store: after an outage the catch-up
                # policy decides from the last tick that was.
                self._last[name] = ticks[-1]
            self._steady.add(name)
        return jobs

    async def _submit(self, schedule: Schedule, tick: float, store_now: float) -> Job:
        job_id = tick_job_id(schedule.name, tick)
        delay = tick_delay(tick, store_now)
        job = await self._store.submit(
            job_id,
            schedule.payload,
            queue=schedule.queue,
            delay=delay,
            max_attempts=schedule.max_attempts or DEFAULT_MAX_ATTEMPTS,
        )
        log.debug(
            "periodic %s: tick %s %s",
            schedule.name,
            job.job_id,
            "submitted" if job.created else "already there",
            extra={"job_id": job.job_id, "submitted": job.created, "queue": job.queue},
        )
        return job

    def _sleep_for(self) -> float:
        now = self._wall()
        schedules = self.schedules
        if not schedules:
            return _LOOK_EVERY
        soonest = min(next_tick(s, self._last[s.name]) for s in schedules)
        return max(0.01, min(soonest - now, _LOOK_EVERY))

    async def run(self) -> None:
        """Take up where the fleet was, then submit ticks until cancelled; store outages
        are logged and retried."""
        resumed = False
        while True:
            try:
                if not resumed:
                    await self.resume()
                    resumed = True
                await self.tick()
            except StoreLost:
                raise  # the worker stops: its store is not the one it was
            except StoreUnavailable as exc:
                self._steady.clear()  # what the outage kept out was missed
                log.warning(
                    "periodic: ticks not submitted (%s); the next look tries again",
                    exc,
                    extra={"schedules": [s.name for s in self.schedules]},
                )
            await pause_async(self._sleep_for())
