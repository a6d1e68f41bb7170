"""Job control on the store API, async: cancel, requeue, delete and purge, pausing a
queue, limiting it and its rate (a mixin of `AsyncStore`; ``_store_control.py`` is
generated from this file).

Validate, call one driver operation, interpret it (`tenure._protocol.control_verdict`),
log what was decided. Cancelling a leased job goes through the lease protocol: the store
moves its generation on, so the holder's next renew/complete/release/fail is `LeaseLost`
(reason ``"cancelled"``) and fences refuse its stale token. Deleting jobs never lets a
generation be issued twice: the store keeps a floor (the highest generation it deleted)
and every claim takes a generation above it (docs/how-it-works.md, "Deleting jobs").
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Protocol, TypeVar

from ._protocol import CONTROL_TAKES, Outcome, Status, control_verdict, job_from_row
from ._validate import (
    FINISHED_STATES,
    PURGE_BATCH,
    validate_age,
    validate_delay,
    validate_finished_states,
    validate_flag,
    validate_id,
    validate_limit,
    validate_queue_limit,
    validate_queue_rate,
    validate_reason,
)
from .models import Job, JobState, QueueRate
from .stores.abc import AsyncDriver

__all__ = ["AsyncStoreControl"]

T = TypeVar("T")

log = logging.getLogger("tenure")


class _Host(Protocol):
    """What the mixin uses of `AsyncStore`."""

    @property
    def _driver(self) -> AsyncDriver: ...

    async def _call(self, operation: str, call: Callable[[], Awaitable[T]]) -> T: ...


def _takes(operation: str) -> list[str]:
    return [str(state) for state in CONTROL_TAKES[operation][0]]


class AsyncStoreControl:
    """`AsyncStore`'s job-control methods."""

    async def cancel(self: _Host, job_id: str, reason: str | None = None) -> Job:
        """Cancel a ready or leased job: it becomes ``cancelled`` (final), ``reason`` (or
        ``"cancelled"``) as its ``error``. A leased job's generation moves on: its holder's
        next renew, complete, release or fail raises `LeaseLost` with ``reason ==
        "cancelled"``, fences refuse its token, and a `Worker` stops the handler at its next
        renewal. Cancelling a cancelled job answers as the first cancel did (no second
        generation). Raises `JobNotFound`, and `JobStateConflict` for a done or dead job."""
        job_id = validate_id("job_id", job_id)
        text = validate_reason(reason)
        text = "cancelled" if text is None else text
        takes = _takes("cancel")

        async def call() -> Outcome:
            return await self._driver.cancel(job_id, text, takes)

        outcome = await self._call("cancel", call)
        row = control_verdict("cancel", job_id, outcome)
        if outcome.status == Status.APPLIED:
            log.info(
                "job %s cancelled at generation %d",
                job_id,
                row.generation,
                extra={"job_id": job_id, "generation": row.generation, "reason": text},
            )
        return job_from_row(row, outcome.now)

    async def requeue(
        self: _Host,
        job_id: str,
        *,
        delay: float | timedelta = 0,
        reset_attempts: bool = False,
    ) -> Job:
        """Make a done, dead or cancelled job ``ready`` again, claimable ``delay`` seconds
        from now by the store's clock. Its generation is kept (the next claim takes the
        next token); its attempts are kept unless ``reset_attempts`` (a job that used all
        of them gets one more), its result is cleared. Raises `JobNotFound`, and
        `JobStateConflict` for a ready or leased job. Not repeated internally after a
        reply was lost: a repeat would find the job ready and be refused."""
        job_id = validate_id("job_id", job_id)
        delay_s = validate_delay(delay)
        reset = validate_flag(reset_attempts, "reset_attempts")
        takes = _takes("requeue")

        async def call() -> Outcome:
            return await self._driver.requeue(job_id, delay_s, reset, takes)

        outcome = await self._call("requeue", call)
        row = control_verdict("requeue", job_id, outcome)
        log.info(
            "job %s requeued at generation %d",
            job_id,
            row.generation,
            extra={"job_id": job_id, "generation": row.generation, "delay": delay_s},
        )
        return job_from_row(row, outcome.now)

    async def delete(self: _Host, job_id: str) -> None:
        """Delete a done, dead or cancelled job. The store
        keeps its generation as a floor: if the id is submitted again, its first claim
        gets a higher generation than the deleted job ever had. Raises `JobNotFound`, and
        `JobStateConflict` for a ready or leased job (cancel it first)."""
        job_id = validate_id("job_id", job_id)
        takes = _takes("delete")

        async def call() -> Outcome:
            return await self._driver.delete(job_id, takes)

        outcome = await self._call("delete", call)
        row = control_verdict("delete", job_id, outcome)
        log.info(
            "job %s deleted at generation %d",
            job_id,
            row.generation,
            extra={"job_id": job_id, "generation": row.generation, "state": row.state},
        )

    async def purge(
        self: _Host,
        *,
        older_than: float | timedelta,
        states: Sequence[JobState | str] = FINISHED_STATES,
        batch: int = PURGE_BATCH,
    ) -> int:
        """Delete every job in ``states`` (done, dead, cancelled) whose last change is at
        least ``older_than`` old by the store's clock; returns how many. Runs in batches
        of ``batch`` jobs (1 to 1000), each its own short transaction or script, so it
        never holds a long lock; jobs finishing meanwhile may or may not be included. The
        generations deleted raise the store's floor as `delete` does."""
        age = validate_age(older_than)
        wanted = list(validate_finished_states(states))
        size = validate_limit(batch, "batch")
        total = 0
        cursor: str | None = None
        while True:
            # Each batch from where the last ended: a repeat after a lost reply deletes
            # nothing twice, it only finds fewer jobs.
            async def call(after: str | None = cursor) -> tuple[int, str | None]:
                return await self._driver.purge(wanted, age, size, after)

            deleted, cursor = await self._call("purge", call)
            total += deleted
            if cursor is None:
                break
        log.info(
            "purged %d jobs",
            total,
            extra={"deleted": total, "states": wanted, "older_than": age},
        )
        return total

    async def pause(self: _Host, queue: str) -> None:
        """Pause ``queue``: `claim_next`, `claim_many`, `complete_and_claim` (and so every
        `Worker`) take none of its jobs until `resume`; other queues are served as
        before. Jobs can still be submitted to it, `claim` of a named job still takes it,
        and leases already held go on (renew, complete, fail, release). Idempotent: pausing
        a paused queue changes nothing. Stored in the store, so it holds for every client.
        Also named `pause_queue`."""
        name = validate_id("queue", queue)

        async def call() -> None:
            await self._driver.set_paused(name, True)

        await self._call("pause_queue", call)
        log.info("queue %s paused", name, extra={"queue": name})

    async def resume(self: _Host, queue: str) -> None:
        """Resume a paused ``queue``: its jobs are claimable again (idle workers of it are
        woken). Idempotent: resuming a queue that is not paused changes nothing. Also named
        `resume_queue`."""
        name = validate_id("queue", queue)

        async def call() -> None:
            await self._driver.set_paused(name, False)

        await self._call("resume_queue", call)
        log.info("queue %s resumed", name, extra={"queue": name})

    # The names the store had before the design's `pause` and `resume` were adopted, kept:
    # the same methods, not wrappers.
    pause_queue = pause
    resume_queue = resume

    async def paused_queues(self: _Host) -> list[str]:
        """The names of the paused queues, sorted."""
        return await self._call("paused_queues", self._driver.paused_queues)

    async def set_queue_limit(self: _Host, queue: str, n: int | None) -> None:
        """Let at most ``n`` jobs of ``queue`` be leased at once, across every client of the
        store (a fleet-wide limit); ``None`` removes the limit. Enforced inside each claim's
        own statement or script (`claim`, `claim_next`, `claim_many`,
        `complete_and_claim`), so no interleaving of claims exceeds it; a batch claim takes
        at most the room left. A lease counts until it ends or expires by the store's
        clock. Lowering the limit below the leases held ends none of them: claims wait
        until fewer are held. Idempotent; stored in the store, so it holds for every
        client. ``n``: an int from 1 to 1,000,000, or None."""
        name = validate_id("queue", queue)
        limit = validate_queue_limit(n)

        async def call() -> None:
            await self._driver.set_queue_limit(name, limit)

        await self._call("set_queue_limit", call)
        log.info(
            "queue %s limit %s",
            name,
            "removed" if limit is None else f"set to {limit}",
            extra={"queue": name, "limit": limit},
        )

    async def queue_limits(self: _Host) -> dict[str, int]:
        """Each limited queue and its limit, sorted by queue."""
        return await self._call("queue_limits", self._driver.queue_limits)

    async def set_queue_rate(
        self: _Host, queue: str, per_second: float | None, *, burst: int | None = None
    ) -> None:
        """Let at most ``per_second`` jobs of ``queue`` start a second, across every client
        of the store (a fleet-wide rate limit); ``None`` removes it. A token bucket by the
        store's clock: it holds at most ``burst`` tokens (default ``max(1,
        ceil(per_second))``) and refills at ``per_second`` tokens a second; each lease
        granted in the queue (`claim`, `claim_next`, `claim_many`, `complete_and_claim`)
        takes one, a job buried takes none. A claim takes at most the whole tokens held (and
        at most the room a queue limit leaves), decided inside its own statement or script,
        so no interleaving of claims exceeds the bucket; `claim` of a named job without a
        token answers as at a full queue limit. A new or changed rate starts the bucket
        full; setting the same rate again changes nothing (idempotent). Stored in the store,
        so it holds for every client. ``per_second``: a finite number above 0, at most
        1,000,000, or None; ``burst``: an int from 1 to 1,000,000, or None."""
        name = validate_id("queue", queue)
        rate = validate_queue_rate(per_second, burst)

        async def call() -> None:
            await self._driver.set_queue_rate(name, rate)

        await self._call("set_queue_rate", call)
        log.info(
            "queue %s rate %s",
            name,
            "removed" if rate is None else f"set to {rate[0]:g}/s, burst {rate[1]}",
            extra={
                "queue": name,
                "per_second": None if rate is None else rate[0],
                "burst": None if rate is None else rate[1],
            },
        )

    async def queue_rates(self: _Host) -> dict[str, QueueRate]:
        """Each rate-limited queue and its `QueueRate` (per_second, burst), sorted by queue."""
        found = await self._call("queue_rates", self._driver.queue_rates)
        return {queue: QueueRate(float(rate), int(burst)) for queue, (rate, burst) in found.items()}
