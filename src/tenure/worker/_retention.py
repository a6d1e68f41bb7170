"""Retention: a worker started with ``retention=`` purges finished jobs older than that,
one worker of the fleet per period.

The schedule is a job of the store itself, ``tenure.retention`` in queue
``tenure.retention`` (no handler serves it): each period, every worker with retention
submits it (idempotent) and tries to *claim* it; the store grants that lease to one of them
only, and only once it is due. The winner purges, completes the job with the count, and
requeues it ``retention_every`` later by the store's clock, so the next period starts when
the store says, whichever worker wins it. A winner that dies mid-purge leaves a lease that
expires (`RETENTION_TTL`), and a later check takes over; one that dies between completing
and requeueing leaves the job done, and the next check requeues it.
"""

from __future__ import annotations

import logging

from .._concurrency import pause_async
from .._store_async import AsyncStore
from .._validate import MAX_ATTEMPTS
from ..errors import JobNotFound, JobStateConflict, LeaseLost, StoreLost, StoreUnavailable
from ..models import JobState

__all__ = ["RETENTION_JOB", "RETENTION_QUEUE", "RETENTION_TTL", "Retention"]

log = logging.getLogger("tenure")

RETENTION_JOB = "tenure.retention"
RETENTION_QUEUE = "tenure.retention"
# The purging worker's lease: long enough for a purge of many batches, short enough that
# a crashed worker's period is taken over soon.
RETENTION_TTL = 600.0
_FINISHED = (JobState.DONE, JobState.DEAD, JobState.CANCELLED)


class Retention:
    """One worker's part of the fleet's retention (see the module docstring)."""

    def __init__(self, store: AsyncStore, owner: str, older_than: float, every: float) -> None:
        self._store = store
        self._owner = owner
        self._older_than = older_than
        self._every = every

    async def tick(self) -> int | None:
        """One check: the number of jobs purged when this worker won the period, else
        None (another worker holds it, or the next period is not due)."""
        store = self._store
        await store.submit(RETENTION_JOB, queue=RETENTION_QUEUE, max_attempts=MAX_ATTEMPTS)
        lease = await store.claim(RETENTION_JOB, self._owner, RETENTION_TTL)
        if lease is None:
            await self._recover()
            return None
        purged = await store.purge(older_than=self._older_than)
        await store.complete(lease, {"purged": purged, "older_than": self._older_than})
        await store.requeue(RETENTION_JOB, delay=self._every, reset_attempts=True)
        log.info(
            "retention: purged %d finished job(s) older than %g s",
            purged,
            self._older_than,
            extra={"owner": self._owner, "deleted": purged, "generation": lease.generation},
        )
        return purged

    async def _recover(self) -> None:
        # A winner that stopped between complete and requeue left the schedule finished:
        # start the next period (a concurrent requeue by another worker is refused).
        try:
            job = await self._store.get(RETENTION_JOB)
            if job.state in _FINISHED and job.as_of - job.updated_at >= self._every:
                await self._store.requeue(RETENTION_JOB, reset_attempts=True)
        except (JobNotFound, JobStateConflict):
            pass

    async def run(self, check_every: float) -> None:
        """Check every ``check_every`` seconds until cancelled; store outages and lost
        leases are logged and the next check tries again."""
        while True:
            try:
                await self.tick()
            except StoreLost:
                raise  # the worker stops: its store is not the one it was
            except (StoreUnavailable, LeaseLost, JobStateConflict) as exc:
                log.warning(
                    "retention: this check did not finish (%s); the next one tries again",
                    exc,
                    extra={"owner": self._owner},
                )
            await pause_async(check_every)
