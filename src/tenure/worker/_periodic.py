"""Periodic jobs served by a worker (``@worker.periodic``): each due tick becomes one job.

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
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from .._concurrency import pause_async
from .._schedule import Schedule, due_ticks, next_tick, tick_delay, tick_job_id, ticks_back
from .._store_async import AsyncStore
from ..errors import JobNotFound, StoreLost, StoreUnavailable
from ..models import Job

__all__ = ["RESUME_LOOKUPS", "Periodic"]

log = logging.getLogger("tenure")

# How long the loop sleeps at most between looks at the clock: a clock that jumps (or
# runs fast under faketime) is seen soon.
_LOOK_EVERY = 0.2
# Ticks a starting worker looks up (one get each, latest first) to find where the fleet
# was: a bounded cost at start; a job purged or older than that is not found.
RESUME_LOOKUPS = 60


class Periodic:
    """One worker's periodic schedules (see the module docstring)."""

    def __init__(
        self,
        store: AsyncStore,
        schedules: Sequence[Schedule],
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._schedules = tuple(schedules)
        self._wall = wall
        start = wall()
        self._last = {schedule.name: start for schedule in self._schedules}

    async def resume(self) -> None:
        """Take up each schedule from its latest tick whose job is in the store."""
        now = self._wall()
        for schedule in self._schedules:
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

    async def tick(self) -> list[Job]:
        """Submit every tick due by this worker's clock; the jobs as the store answered
        (``created`` False: another worker submitted that tick first)."""
        now = self._wall()
        jobs: list[Job] = []
        store_now: float | None = None
        for schedule in self._schedules:
            ticks = due_ticks(schedule, self._last[schedule.name], now)
            for tick in ticks:
                if store_now is None:
                    store_now = await self._store.now()
                job = await self._store.submit(
                    tick_job_id(schedule.name, tick),
                    schedule.payload,
                    queue=schedule.queue,
                    delay=tick_delay(tick, store_now),
                )
                jobs.append(job)
                log.debug(
                    "periodic %s: tick %s %s",
                    schedule.name,
                    job.job_id,
                    "submitted" if job.created else "already there",
                    extra={"job_id": job.job_id, "submitted": job.created, "queue": job.queue},
                )
            if ticks:
                # Only once every due tick is in the store: after an outage the catch-up
                # policy decides from the last tick that was.
                self._last[schedule.name] = ticks[-1]
        return jobs

    def _sleep_for(self) -> float:
        now = self._wall()
        soonest = min(next_tick(s, self._last[s.name]) for s in self._schedules)
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
                log.warning(
                    "periodic: ticks not submitted (%s); the next look tries again",
                    exc,
                    extra={"schedules": [s.name for s in self._schedules]},
                )
            await pause_async(self._sleep_for())
